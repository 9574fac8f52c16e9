"""``--engine dask`` on a real LocalCluster of worker processes gives the serial output."""

from __future__ import annotations

import os
import random
import sys
from pathlib import Path

import orjson
import pytest

from tests.analysis.standins import TempoStandIn, recent_traces
from tests.helpers import hoptrace, skip_or_fail, write_otlp_lines
from tests.synthetic import SEED_MS, chain_trace
from tracer._errors import ConfigError, SourceError
from tracer.analysis import analyze, analyze_sources, load, render
from tracer.analysis.execution import dask_engine as _dask
from tracer.analysis.execution.bigfile import analyze_files as analyze_locally
from tracer.analysis.query import Query

try:
    import distributed
except ImportError:  # the dev extra installs it; a bare clone skips (CI fails)
    distributed = None

T0 = 1_700_000_000_000_000_000
MS = 1_000_000
_MIXED = (
    "note: these traces mix 2 runs (even, odd); pick one with --run PATTERN "
    "(hoptrace runs lists them)"
)


def _traces(count: int, seed: int) -> list[list]:
    rng = random.Random(seed)
    out = []
    for i in range(count):
        ms = {k: v * rng.uniform(0.5, 1.5) for k, v in SEED_MS.items()}
        trace_id = f"{rng.getrandbits(128):032x}"
        spans = chain_trace(trace_id, T0 + i * 700 * MS, ms, model_ttft_ms=80.0, tokens=(400, 90))
        next(s for s in spans if s.parent_id is None).attributes["hoptrace.run"] = (
            "even" if i % 2 == 0 else "odd"
        )
        out.append(spans)
    return out


def _shuffled(path: Path, traces: int = 60, seed: int = 4) -> Path:
    """Every span in a random place, five to a line, with a bad line in the middle: most
    traces end up spread over the whole file."""
    spans = [s for t in _traces(traces, seed) for s in t]
    random.Random(seed).shuffle(spans)
    write_otlp_lines(path, [spans[i : i + 5] for i in range(0, len(spans), 5)])
    lines = path.read_bytes().splitlines(keepends=True)
    lines.insert(len(lines) // 2, b"not json\n")
    path.write_bytes(b"".join(lines))
    return path


class _Heard(list):
    """A progress callback that keeps what it hears: (phase, done, total) tuples."""

    def __call__(self, phase: str, done: int, total: int) -> None:
        self.append((phase, done, total))


def _json(analysis: object) -> str:
    """What ``hoptrace analyze --format json`` prints for ``analysis``."""
    return render.dumps(render.analysis_dict(analysis))  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def dask_installed() -> None:
    if distributed is None:
        skip_or_fail("Dask is not installed: pip install -e '.[dev]' (or '.[dask]')")


@pytest.fixture(scope="module")
def scheduler(dask_installed):
    """The address of one LocalCluster of two worker processes for the whole module."""
    with distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
    ) as cluster:
        yield cluster.scheduler_address


@pytest.mark.integration
def test_traces_straddling_partitions_are_joined_on_the_workers_like_serial(tmp_path, scheduler):
    path = _shuffled(tmp_path / "shuffled.jsonl")
    whole = analyze(load([path]))
    serial = analyze_locally([path], Query(workers=1))
    heard = _Heard()
    spread = _dask.analyze_files(
        [path],
        Query(engine="dask", window_spans=7, scheduler=scheduler),
        progress=heard,
        partition_bytes=path.stat().st_size // 9,
    )
    joined = [done for phase, done, _ in heard if phase == "joining"]
    assert joined and joined[0] > 30  # most of the 60 traces had parts in several partitions
    reads = [(done, total) for phase, done, total in heard if phase == "reading"]
    assert reads[-1] == (path.stat().st_size, path.stat().st_size)
    assert spread.traces == whole.traces == 60
    assert _json(spread) == _json(serial) == _json(whole)
    assert any("not JSON" in m for m in spread.warnings.messages)


