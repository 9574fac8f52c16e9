"""The packages that import their parts on first use (PEP 562) still give every name."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest


@pytest.mark.parametrize("name", ["collector", "tracer.analysis.render"])
def test_every_public_name_of_a_lazy_package_is_the_object_its_module_defines(name):
    package = importlib.import_module(name)
    defined = 0
    for attr in package.__all__:
        got = getattr(package, attr)
        assert attr in dir(package)
        home = getattr(got, "__module__", None)
        if isinstance(home, str) and home.startswith(f"{name}."):
            assert getattr(importlib.import_module(home), attr) is got
            defined += 1
    assert defined >= 5  # the classes and functions, not only constants
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        package.nope  # noqa: B018


@pytest.mark.parametrize(
    ("name", "attr", "part"),
    [
        ("collector", "BackgroundCollector", "collector.server"),
        ("tracer.analysis.render", "to_html", "tracer.analysis.render.html"),
    ],
)
def test_a_lazy_package_imports_a_part_when_one_of_its_names_is_first_used(name, attr, part):
    code = (
        f"import sys, {name} as p; before = {part!r} in sys.modules; "
        f"p.{attr}; print(before, {part!r} in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False", "True"]


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
