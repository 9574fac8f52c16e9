"""Cached prompt tokens in the breakdown, and TTFT by how much of the prompt was cached:
per request (:class:`TraceBreakdown`), in aggregate, in ``analyze``'s JSON and table."""

from __future__ import annotations

import json

import orjson

from tests.analysis.test_engines import CLIENT, SERVER, otlp, span
from tests.helpers import hoptrace
from tracer import attributes as attrs
from tracer.analysis import analyze, break_down, load, prepare
from tracer.spans.model import Warnings

#: (cached prompt tokens of 1000, time to first chunk in seconds): three requests with
#: nothing cached, three with a quarter, three with nine tenths.
REQUESTS = [(0, 0.30), (0, 0.32), (0, 0.34)]
REQUESTS += [(250, 0.15), (250, 0.16), (250, 0.17)]
REQUESTS += [(900, 0.04), (900, 0.05), (900, 0.06)]


def _file(tmp_path, cached_key: str = attrs.GEN_AI_CACHE_READ_TOKENS):
    docs = []
    for n, (cached, ttfc) in enumerate(REQUESTS):
        root = span("POST /chat", SERVER, 0, 400)
        call = span(
            "chat m", CLIENT, 1, 399, root,
            {
                "gen_ai.operation.name": "chat",
                attrs.GEN_AI_INPUT_TOKENS: 1000,
                attrs.GEN_AI_OUTPUT_TOKENS: 20,
                cached_key: cached,
                attrs.GEN_AI_TIME_TO_FIRST_CHUNK: ttfc,
            },
        )  # fmt: skip
        docs.append(otlp(f"{n + 1:032x}", {"app": [root, call]}))
    path = tmp_path / "cached.jsonl"
    path.write_bytes(b"\n".join(orjson.dumps(d) for d in docs) + b"\n")
    return path


def test_cached_tokens_per_request_and_ttft_by_cached_fraction(tmp_path):
    traces = load([_file(tmp_path)])
    first = prepare(f"{1:032x}", traces.traces[f"{1:032x}"], Warnings())
    assert first is not None and break_down(first).cached_tokens == 0
    last = prepare(f"{9:032x}", traces.traces[f"{9:032x}"], Warnings())
    assert last is not None and break_down(last).cached_tokens == 900
    cache = analyze(traces).cache
    assert cache is not None
    assert (cache.requests, cache.cached_total, cache.input_total) == (9, 3450, 9000)
    assert abs(cache.cached_share - 3450 / 9000) < 1e-12
    by = {b.name: b for b in cache.buckets}
    assert [by[k].requests for k in ("none", "partial", "mostly")] == [3, 3, 3]
    # Client TTFT is from the server span's start, the chat span starts 1 ms later.
    assert abs(by["none"].ttft_p50_ms - 321.0) < 1e-6
    assert abs(by["partial"].ttft_p50_ms - 161.0) < 1e-6
    assert abs(by["mostly"].ttft_p50_ms - 51.0) < 1e-6
    assert abs(by["mostly"].model_ttft_p50_ms - 50.0) < 1e-6


def test_the_other_cached_token_names_count_too(tmp_path):
    for key in (attrs.GEN_AI_CACHED_TOKENS, attrs.OPENINFERENCE_CACHE_READ_TOKENS):
        cache = analyze(load([_file(tmp_path, key)])).cache
        assert cache is not None and cache.cached_total == 3450


def test_analyze_reports_the_cache_in_json_and_table(tmp_path):
    path = _file(tmp_path)
    done = hoptrace("analyze", str(path), "--format", "json")
    assert done.returncode == 0, done.stderr
    cache = json.loads(done.stdout)["cache"]
    assert cache["requests"] == 9 and abs(cache["cached_tokens_per_request"] - 3450 / 9) < 1e-5
    rows = {r["cached"]: r for r in cache["ttft_by_cached_fraction"]}
    assert rows["none"]["ttft_p50_ms"] == 321.0 and rows["mostly"]["ttft_p50_ms"] == 51.0
    table = hoptrace("analyze", str(path))
    assert table.returncode == 0, table.stderr
    assert "Prefix cache" in table.stdout
    assert "383.3 cached prompt tokens per request over 9 requests: 38%" in table.stdout
    line = next(x for x in table.stdout.splitlines() if "half or more" in x)
    assert "51.0" in line


def test_no_cache_section_without_cached_counts(tmp_path):
    root = span("POST /chat", SERVER, 0, 10)
    call = span("chat m", CLIENT, 1, 9, root, {"gen_ai.operation.name": "chat"})
    path = tmp_path / "plain.jsonl"
    path.write_bytes(orjson.dumps(otlp("ab" * 16, {"app": [root, call]})) + b"\n")
    assert analyze(load([path])).cache is None
