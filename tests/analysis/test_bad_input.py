"""Bad trace files never crash the analyzer: what can be used is, the rest is counted."""

from __future__ import annotations

import os

import orjson
import pytest

from tests.helpers import hoptrace
from tests.synthetic import chain_trace, to_otlp_json
from tracer._errors import NoUsableDataError
from tracer.analysis import analyze, load

T0 = 1_700_000_000_000_000_000


def _good_line(i: int) -> bytes:
    return orjson.dumps(to_otlp_json(chain_trace(f"{i:032x}", T0 + i)))


def test_truncated_jsonl_keeps_whole_lines_and_counts_the_rest(tmp_path):
    path = tmp_path / "t.jsonl"
    good = b"\n".join(_good_line(i) for i in range(1, 4))
    path.write_bytes(good + b"\n" + _good_line(9)[:100] + b"\nnot json at all\n")
    result = analyze(load([path]))
    assert result.traces == 3
    assert any("2 lines are not JSON" in m for m in result.warnings.messages)


def test_spans_without_ids_negative_durations_and_wrong_shapes_are_skipped(tmp_path):
    body = to_otlp_json(chain_trace("1" * 32, T0))
    spans = body["resourceSpans"][0]["scopeSpans"][0]["spans"]
    spans.append({"name": "no ids", "startTimeUnixNano": "1", "endTimeUnixNano": "2"})
    spans.append(
        {"traceId": "1" * 32, "spanId": "ab", "startTimeUnixNano": "10", "endTimeUnixNano": "5"}
    )
    path = tmp_path / "t.jsonl"
    path.write_bytes(orjson.dumps(body) + b"\n" + b'{"something": "else"}\n')
    result = analyze(load([path]))
    assert result.traces == 1
    assert result.warnings.skipped_spans == 2
    messages = " ".join(result.warnings.messages)
    assert "without a trace id" in messages and "end before they start" in messages
    assert "unknown shape" in messages


@pytest.mark.parametrize(
    "content",
    [b"", os.urandom(2048), b'{"data": [', b"[1, 2, 3]", b'{"resourceSpans": []}'],
    ids=["empty", "binary", "truncated", "wrong-shape", "no-spans"],
)
def test_unusable_file_is_one_line_error_and_nonzero_exit(tmp_path, content):
    path = tmp_path / "bad.json"
    path.write_bytes(content)
    with pytest.raises(NoUsableDataError):
        analyze(load([path]))
    proc = hoptrace("analyze", str(path))
    assert proc.returncode == 2
    assert proc.stderr.startswith("hoptrace: error: no trace could be analysed")
    assert "Traceback" not in proc.stderr and proc.stderr.count("\n") == 1


def test_unreachable_jaeger_url_is_a_clear_error():
    from collector import free_port

    proc = hoptrace("analyze", f"http://127.0.0.1:{free_port()}", "--service", "x")
    assert proc.returncode == 2
    assert "nothing answers at" in proc.stderr and "Traceback" not in proc.stderr


def test_utf16_file_with_bom_is_read(tmp_path, fixtures_dir):
    text = (fixtures_dir / "petclinic_jaeger_v1_trace.json").read_text()
    path = tmp_path / "utf16.json"
    path.write_bytes(text.encode("utf-16"))
    assert analyze(load([path])).spans == 5


def test_unreadable_event_times_do_not_break_loading():
    from tracer.spans.model import Warnings
    from tracer.spans.otlp import spans_from_otlp_json

    body = to_otlp_json(chain_trace("3" * 32, T0, model_ttft_ms=100.0))
    for rs in body["resourceSpans"]:
        for ss in rs["scopeSpans"]:
            for span in ss["spans"]:
                span["events"] = [{"name": "hoptrace.first_token", "timeUnixNano": "soon"}, "x"]
    warnings = Warnings()
    spans = [s for o in [body] for s in spans_from_otlp_json(o, warnings)]
    assert len(spans) == 11 and warnings.skipped_spans == 0
    # The unreadable marks are ignored, the spans kept.
    assert all(s.first_token_ns is None for s in spans)


def test_odd_attribute_shapes_and_absurd_marks_load_without_a_traceback(tmp_path):
    span = {
        "traceId": "a" * 32, "spanId": "b" * 16, "startTimeUnixNano": "1000",
        "endTimeUnixNano": "2000",
        "attributes": [
            {"key": "array-not-object", "value": {"arrayValue": [1]}},
            {"key": ["unhashable"], "value": {"kvlistValue": {"values": [5]}}},
            {"key": "gen_ai.response.time_to_first_chunk", "value": {"doubleValue": 1e300}},
            {"key": "deep", "value": "DEEP"},
        ],
    }  # fmt: skip
    doc = {"resourceSpans": [{"resource": [1], "scopeSpans": [{"spans": [span]}]}]}
    # An array nested 300 deep, written as text (encoders refuse that depth).
    deep = '{"arrayValue": {"values": [' * 300 + '{"stringValue": "x"}' + "]}}" * 300
    path = tmp_path / "odd.json"
    path.write_text(__import__("json").dumps(doc).replace('"DEEP"', deep))
    from tests.helpers import hoptrace

    done = hoptrace("analyze", str(path), "--format", "json")
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    assert __import__("json").loads(done.stdout)["traces"] == 1
