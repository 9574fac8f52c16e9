"""``hoptrace runs``, the note when traces mix runs, and compare of two runs of one source."""

from __future__ import annotations

import orjson
import pytest

from collector.store import SpanStore
from tests.helpers import hoptrace
from tests.synthetic import SEED_MS, chain_trace, to_otlp_json
from tracer import attributes as attrs

T0 = 1_700_000_000_000_000_000
MS = 1_000_000

#: (run label, traces, inference ms, bench concurrency or None), in start order.
RUNS = [
    ("bench-1a2b-warmup", 2, 400.0, 4),
    ("bench-1a2b-c4", 5, 400.0, 4),
    ("d1:baseline", 4, 400.0, None),
    ("d1:candidate", 4, 100.0, None),
]


def _traces(runs=RUNS, unlabelled=0):
    traces, n = [], 0
    for label, count, inference_ms, level in runs:
        for _ in range(count):
            n += 1
            spans = chain_trace(
                f"{n:032x}", T0 + n * 1000 * MS, {**SEED_MS, "inference": inference_ms}
            )
            root = min(spans, key=lambda s: s.start_ns)
            root.attributes[attrs.RUN] = label
            if level is not None:
                root.attributes[attrs.BENCH_CONCURRENCY] = level
            traces.append(spans)
    for _ in range(unlabelled):
        n += 1
        traces.append(chain_trace(f"{n:032x}", T0 + n * 1000 * MS, dict(SEED_MS)))
    return traces


def _otlp(path, traces):
    path.write_bytes(b"\n".join(orjson.dumps(to_otlp_json(t)) for t in traces))
    return path


@pytest.fixture
def mixed_file(tmp_path):
    return _otlp(tmp_path / "runs.jsonl", _traces(unlabelled=1))


@pytest.fixture
def mixed_store(tmp_path):
    path = tmp_path / "runs.db"
    with SpanStore(path, create=True) as store:
        store.write([s for t in _traces() for s in t])
    return path


def _runs(source):
    proc = hoptrace("runs", str(source), "--format", "json")
    assert proc.returncode == 0, proc.stderr
    return orjson.loads(proc.stdout)


def test_runs_lists_each_run_with_its_count_and_kind(mixed_file):
    found = _runs(mixed_file)
    assert [(r["label"], r["traces"], r["kind"]) for r in found] == [
        ("bench-1a2b-warmup", 2, "warm-up"),
        ("bench-1a2b-c4", 5, "bench level c=4"),
        ("d1:baseline", 4, "demo baseline"),
        ("d1:candidate", 4, "demo candidate"),
        ("(no run)", 1, "run"),
    ]
    bench = found[1]
    assert bench["span_s"] == pytest.approx(4.0)
    assert bench["first_start"].endswith("Z") and bench["first_start"] < bench["last_start"]
    assert bench["last_start_ns"] - bench["first_start_ns"] == 4000 * MS
    assert "gateway" in bench["services"]


def test_runs_reads_a_store_as_a_file(mixed_store):
    assert [(r["label"], r["traces"]) for r in _runs(mixed_store)] == [
        ("bench-1a2b-warmup", 2),
        ("bench-1a2b-c4", 5),
        ("d1:baseline", 4),
        ("d1:candidate", 4),
    ]


def test_runs_table_names_every_run(mixed_file):
    proc = hoptrace("runs", str(mixed_file))
    assert proc.returncode == 0, proc.stderr
    for text in (
        "5 runs, 16 traces",
        "bench-1a2b-c4",
        "bench level c=4",
        "d1:candidate",
        "(no run)",
    ):
        assert text in proc.stdout


@pytest.mark.parametrize(
    "command", [["analyze"], ["whatif", "--stage", "inference", "--speedup", "2"]]
)
def test_analysis_notes_in_one_line_when_traces_mix_runs(mixed_store, command):
    proc = hoptrace(*command, str(mixed_store), "--format", "json")
    assert proc.returncode == 0, proc.stderr
    notes = [line for line in proc.stderr.splitlines() if line.startswith("note: ")]
    assert notes == [
        "note: these traces mix 4 runs (bench-1a2b-c4, d1:baseline, d1:candidate, ...); "
        "pick one with --run PATTERN (hoptrace runs lists them)"
    ]
    orjson.loads(proc.stdout)  # stdout stays the JSON


def test_check_notes_mixed_runs_on_a_file(mixed_file, tmp_path):
    budget = tmp_path / "budget.toml"
    budget.write_text("[e2e]\np99_ms = 100000\n")
    proc = hoptrace("check", str(mixed_file), "--budget", str(budget))
    assert proc.returncode == 0, proc.stderr
    assert "note: these traces mix 4 runs" in proc.stderr


def test_analysis_says_nothing_of_runs_with_run_split_by_or_one_run(mixed_store, tmp_path):
    split = hoptrace("analyze", str(mixed_store), "--split-by", "hoptrace.run")
    assert split.returncode == 0, split.stderr
    assert "note:" not in split.stderr and "d1:candidate" in split.stdout
    picked = hoptrace("analyze", str(mixed_store), "--run", "*:baseline", "--format", "json")
    assert picked.returncode == 0, picked.stderr
    assert "note:" not in picked.stderr
    assert orjson.loads(picked.stdout)["traces"] == 4
    single = _otlp(tmp_path / "one.jsonl", _traces(runs=[("only", 3, 400.0, None)]))
    proc = hoptrace("analyze", str(single), "--format", "json")
    assert proc.returncode == 0, proc.stderr
    assert "note:" not in proc.stderr


@pytest.mark.parametrize("source", ["mixed_file", "mixed_store"])
def test_compare_two_runs_of_one_source(request, source):
    path = str(request.getfixturevalue(source))
    proc = hoptrace(
        "compare", path, path, "--baseline-run", "*:baseline", "--candidate-run", "*:candidate",
        "--format", "json",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    out = orjson.loads(proc.stdout)
    assert out["baseline"]["traces"] == out["candidate"]["traces"] == 4
    baseline_ms = sum(SEED_MS.values()) - SEED_MS["inference"] + 400.0
    candidate_ms = baseline_ms - 300.0
    assert out["e2e_ratio"]["p50"] == pytest.approx(candidate_ms / baseline_ms, rel=0.02)
    assert out["moved_most"] == "inference"
    assert "note:" not in proc.stderr


@pytest.mark.parametrize(
    "flag, value",
    [
        ("--run", "nosuchrun"),
        ("--since", "1h"),  # the store's traces are from long ago: it keeps none
    ],
)
def test_a_filter_that_matches_nothing_says_so_and_where_to_look(mixed_store, flag, value):
    proc = hoptrace("analyze", str(mixed_store), flag, value)
    assert proc.returncode == 2
    assert proc.stderr.strip() == (
        f"hoptrace: error: no trace matches {flag} {value!r}; hoptrace runs SOURCE lists "
        "the runs a source holds"
    )


def test_an_open_loop_bench_level_is_listed_by_its_rate(tmp_path):
    traces = _traces(runs=[("bench-9f9f-r20", 3, 400.0, None)])
    for spans in traces:
        root = min(spans, key=lambda s: s.start_ns)
        root.attributes[attrs.BENCH_RATE] = 20.0
    (run,) = _runs(_otlp(tmp_path / "open.jsonl", traces))
    assert (run["label"], run["kind"]) == ("bench-9f9f-r20", "bench level 20/s")
