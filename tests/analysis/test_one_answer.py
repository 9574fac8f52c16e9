"""One question, one answer: for the same run and the same what-if, ``hoptrace
whatif``, ``hoptrace report`` and the demo print the same projection, each naming its
model and why."""

from __future__ import annotations

import orjson
import pytest

from demo_app.run import demo_projections
from tests.analysis.test_loadmodel import _pool_run, _traceset
from tests.helpers import hoptrace
from tests.synthetic import to_otlp_json
from tracer.analysis import TraceSet
from tracer.analysis.render.sections import fmt_ms
from tracer.analysis.whatif.answer import Question, answer
from tracer.analysis.whatif.retime import what_if


@pytest.fixture(scope="module")
def loaded(tmp_path_factory):
    path = tmp_path_factory.mktemp("one") / "loaded.jsonl"
    path.write_bytes(b"\n".join(orjson.dumps(to_otlp_json(t)) for t in _pool_run()))
    return path


def _from_file(path) -> TraceSet:
    from tracer.analysis import load
    from tracer.analysis.query import Query

    return load([str(path)], Query())


def test_whatif_report_and_the_demo_give_the_same_projection(loaded, tmp_path):
    args = ("--stage", "inference.decode", "--speedup", "10")
    proc = hoptrace("whatif", str(loaded), *args, "--format", "json")
    assert proc.returncode == 0, proc.stderr
    out = orjson.loads(proc.stdout)
    # The load model: the 300 ms queue for the engine's 2 slots drains to 84 ms.
    assert out["model"] == "load" and out["after_ms"]["p50"] == pytest.approx(112, rel=0.02)
    assert out["model_reason"].startswith("the run's load simulated: a closed loop of 8")
    page = tmp_path / "report.html"
    made = hoptrace("report", str(loaded), *args, "-o", str(page))
    assert made.returncode == 0, made.stderr
    assert "model: load, the run's load simulated" in made.stderr
    html = page.read_text(encoding="utf-8")
    assert f"P50 {fmt_ms(out['after_ms']['p50'])} ms" in html
    assert "model: load, the run&#x27;s load simulated: a closed loop of 8 clients" in html
    # The demo projects its baseline through the same answer.
    (demo,) = demo_projections(_from_file(loaded), 10.0, ["inference.decode"])
    assert demo.model == "load" and demo.model_reason == out["model_reason"]
    assert demo.after.p50 == pytest.approx(out["after_ms"]["p50"], rel=1e-9)
    assert demo.after.p90 == pytest.approx(out["after_ms"]["p90"], rel=1e-9)


def test_report_takes_the_models_options_as_whatif_does(loaded, tmp_path):
    page = tmp_path / "retimed.html"
    args = ("--stage", "inference.decode", "--speedup", "10", "--model", "retime")
    made = hoptrace("report", str(loaded), *args, "-o", str(page))
    assert made.returncode == 0, made.stderr
    html = page.read_text(encoding="utf-8")
    # Retimed trace by trace, the 300 ms wait stays: 400 - 72 = 328 ms.
    assert "P50 328.0 ms" in html and "model: retime, each trace retimed on its own" in html
    bad = hoptrace("report", str(loaded), *args[:4], "--capacity", "engine=0", "-o", str(page))
    assert bad.returncode != 0 and "Traceback" not in bad.stderr
    assert bad.stderr.strip().count("\n") == 0 and "engine" in bad.stderr


def test_the_whole_stage_faster_never_projects_worse_than_a_part_of_it():
    traces = _traceset(_pool_run())
    whole, part = demo_projections(traces, 100.0, ["inference", "inference.prefill"])
    assert whole.model == part.model == "load"
    assert whole.after.p50 <= part.after.p50
    assert whole.ttft_after is not None and part.ttft_after is not None
    assert whole.ttft_after.p50 <= part.ttft_after.p50


def test_retime_asked_for_says_so():
    traces = _traceset(_pool_run())
    got = answer(what_if(traces, "inference", 10), lambda: traces, Question(model="retime"))
    assert (
        got.model == "retime"
        and got.model_reason == "each trace retimed on its own, as if nothing else ran (as asked)"
    )
