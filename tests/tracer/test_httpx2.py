"""instrument_httpx knows both client libraries, httpx and httpx2, and needs only httpx.

The streaming tests, run over clients of both libraries, are in test_httpx_stream.py."""

from __future__ import annotations

import subprocess
import sys

import pytest

import tracer
from tests.conftest import REPO


def test_instrument_httpx_rejects_a_non_client_naming_both_libraries():
    with pytest.raises(TypeError, match=r"httpx\.Client.*httpx2\.AsyncClient"):
        tracer.instrument_httpx(object())  # type: ignore[type-var]


def test_instrument_httpx_works_when_httpx2_is_not_installed():
    code = (
        "import sys; sys.modules['httpx2'] = None\n"  # `import httpx2` now fails
        "import httpx, tracer\n"
        "client = tracer.instrument_httpx(httpx.Client())\n"
        "assert client._is_instrumented_by_opentelemetry\n"
        "try:\n"
        "    tracer.instrument_httpx(object())\n"
        "except TypeError:\n"
        "    print('ok')\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=60
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"
