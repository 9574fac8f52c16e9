"""``analyze URL`` against a trace backend that answers endless JSON or a gzip bomb:
one clear line, in bounded memory."""

from __future__ import annotations

import pytest

from tests.hostile.endless import endless, hoptrace_peak
from tests.hostile.servers import serving

#: Generous: an analyze run holds about 60 MiB before its first request; the answers
#: here are 400 MiB after decompression.
PEAK_MIB = 200


@pytest.mark.parametrize("backend", ["jaeger", "tempo"])
@pytest.mark.parametrize("kind", ["json", "gzip"])
def test_a_backend_answering_without_end_gets_one_line_in_bounded_memory(backend, kind):
    with serving(endless(kind)) as url:
        result, peak_mib = hoptrace_peak(
            "analyze", url, "--backend", backend, "--max-answer-bytes", "8MiB", timeout=120
        )
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert (
        lines[-1].startswith("hoptrace: error: ")
        and "answered more than 8388608 bytes" in lines[-1]
    )
    assert "Traceback" not in result.stderr
    assert peak_mib < PEAK_MIB, f"peak {peak_mib:.0f} MiB"


def test_a_bad_answer_limit_is_one_line():
    from tests.helpers import hoptrace

    result = hoptrace("analyze", "http://127.0.0.1:9", "--max-answer-bytes", "lots")
    assert result.returncode == 2
    assert "--max-answer-bytes must be a size" in result.stderr
