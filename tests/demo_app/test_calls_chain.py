"""The demo's app makes the calls a what-if's ``--repeat`` and ``--fanout`` project: a
profile's ``repeat=N`` calls the model N times in sequence, ``candidates=N`` N times in
parallel, one answer kept; each call is its own span.

Its own module: the client's tracer is set up here with a store of the test's own."""

from __future__ import annotations

import pytest

from tests.helpers import chain_traces
from tracer.spans.model import KIND_SERVER


def test_a_profile_sets_the_calls_the_app_makes():
    from demo_app.profiles import PROFILES, get_profile
    from tracer._errors import ConfigError

    lan = PROFILES["lan"]
    assert (lan.repeat, lan.candidates) == (1, 1)
    changed = get_profile("lan,inference=10,repeat=2")
    assert changed.repeat == 2 and changed.prefill_ms == lan.prefill_ms / 10
    assert changed.name == "lan,inference=10,repeat=2"
    assert get_profile("wan,candidates=3").candidates == 3
    for bad in ("lan,repeat=0", "lan,candidates=2.5", "lan,repeat=65", "lan,repeat="):
        with pytest.raises(ConfigError, match="whole number from 1 to 64"):
            get_profile(bad)


def _run(tmp_path, profile: str, requests: int = 8):
    return chain_traces(tmp_path / f"{profile.replace(',', '_')}.db", profile, requests, True)


@pytest.mark.integration
def test_the_app_makes_the_calls_and_the_projection_follows(tmp_path):
    """One client, one request at a time (no load): the retiming of the single-call run
    projects the runs whose app really makes the calls."""
    from tracer.analysis import analyze, what_if
    from tracer.analysis.whatif.scenario import Fanout, Repeat

    base = _run(tmp_path, "lan")
    for profile, change, calls in (
        ("lan,repeat=2", Repeat("inference", 2), 2),
        ("lan,candidates=3", Fanout("inference", 3), 3),
    ):
        real = _run(tmp_path, profile)
        for spans in real.traces.values():
            served = [s for s in spans if s.service == "model" and s.kind == KIND_SERVER]
            assert len(served) == calls  # each call to the model is its own span
        measured = analyze(real).e2e.p50
        projected = what_if(base, "inference", 1.0, changes=(change,)).after.p50
        assert projected == pytest.approx(measured, rel=0.15), profile
