"""The registry of serving engines and naming schemes is where every key comes from: a
key an engine's phases or the token counts read is range-checked where spans come in,
the token counts try the keys in the registry's order, and a new engine is its module
and its line in the registry."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tracer import attributes as attrs
from tracer import engines
from tracer.analysis.conventions.phases import COORDINATOR_KEYS, PHASE_KEYS
from tracer.analysis.model.breakdown import count_tokens
from tracer.spans._numbers import NUMBER_BOUNDS, NUMERIC_KEYS, checked, span_number_problem
from tracer.spans.model import Span, Warnings

T0 = 1_700_000_000 * 10**9


def _span(attributes: dict) -> Span:
    return Span("a" * 32, "1" * 16, None, "proxy", "request", 2, T0, T0 + 9_000_000,
                attributes=attributes)  # fmt: skip


def test_every_key_the_registry_lists_is_checked_at_ingest():
    for c in engines.REGISTRY:
        numeric = c.seconds + c.milliseconds + c.durations + c.input_tokens
        numeric += c.output_tokens + c.cached_tokens + tuple(map(engines.event_key, c.events))
        assert set(numeric) <= NUMERIC_KEYS, c.name
        assert set(c.phases) | set(c.coordinator) <= NUMERIC_KEYS, c.name
    assert PHASE_KEYS | COORDINATOR_KEYS <= NUMERIC_KEYS
    assert NUMBER_BOUNDS[attrs.LLMD_PREFILL_MS] == 1e12 and NUMBER_BOUNDS[attrs.LLMD_TRUE_TTFT_MS]
    assert set(engines.COORDINATOR_KEYS) <= set(engines.UNITS)  # read as latencies
    assert [c.name for c in engines.REGISTRY] == [
        "genai",
        "openinference",
        "vllm",
        "sglang",
        "tgi",
        "triton",
        "llm-d",
    ]


def test_an_llmd_time_out_of_range_is_refused_at_the_collector_and_dropped_by_the_loaders():
    bad = _span({attrs.LLMD_PREFILL_MS: 1e300, attrs.LLMD_DECODE_MS: 4.5})
    assert span_number_problem(bad) == (
        "llm_d.pd_proxy.prefill_duration_ms is not a finite number of milliseconds up to 1e+12",
        1e300,
    )
    warnings = Warnings()
    kept = checked(bad, warnings)
    assert kept is not None and kept.attributes == {attrs.LLMD_DECODE_MS: 4.5}
    assert warnings.dropped_values == 1
    assert span_number_problem(_span({attrs.LLMD_TRUE_TTFT_MS: 1e12})) is None


def test_token_counts_take_the_first_key_in_the_registry_order():
    carrier = {
        attrs.OPENINFERENCE_PROMPT_TOKENS: 5,
        attrs.GEN_AI_PROMPT_TOKENS: 7,
        attrs.OPENINFERENCE_COMPLETION_TOKENS: 3,
        attrs.OPENINFERENCE_CACHE_READ_TOKENS: 2,
        attrs.GEN_AI_CACHED_TOKENS: 4,
        attrs.OPENINFERENCE_MODEL_NAME: "m-oi",
        attrs.GEN_AI_RESPONSE_MODEL: "m-genai",
    }
    assert count_tokens([carrier]) == (7, 3, "m-genai", 4)


class _Reading:
    """A request span that answers every read and notes which keys were read."""

    start_ns, end_ns, first_token_ns, child_start_ns = T0, T0 + 10**9, T0 + 10**8, T0 + 10**7

    def __init__(self) -> None:
        self.read: set[str] = set()

    def latency_ns(self, key: str) -> int:
        self.read.add(key)
        return 5_000_000

    def event_ns(self, name: str) -> int:
        self.read.add(engines.event_key(name))
        return T0 + 1_000_000


def test_an_engines_phases_read_only_the_keys_it_lists_in_the_units_it_lists_them():
    # The batches read the phase keys per trace and key a shape on every other value a
    # decision reads, so a key an engine's phases read must be among its phase keys.
    phased = [c for c in engines.REGISTRY if c.intervals is not None]
    assert [c.name for c in phased] == ["vllm", "tgi", "triton", "llm-d"]
    for c in phased:
        request = _Reading()
        assert c.intervals is not None and c.intervals(request), c.name
        assert request.read == set(c.phases), c.name
        latencies = request.read - {engines.event_key(e) for e in c.events}
        assert latencies <= set(c.seconds + c.milliseconds + c.durations), c.name


#: A serving engine for this test only: its request span ``acme.generate`` reports its
#: queue and then its prefill in milliseconds, its tokens and its model.
_ACME = """
from tracer.engines.convention import Convention, Interval, Request