@pytest.mark.integration
@pytest.mark.parametrize("group_by", ["stage", "service"])
def test_traces_split_across_two_files_and_filters_match_serial(tmp_path, scheduler, group_by):
    traces = _traces(40, seed=8)
    first = write_otlp_lines(
        tmp_path / "a.jsonl", [[s for s in t if s.service != "app"] for t in traces]
    )
    second = write_otlp_lines(
        tmp_path / "b.jsonl", [[s for s in t if s.service == "app"] for t in traces]
    )
    for keep in ({}, {"run": "even"}, {"service": "model"}):
        serial = analyze_locally([first, second], Query(group_by=group_by, workers=1, **keep))
        heard = _Heard()
        spread = _dask.analyze_files(
            [first, second],
            Query(group_by=group_by, **keep, engine="dask", scheduler=scheduler),
            progress=heard,
            partition_bytes=first.stat().st_size // 3,
        )
        assert ("joining", 40, 40) in heard  # every trace had a part in each file
        assert _json(spread) == _json(serial)
    assert (
        analyze_locally([first, second], Query(group_by=group_by, workers=1, run="even")).traces
        == 20
    )


@pytest.mark.integration
def test_the_store_in_trace_id_ranges_matches_serial(tmp_path, scheduler):
    from collector.store import SpanStore

    spans = [s for t in _traces(50, seed=12) for s in t]
    random.Random(3).shuffle(spans)
    path = tmp_path / "spans.db"
    with SpanStore(path, create=True) as store:
        for i in range(0, len(spans), 11):
            store.write(spans[i : i + 11])
    for keep in ({}, {"run": "odd"}):
        serial, _ = analyze_sources([str(path)], Query(**keep))
        heard = _Heard()
        spread = _dask.analyze_store(
            path, Query(engine="dask", **keep, scheduler=scheduler), progress=heard
        )
        ranges = heard[-1][2]
        assert heard[-1] == ("attributing", ranges, ranges) and ranges == 8  # 2 workers x 4
        assert _json(spread) == _json(serial)
        assert spread.traces == (25 if keep else 50)


@pytest.mark.integration
def test_analyze_sources_takes_the_engine_scheduler_and_a_stage_map(tmp_path, scheduler):
    from tracer.analysis import load_stage_map

    traces = _traces(30, seed=6)
    for spans in traces:  # the auth step not instrumented: only the stage map names it
        for span in spans:
            if span.stage == "auth":
                span.stage = None
                span.attributes.pop("hoptrace.stage")
    path = write_otlp_lines(
        tmp_path / "s.jsonl", [s[i : i + 4] for s in traces for i in range(0, 11, 4)]
    )
    rules = tmp_path / "map.toml"
    rules.write_text('[[rule]]\noperation = "verify_key"\nstage = "auth"\n')
    outputs = []
    for smap in (None, load_stage_map(rules)):
        local, _ = analyze_sources([str(path)], Query(window_spans=3, stage_map=smap))
        spread, kept = analyze_sources(
            [str(path)], Query(stage_map=smap, engine="dask", scheduler=scheduler)
        )
        assert kept is None
        assert _json(spread) == _json(local)
        outputs.append(render.analysis_dict(spread))
    assert [g["name"] for g in outputs[1]["groups"] if g["name"] == "auth"] == ["auth"]
    assert not [g for g in outputs[0]["groups"] if g["name"] == "auth"]


