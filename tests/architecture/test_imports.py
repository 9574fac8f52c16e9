"""The rooms of the house: imports run one way, and the collector stays light."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PACKAGES = ("tracer", "collector", "demo_app")


def _modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in (REPO / package).rglob("*.py"):
            parts = path.relative_to(REPO).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join(parts)] = path
    return found


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """Project modules ``name`` imports anywhere in its file (in functions too).

    ``from pkg import sub`` is an edge to ``pkg.sub`` when that is a module, else to
    ``pkg``; a package's own ``__init__`` running first is not counted as an edge.
    """
    is_package = path.name == "__init__.py"
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name in modules)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = name.split(".")
                anchor = anchor if is_package else anchor[:-1]
                anchor = anchor[: len(anchor) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            for alias in node.names:
                full = f"{base}.{alias.name}"
                if full in modules:
                    out.add(full)
                elif base in modules:
                    out.add(base)
    out.discard(name)
    return out


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    return {name: _imports(name, path, modules) for name, path in modules.items()}


def test_no_import_cycle_among_the_project_modules():
    graph = _graph()
    assert len(graph) > 40  # the walk found the project
    assert _cycles(graph) == []


def test_the_cycle_finder_finds_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_the_span_model_imports_nothing_of_the_analyzer_or_the_collector():
    graph = _graph()
    for name in ("tracer.spans", "tracer.spans.model", "tracer.spans.otlp"):
        assert not {m for m in graph[name] if m.startswith(("tracer.analysis", "collector"))}


def test_the_cli_command_modules_import_only_the_shared_module_of_the_cli():
    graph = _graph()
    for name in (
        "tracer.cli.analysis",
        "tracer.cli.bench",
        "tracer.cli.collect",
        "tracer.cli.demo",
        "tracer.cli.top",
    ):
        assert {m for m in graph[name] if m.startswith("tracer.cli")} <= {"tracer.cli._common"}
    assert not any(
        "tracer.cli" in deps for name, deps in graph.items() if name != "tracer.cli.__main__"
    )


def _heavy_modules_after_import(module: str) -> str:
    """numpy and analyzer modules loaded by a fresh ``import module``, as printed."""
    code = (
        f"import sys, {module}; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'numpy' "
        "or m.startswith('tracer.analysis')))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return done.stdout.strip()


def test_import_collector_loads_neither_numpy_nor_the_analyzer():
    assert _heavy_modules_after_import("collector") == "[]"


def test_python_m_tracer_cli_runs_the_commands_once():
    done = subprocess.run(
        [sys.executable, "-m", "tracer.cli", "--help"], capture_output=True, text=True, check=True
    )
    assert done.stdout.count("Commands:") == 1
    assert "analyze" in done.stdout and "serve" in done.stdout


def test_no_module_passes_500_lines():
    sizes = {name: len(path.read_text().splitlines()) for name, path in _modules().items()}
    assert {name: n for name, n in sizes.items() if n > 500} == {}


def test_the_command_line_starts_without_loading_the_analyzer():
    assert _heavy_modules_after_import("tracer.cli") == "[]"
