"""The packages that import their parts on first use (PEP 562) still give every name."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest


@pytest.mark.parametrize("name", ["collector", "tracer.analysis.render"])
def test_every_public_name_of_a_lazy_package_is_its_home_modules_object(name):
    package = importlib.import_module(name)
    assert sorted(package._HOME) == package.__all__
    for attr in package.__all__:
        home = importlib.import_module(package._HOME[attr])
        assert getattr(package, attr) is getattr(home, attr)
        assert attr in dir(package)
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        package.nope  # noqa: B018


def test_writing_json_imports_no_server_or_rich_renderer():
    code = (
        "import sys; from tracer.analysis.render import analysis_dict, dumps; "
        "import collector.store; "
        "print(sorted(m for m in ('rich', 'uvicorn', 'collector.receiver', "
        "'tracer.analysis.render.html') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