@pytest.mark.integration
@pytest.mark.parametrize(
    "command",
    [
        ["analyze", "--split-by", "hoptrace.run", "--format", "json"],
        ["whatif", "--stage", "inference", "--speedup", "4", "--format", "json"],
        [
            "whatif",
            "--stage",
            "auth",
            "--speedup",
            "2",
            "--split-by",
            "hoptrace.run",
            "--format",
            "json",
        ],
        ["compare", "OTHER", "--format", "json"],
    ],
    ids=["analyze-split", "whatif", "whatif-split", "compare"],
)
def test_every_command_on_the_dask_engine_prints_what_the_local_engine_does(
    tmp_path, scheduler, command
):
    path = _shuffled(tmp_path / "s.jsonl", traces=40, seed=7)
    other = _shuffled(tmp_path / "o.jsonl", traces=20, seed=8)
    args = [command[0], str(path), *[str(other) if a == "OTHER" else a for a in command[1:]]]
    env = dict(os.environ, HOPTRACE_WINDOW_SPANS="3")
    local = hoptrace(*args, env=env)
    spread = hoptrace(*args, "--engine", "dask", "--scheduler", scheduler, env=env)
    assert local.returncode == 0, local.stderr
    assert spread.returncode == 0, spread.stderr
    assert spread.stdout == local.stdout and len(spread.stdout) > 200
    # Streamed: no notice that the sources were read here (whatif says which model;
    # both engines note that the traces mix the runs even and odd).
    said = [line for line in spread.stderr.splitlines() if not line.startswith("model: ")]
    mixed = [] if "--split-by" in command or command[0] == "compare" else [_MIXED]
    assert said == mixed and mixed == [line for line in local.stderr.splitlines() if line in mixed]


@pytest.mark.integration
def test_a_file_the_workers_cannot_read_is_a_one_line_source_error(
    tmp_path, scheduler, monkeypatch
):
    _shuffled(tmp_path / "here.jsonl", traces=3, seed=1)
    monkeypatch.chdir(tmp_path)  # the relative path is readable here only
    with distributed.Client(scheduler) as client:
        cwd = client.run(os.getcwd)
        client.run(os.chdir, "/")
        try:
            with pytest.raises(SourceError) as caught:
                _dask.analyze_files([Path("here.jsonl")], Query(engine="dask", scheduler=scheduler))
        finally:
            for address, path in cwd.items():
                client.run(os.chdir, path, workers=[address])
    assert str(caught.value).startswith("a Dask worker cannot read 'here.jsonl' (No such file")
    assert "every worker must read the sources at the same path" in str(caught.value)
    assert "\n" not in str(caught.value)


@pytest.mark.integration
def test_cli_engine_dask_starts_a_local_cluster_with_the_serial_output(tmp_path, dask_installed):
    path = _shuffled(tmp_path / "s.jsonl", traces=40, seed=5)
    serial = hoptrace(
        "analyze", str(path), "--format", "json", env=dict(os.environ, HOPTRACE_WORKERS="1")
    )
    spread = hoptrace(
        "analyze",
        str(path),
        "--engine",
        "dask",
        "--format",
        "json",
        env=dict(os.environ, HOPTRACE_WORKERS="2"),
    )
    assert serial.returncode == 0 and spread.returncode == 0, spread.stderr
    assert spread.stdout == serial.stdout
    assert orjson.loads(spread.stdout)["traces"] == 40
    # No Dask log lines, no warnings: only the note that the traces mix two runs.
    assert spread.stderr == _MIXED + "\n"


@pytest.mark.integration
def test_an_unreachable_scheduler_is_a_one_line_error(tmp_path, dask_installed):
    from collector import free_port

    path = _shuffled(tmp_path / "s.jsonl", traces=3, seed=1)
    address = f"tcp://127.0.0.1:{free_port()}"
    env = dict(os.environ, DASK_DISTRIBUTED__COMM__TIMEOUTS__CONNECT="1s")
    done = hoptrace("analyze", str(path), "--engine", "dask", "--scheduler", address, env=env)
    assert done.returncode == 2
    assert done.stderr.startswith(
        f"hoptrace: error: cannot reach the Dask scheduler at '{address}'"
    )
    assert len(done.stderr.strip().splitlines()) == 1


