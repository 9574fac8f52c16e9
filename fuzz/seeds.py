"""Write the fuzzing seed corpus into a folder: generated lines (the seven-stage chain,
LLM calls with engine latencies and token counts, events and errors), hand-made lines of
each class of defect found so far (a member twice, a value taken out of a template that
reads as a literal, a kvlist key that is an object, token counts written as odd text, cut
lines), the shared reproducers and the harness's own findings (``fuzz/crashes/``).

    python fuzz/seeds.py FOLDER [--repro DIR]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

# The checkout's tests/synthetic.py (test data, not shipped in the package).
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.synthetic import mixed_traces, to_otlp_json  # noqa: E402

#: Seeds longer than this are cut: the fuzzer's -max_len (fuzz/run).
MAX_LEN = 16384
_TRACE = "0af7651916cd43dd8448eb211c80319c"


def _generated() -> list[bytes]:
    out = [
        json.dumps(to_otlp_json(trace), separators=(",", ":")).encode()
        for trace in mixed_traces(24, seed=11)
    ]
    # two lines of one service each, as a Collector's file exporter writes them
    return out + [out[1] + b"\n" + out[2], out[3] + b"\n" + out[3]]


def _span(attributes: str, **fields: str) -> str:
    more = "".join(f',"{k}":{v}' for k, v in fields.items())
    return (
        f'{{"traceId":"{_TRACE}","spanId":"1111111111111111","name":"chat",'
        f'"startTimeUnixNano":"1700000000000000001","endTimeUnixNano":"1700000000000000002",'
        f'"attributes":{attributes}{more}}}'
    )


def _line(*spans: str) -> bytes:
    resource = '{"attributes":[{"key":"service.name","value":{"stringValue":"app"}}]}'
    return (
        f'{{"resourceSpans":[{{"resource":{resource},"scopeSpans":[{{"spans":[{",".join(spans)}]}}]}}]}}'
    ).encode()


def _hand_made() -> list[bytes]:
    lists = [
        '[{"key":"k","value":{"stringValue":"a"},"value":{"doubleValue":1.5,"x":0}}]',
        '[{"key":"k","value":{"intValue":"1"},"value":{"intValue":"7","x":0}}]',
        '[{"key":"a","value":{"intValue":"5"}},{"key":"b","value":{"stringValue":"s"}}]',
        '[{"key":"a","value":{"intValue":""}},{"key":"b","value":{"stringValue":"t"}}]',
        '[{"key":"x","value":{"kvlistValue":{"values":[{"key":{},"value":{}}]}}}]',
        '[{"key":"gen_ai.usage.input_tokens","value":{"stringValue":"--1"}}]',
        '[{"key":"gen_ai.usage.output_tokens","value":{"intValue":"12"}},'
        '{"key":"gen_ai.latency.time_in_queue","value":{"doubleValue":0.25}},'
        '{"key":"hoptrace.stage","value":{"stringValue":"inference"}}]',
        '[{"key":"gen_ai.latency.time_to_first_token","value":{"doubleValue":0.5}}]',
    ]
    events = '[{"name":"hoptrace.first_token","timeUnixNano":"1700000000000000002"}]'
    out = [_line(_span(a), _span(a.replace("1", "2"))) for a in lists]
    out.append(_line(_span(lists[6], events=events, status='{"code":2}', kind="3")))
    whole = out[0]
    out.append(whole[: len(whole) // 2])  # a cut line, as a killed writer leaves
    return out


def _files(folder: Path) -> list[bytes]:
    if not folder.is_dir():
        return []
    found = []
    for path in sorted(folder.iterdir()):
        if path.is_file() and path.name != "README.md":
            found.extend(line for line in path.read_bytes().split(b"\n") if line)
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--repro", type=Path, action="append", default=[])
    args = parser.parse_args()
    args.folder.mkdir(parents=True, exist_ok=True)
    seeds = _generated() + _hand_made()
    for folder in [*args.repro, Path(__file__).parent / "crashes"]:
        seeds += _files(folder)
    for seed in seeds:
        seed = seed[:MAX_LEN]
        name = hashlib.sha1(seed).hexdigest()
        (args.folder / name).write_bytes(seed)
    print(f"{len(seeds)} seeds in {args.folder}")


if __name__ == "__main__":
    main()
