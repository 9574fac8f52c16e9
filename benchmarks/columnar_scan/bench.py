import json
import os
import statistics
import sys
import time

os.environ["NUMBA_NUM_THREADS"] = "1"
import driver
import msgspec
import numpy as np
import orjson

if len(sys.argv) < 2:
    sys.exit("usage: python benchmarks/columnar_scan/bench.py FILE.jsonl [REPETITIONS]")
PATH = sys.argv[1]
REPS = int(sys.argv[2]) if len(sys.argv) > 2 else 5

with open(PATH, "rb") as f:
    data = f.read()
lines = data.split(b"\n")
if lines and not lines[-1]:
    lines.pop()
arr = np.frombuffer(data, np.uint8)
bounds = driver.block_bounds(data)
print(f"{len(data) / 1e6:.1f} MB, {len(lines)} lines, {len(bounds)} blocks of ~8 MB")

# warm (numba cache already populated; this loads it + touches pages)
t0 = time.perf_counter()
tot, nl, fl = driver.kernel_only(arr, bounds)
print(f"warm-up kernel pass {time.perf_counter() - t0:.3f}s spans={tot} lines={nl} flagged={fl}")
r = driver.full_pipeline(data, arr, bounds)
print(
    f"distinct names={len(r['names'])} attrs={len(r['attrs'])} services={len(r['svcs'])} "
    f"traces={len(r['starts'])} spans={len(r['order'])}"
)
del r


def a():
    loads = json.loads
    for line in lines:
        loads(line)


def b():
    driver.kernel_only(arr, bounds)


def c():
    driver.full_pipeline(data, arr, bounds)


def c_dec():
    driver.full_pipeline(data, arr, bounds, attr_make=lambda bs: bs.decode())


def c_gcoff():
    import gc

    gc.disable()
    try:
        driver.full_pipeline(data, arr, bounds)
    finally:
        gc.enable()


def d():
    loads = orjson.loads
    for line in lines:
        loads(line)


def e():
    dec = msgspec.json.Decoder().decode
    for line in lines:
        dec(line)


fns = [
    ("a json.loads", a),
    ("b kernel", b),
    ("c kernel+map+group (attrs->orjson.loads)", c),
    ("c'' same as c, gc disabled during run", c_gcoff),
    ("c' kernel+map+group (attrs->bytes.decode)", c_dec),
    ("d orjson.loads (ref)", d),
    ("e msgspec decode (ref)", e),
]
res = {k: [] for k, _ in fns}
for rep in range(REPS):
    for k, fn in fns:
        t0 = time.perf_counter()
        fn()
        dt = time.perf_counter() - t0
        res[k].append(dt)
        print(f"rep {rep} {k}: {dt:.3f}s", flush=True)

ma = statistics.median(res["a json.loads"])
print("\n| run | median s | min-max s | median / a |")
print("|---|---|---|---|")
for k, v in res.items():
    m = statistics.median(v)
    print(f"| {k} | {m:.3f} | {min(v):.3f}-{max(v):.3f} | {m / ma:.3f} |")