QUEUE_MS, PREFILL_MS = "acme.queue_ms", "acme.prefill_ms"


def intervals(r: Request) -> list[Interval]:
    queue, prefill = r.latency_ns(QUEUE_MS), r.latency_ns(PREFILL_MS)
    if queue is None or prefill is None:
        return []
    at = r.start_ns + queue
    return [("inference.queue", r.start_ns, at), ("inference.prefill", at, at + prefill)]


CONVENTION = Convention(
    "acme",
    milliseconds=(QUEUE_MS, PREFILL_MS),
    phases=(QUEUE_MS, PREFILL_MS),
    intervals=intervals,
    input_tokens=("acme.tokens_in",),
    output_tokens=("acme.tokens_out",),
    model=("acme.model",),
    rules=({"operation": "acme.generate", "role": "engine_request", "source": "this test"},),
)
"""

#: Loads the registry with the throwaway module beside the others and ``line`` added to
#: ``REGISTRY`` (the one edit a new engine makes outside its module), then analyses two
#: traces of it, with the batches and without, and prints what came out.
_RUN = """
import json, os, sys, types
from pathlib import Path

import tracer

here, line = Path(sys.argv[1]), sys.argv[2]
package = Path(tracer.__file__).parent / "engines"
source = (package / "__init__.py").read_text()
if line:
    source = source.replace("from tracer.engines import ", "from tracer.engines import acme, ", 1)
    assert source.count("    llmd.CONVENTION,\\n)") == 1
    source = source.replace("    llmd.CONVENTION,\\n)", f"    llmd.CONVENTION,\\n    {line}\\n)")
engines = types.ModuleType("tracer.engines")
engines.__path__ = [str(package), str(here)]
sys.modules["tracer.engines"] = tracer.engines = engines
exec(compile(source, str(package / "__init__.py"), "exec"), engines.__dict__)

from tests.analysis.test_engines import CLIENT, SERVER, load_docs, otlp, span
from tracer.analysis import analyze

def doc(n, queue_ms):
    root = span("POST /generate", CLIENT, 0, 1000)
    attributes = {"acme.queue_ms": queue_ms, "acme.prefill_ms": 300.0, "acme.tokens_in": 11,
                  "acme.tokens_out": 5, "acme.model": "acme-1"}
    engine = span("acme.generate", SERVER, 100, 900, root, attributes)
    return otlp(f"{n:032x}", {"client": [root], "acme": [engine]})

traces = load_docs(here, *[doc(n, 200.0) for n in range(1, 12)], doc(12, 1e300))
out = {}
for batch in ("on", "off"):
    os.environ["HOPTRACE_BATCH"] = batch
    a = analyze(traces)
    out[batch] = {
        "groups": {g.name: round(g.mean_ms, 3) for g in a.groups},
        "tokens": None if a.tokens is None else [a.tokens.requests, a.tokens.input_mean,
                                                 a.tokens.output_mean, list(a.tokens.models)],
        "dropped": a.warnings.dropped_values,
    }
print(json.dumps(out))
"""


def _analysed(tmp_path: Path, line: str) -> dict:
    (tmp_path / "acme.py").write_text(_ACME)
    (tmp_path / "run.py").write_text(_RUN)
    repo = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, str(tmp_path / "run.py"), str(tmp_path), line],
        cwd=repo,
        env={"PYTHONPATH": str(repo), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_a_new_engine_is_its_module_and_its_line_in_the_registry(tmp_path):
    with_line = _analysed(tmp_path, "acme.CONVENTION,")
    # Its rule found the request span, its phases split it (100 ms of network each way,
    # 200 ms queue, 300 ms prefill, the rest of [100, 900] inference's own), its token
    # keys were counted, and its millisecond keys were range-checked at ingest (the
    # 1e300 dropped: that trace has no phases), with the batches and without.
    for batch in ("on", "off"):
        assert with_line[batch] == {
            "groups": {  # ms, means over the 12 traces (the twelfth: 800 ms of its own)
                "inference": round((11 * 300 + 800) / 12, 3),
                "inference.prefill": 275.0,
                "network": 200.0,
                "inference.queue": round(11 * 200 / 12, 3),
            },
            "tokens": [12, 11, 5, ["acme-1"]],
            "dropped": 1,
        }, batch
    # Without its line, the same module is nothing to the analysis.
    without = _analysed(tmp_path, "")
    assert (
        without["on"]
        == without["off"]
        == {
            "groups": {"other": 800.0, "network": 200.0},
            "tokens": None,
            "dropped": 0,
        }
    )
