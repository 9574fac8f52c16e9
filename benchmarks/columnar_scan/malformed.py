import json
import os

os.environ.setdefault("NUMBA_NUM_THREADS", "1")
import check

SPAN = (
    '{"traceId":"0123456789abcdef0123456789ABCDEF","spanId":"00000000000f1b36",'
    '"parentSpanId":"00000000000f1b35","name":"POST /generate","kind":2,'
    '"startTimeUnixNano":"1750000000206040218","endTimeUnixNano":"1750000001496425431",'
    '"attributes":[{"key":"a","value":{"stringValue":"x\\"y"}},{"key":"n","value":{"intValue":"5"}}],'
    '"status":{"code":0},"events":[{"name":"log","timeUnixNano":"1"},'
    '{"name":"hoptrace.first_token","timeUnixNano":"1750000000530676246"}]}'
)
SPAN2 = SPAN.replace("00000000000f1b36", "00000000000f1b37")


def line(spans, res='{"attributes":[{"key":"service.name","value":{"stringValue":"app"}}]}'):
    return (
        '{"resourceSpans":[{"resource":'
        + res
        + ',"scopeSpans":[{"scope":{"name":"s"},"spans":['
        + ",".join(spans)
        + "]}]}]}"
    )


GOOD = line([SPAN, SPAN2])
cases = {
    # --- must be flagged
    "truncated line": GOOD[: len(GOOD) // 2],
    'name with \\" escape': line([SPAN.replace('"POST /generate"', '"POST \\"x\\""')]),
    "spanId 15 chars": line([SPAN.replace('"00000000000f1b36"', '"0000000000f1b36"')]),
    "traceId non-hex": line([SPAN.replace("0123456789abcdef0123", "0123456789abcdefg123")]),
    "kind as string": line([SPAN.replace('"kind":2', '"kind":"SPAN_KIND_SERVER"')]),
    "start as float number": line([SPAN.replace('"1750000000206040218"', "1.75e18")]),
    "start > int64": line([SPAN.replace('"1750000000206040218"', '"9999999999999999999"')]),
    "duplicate spanId key": line(
        [SPAN.replace('"kind":2', '"kind":2,"spanId":"00000000000f1b99"')]
    ),
    "malformed nested unknown (missing comma)": line(
        [SPAN.replace('"kind":2', '"links":[{"a":[1 2]}],"kind":2')]
    ),
    "unknown value bad literal": line([SPAN.replace('"kind":2', '"x":tru,"kind":2')]),
    "trailing garbage": GOOD + " x",
    "empty line": "",
    "raw control char in string": line([SPAN.replace("POST /generate", "POST\x01")]),
    "escaped key (\\u0074raceId)": line([SPAN.replace('"traceId"', '"\\u0074raceId"')]),
    "service.name with escape": line(
        [SPAN], res='{"attributes":[{"key":"service.name","value":{"stringValue":"a\\\\b"}}]}'
    ),
    "missing traceId": line([SPAN.replace('"traceId":"0123456789abcdef0123456789ABCDEF",', "")]),
    "NaN in unknown": line([SPAN.replace('"kind":2', '"x":NaN,"kind":2')]),
    "unterminated string at end": GOOD[:40],
    # --- must be parsed exactly (not flagged)
    "nested unknown key w/ arrays of objects": line(
        [
            SPAN.replace(
                '"kind":2',
                '"links":[{"traceId":"zz","attributes":[{"k":[{"x":[1,-2.5e3,true,null,{}],"y":"q\\\\\\"\\u00e9"}]}]},[]],'
                '"droppedAttributesCount":0,"kind":2',
            ),
            SPAN2,
        ]
    ),
    "keys reversed + whitespace": line(
        [
            json.dumps(
                dict(reversed(list(json.loads(SPAN).items()))),
                indent=None,
                separators=(" , ", " : "),
            )
        ]
    ),
    "resource after scopeSpans": (
        '{"resourceSpans":[{"scopeSpans":[{"spans":[' + SPAN + ']}],"schemaUrl":"u",'
        '"resource":{"attributes":[{"value":{"stringValue":"svc2"},"key":"service.name"}]}}]}'
    ),
    "start/end as JSON integers": line(
        [SPAN.replace('"1750000000206040218"', "1750000000206040218")]
    ),
    "no parentSpanId / empty parent": line([SPAN.replace('"00000000000f1b35"', '""')]),
}

must_parse = {
    "nested unknown key w/ arrays of objects",
    "keys reversed + whitespace",
    "resource after scopeSpans",
    "start/end as JSON integers",
    "no parentSpanId / empty parent",
}

reasons = {
    1: "malformed",
    2: "escape",
    3: "type",
    4: "id",
    5: "num",
    6: "dup",
    7: "missing",
    8: "depth",
}
ok_all = True
for name, bad in cases.items():
    lines = [GOOD, bad, GOOD]
    data = ("\n".join(lines) + "\n").encode()
    U, icols, LF = check.kernel_rows(data)
    f = int(LF[1]) if len(LF) > 1 else -1
    neigh_ok = len(LF) == 3 and LF[0] == 0 and LF[2] == 0
    if name in must_parse:
        mism, _ = check.compare(data, [x.encode() for x in lines], verbose=False)
        res = f == 0 and mism == 0 and neigh_ok
        print(f"{'OK ' if res else 'BAD'} {name:45s} flag={f} mismatches={mism} lines={len(LF)}")
    else:
        try:
            json.loads(bad)
            jl = "json.loads ok"
        except Exception:
            jl = "json.loads raises"
        res = f > 0 and neigh_ok and len(U) == 4
        print(
            f"{'OK ' if res else 'BAD'} {name:45s} flag={f}({reasons.get(f)}) spans_kept={len(U)} "
            f"neighbours_ok={neigh_ok} [{jl}]"
        )
    ok_all &= res
print("ALL OK" if ok_all else "SOME FAILED")