def test_without_dask_the_engine_is_a_one_line_error_naming_the_extra(tmp_path, monkeypatch):
    from click.testing import CliRunner

    from tracer.cli import main

    path = _shuffled(tmp_path / "s.jsonl", traces=3, seed=1)
    monkeypatch.setitem(sys.modules, "distributed", None)  # import fails
    result = CliRunner().invoke(main, ["analyze", str(path), "--engine", "dask"])
    assert result.exit_code == 2
    assert result.output.strip() == f"hoptrace: error: {_dask.DASK_MISSING}"
    assert "pip install 'hoptrace[dask]'" in result.output


def test_a_scheduler_without_the_dask_engine_or_an_unknown_engine_is_a_config_error(tmp_path):
    path = _shuffled(tmp_path / "s.jsonl", traces=3, seed=1)
    with pytest.raises(ConfigError, match="engine must be one of local, dask, got 'spark'"):
        analyze_sources([str(path)], Query(engine="spark"))
    with pytest.raises(ConfigError, match="add --engine dask"):
        analyze_sources([str(path)], Query(scheduler="tcp://127.0.0.1:8786"))
    done = hoptrace("analyze", str(path), "--scheduler", "tcp://127.0.0.1:8786")
    assert done.returncode == 2 and "add --engine dask" in done.stderr


class _Listener:
    def __init__(self) -> None:
        self.found_lines: list[str] = []

    def found(self, message: str) -> None:
        self.found_lines.append(message)

    def fetched(self, done: int, total: int) -> None:
        pass


def test_sources_the_engine_does_not_cover_are_read_here_with_a_notice(tmp_path, monkeypatch):
    monkeypatch.setattr(_dask, "connect", None)  # no cluster may be started
    path = _shuffled(tmp_path / "s.jsonl", traces=10, seed=2)
    listener = _Listener()
    kept, traces = analyze_sources(
        [str(path)], Query(engine="dask", keep_traces=True), listener=listener
    )
    assert traces is not None and kept.traces == 10
    assert listener.found_lines == [
        "--engine dask runs on OTLP JSON-lines files, the span store and a Grafana Tempo "
        "URL; these sources (or this command's options) are read in this process"
    ]
    assert _json(kept) == _json(analyze_sources([str(path)])[0])


@pytest.mark.integration
def test_a_tempo_search_is_fetched_and_attributed_on_the_workers_like_the_local_engine(
    scheduler,
):
    # 70 traces in tasks of 20 (four tasks on two worker processes); two the search
    # finds cannot be fetched (a 503 and a 404): counted once, as the local loader does.
    traces = recent_traces(70)
    tempo = TempoStandIn()
    for spans in traces:
        tempo.put(spans)
    ids = [t[0].trace_id for t in traces]
    tempo.failures.update({ids[5]: "503", ids[40]: "gone"})
    with tempo.running():
        local = analyze_sources([tempo.url], Query(limit=80))[0]
        fetched_locally = len(tempo.paths("/api/v2/traces/"))
        listener = _Listener()
        phases = _Heard()
        on_dask = _dask.analyze_tempo(
            tempo.url,
            Query(engine="dask", limit=80, scheduler=scheduler),
            progress=phases,
            per_task=20,
        )
        via_sources = analyze_sources(
            [tempo.url], Query(limit=80, engine="dask", scheduler=scheduler), listener=listener
        )[0]
    assert fetched_locally == 70
    assert len(tempo.paths("/api/v2/traces/")) == 3 * 70  # every trace fetched on each path
    assert local.traces == 68
    assert _json(on_dask) == _json(local) == _json(via_sources)
    (note,) = [m for m in on_dask.warnings.messages if "could not be read" in m]
    assert note.startswith(f"Tempo at {tempo.url}: 2 of 70 traces could not be read")
    assert phases[-1] == ("fetching", 70, 70)
    assert listener.found_lines == [f"{tempo.url} is Grafana Tempo 2.8.1"]
