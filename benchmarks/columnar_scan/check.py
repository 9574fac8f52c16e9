import json
import os
import sys

os.environ.setdefault("NUMBA_NUM_THREADS", "1")
import driver
import numpy as np
import scan

PATH = sys.argv[1] if len(sys.argv) > 1 else ""
NLINES = int(sys.argv[2]) if len(sys.argv) > 2 else 2000


def kernel_rows(data):
    arr = np.frombuffer(data, np.uint8)
    bufs = driver.Buffers()
    U, icols, LF = [], [], []
    line0 = 0
    for s, e in driver.block_bounds(data):
        ns, nl = driver.run_block(arr, s, e, line0, bufs)
        U.append(bufs.u[:ns].copy())
        icols.append(bufs.i[:ns].copy())
        LF.append(bufs.lf[:nl].copy())
        line0 += nl
    return np.concatenate(U), np.concatenate(icols), np.concatenate(LF)


def expected(lines):
    """reference spans from json.loads: list per line"""
    out = []
    for li, line in enumerate(lines):
        d = json.loads(line)
        for rs in d.get("resourceSpans", []):
            svc = None
            for a in rs.get("resource", {}).get("attributes", []):
                if a.get("key") == "service.name":
                    svc = a["value"].get("stringValue")
            for ss in rs.get("scopeSpans", []):
                for sp in ss.get("spans", []):
                    t = sp["traceId"]
                    ft = [
                        int(ev["timeUnixNano"])
                        for ev in sp.get("events", [])
                        if ev.get("name") == "hoptrace.first_token"
                    ]
                    out.append(
                        dict(
                            line=li,
                            thi=int(t[:16], 16),
                            tlo=int(t[16:], 16),
                            sid=int(sp["spanId"], 16),
                            pid=int(sp["parentSpanId"], 16) if sp.get("parentSpanId") else 0,
                            start=int(sp.get("startTimeUnixNano", 0)),
                            end=int(sp.get("endTimeUnixNano", 0)),
                            kind=sp.get("kind", 0),
                            status=sp.get("status", {}).get("code", 0),
                            name=sp.get("name", ""),
                            attrs=sp.get("attributes", []),
                            nev=len(sp.get("events", [])),
                            ftok=min(ft) if ft else 0,
                            svc=svc,
                        )
                    )
    return out


def compare(data, lines, verbose=True):
    U, icols, LF = kernel_rows(data)
    exp = expected(list(lines))
    flagged = set(np.flatnonzero(LF).tolist())
    exp = [x for x in exp if x["line"] not in flagged]
    mism = 0
    fields = {}
    if len(exp) != len(U):
        print("span count differs", len(exp), len(U))
        mism += abs(len(exp) - len(U))
    for k, x in enumerate(exp[: len(U)]):
        u = U[k]
        i = icols[k]
        name = (
            data[i[scan.I_NOFF] : i[scan.I_NOFF] + i[scan.I_NLEN]].decode()
            if i[scan.I_NOFF] >= 0
            else ""
        )
        at = (
            json.loads(data[i[scan.I_AOFF] : i[scan.I_AOFF] + i[scan.I_ALEN]])
            if i[scan.I_AOFF] >= 0
            else []
        )
        svc = (
            data[i[scan.I_SOFF] : i[scan.I_SOFF] + i[scan.I_SLEN]].decode()
            if i[scan.I_SOFF] >= 0
            else None
        )
        got = dict(
            line=int(i[scan.I_LINE]),
            thi=int(u[scan.U_THI]),
            tlo=int(u[scan.U_TLO]),
            sid=int(u[scan.U_SID]),
            pid=int(u[scan.U_PID]),
            start=int(i[scan.I_START]),
            end=int(i[scan.I_END]),
            kind=int(i[scan.I_KIND]),
            status=int(i[scan.I_STATUS]),
            name=name,
            attrs=at,
            nev=int(i[scan.I_NEV]),
            ftok=int(i[scan.I_FTOK]),
            svc=svc,
        )
        bad = [f for f in x if x[f] != got[f]]
        # hashes must be consistent with bytes
        if int(u[scan.U_NHASH]) != int(
            scan.hash_bytes(np.frombuffer(name.encode(), np.uint8), 0, len(name.encode()))
        ):
            bad.append("nhash")
        if bad:
            mism += 1
            for f in bad:
                fields[f] = fields.get(f, 0) + 1
    if verbose:
        print(
            f"lines={len(lines)} spans_expected={len(exp)} spans_kernel={len(U)} "
            f"mismatched_spans={mism} fields={fields} flagged_lines={len(flagged)} "
            f"flag_reasons={np.bincount(LF).tolist()}"
        )
    return mism, LF


if __name__ == "__main__":
    if not PATH:
        sys.exit("usage: python benchmarks/columnar_scan/check.py FILE.jsonl [LINES]")
    with open(PATH, "rb") as f:
        lines = [f.readline() for _ in range(NLINES)]
    lines = [x for x in lines if x]
    data = b"".join(lines)
    compare(data, [x.rstrip(b"\n") for x in lines])
