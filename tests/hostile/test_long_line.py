"""One very long line of OTLP JSON is read on the typed path, in about a third of the
memory of orjson's objects for it."""

from __future__ import annotations

import json
from pathlib import Path

import orjson

from tests.hostile.endless import hoptrace_peak
from tests.synthetic import chain_trace, to_otlp_json

T0 = 1_700_000_000_000_000_000


def test_a_long_single_line_on_standard_input_costs_a_few_times_its_size(tmp_path: Path):
    spans = [s for i in range(12000) for s in chain_trace(f"{i + 1:032x}", T0 + i * 1000)]
    line = orjson.dumps(to_otlp_json(spans)) + b"\n"
    path = tmp_path / "one-line.json"
    path.write_bytes(line)
    del spans
    with open(path, "rb") as stdin:
        result, peak_mib = hoptrace_peak("analyze", "-", "--format", "json", stdin=stdin)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["traces"] == 12000
    line_mib = len(line) / 2**20  # about 39 MiB
    # About 40 MiB of code and libraries, and 4 times the line (it was 8 times).
    assert peak_mib < 40 + 6 * line_mib, f"peak {peak_mib:.0f} MiB for a {line_mib:.0f} MiB line"
