"""The rooms of the house: imports run one way, between layers in a documented order,
and the collector stays light."""

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


def test_the_instrumentation_imports_nothing_of_the_collector_analyzer_bench_or_cli():
    """What an application imports to be traced stays apart from the tools."""
    graph = _graph()
    folders = ("tracer.instrument", "tracer.sdk", "tracer.sampling")
    found = {
        f"{name} -> {target}"
        for name, deps in graph.items()
        if name in ("tracer", "tracer.testing") or name.startswith(folders)
        for target in deps
        if target.startswith(("collector", "tracer.analysis", "tracer.bench", "tracer.cli"))
    }
    assert {name.split(".")[1] for name in graph if name.startswith(folders)} == {
        "instrument",
        "sdk",
        "sampling",
    }
    assert found == set()


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


#: The layers, lowest first: a module imports only modules of its own layer or a lower
#: one (docs/architecture.md). An entry names a module and everything under it; the
#: longest entry that covers a module places it. ``tracer`` and ``tracer.analysis``
#: place only their packages' ``__init__`` (their other modules are each placed).
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "leaves",
        (
            "tracer.attributes",
            "tracer.engines",
            "tracer._errors",
            "tracer._compiled",
            "tracer._duration",
            "tracer._lazy",
            "tracer._sources",
            "tracer._terminal",
            "tracer._sse",
        ),
    ),
    ("spans", ("tracer.spans",)),
    ("collector", ("collector",)),
    # The byte limit on HTTP answers reads the collector's size format.
    ("answers", ("tracer._answers",)),
    ("sampling", ("tracer.sampling",)),
    ("instrument", ("tracer.instrument",)),
    ("sdk", ("tracer.sdk",)),
    ("instrumentation api", ("tracer", "tracer.testing")),
    ("conventions", ("tracer.analysis.conventions",)),
    ("model", ("tracer.analysis.model",)),
    ("table and sampling", ("tracer.analysis.table", "tracer.analysis.sampling")),
    ("attribution", ("tracer.analysis.attribution",)),
    ("aggregate", ("tracer.analysis.aggregate",)),
    ("whatif and checks", ("tracer.analysis.whatif", "tracer.analysis.checks")),
    (
        "front",
        (
            "tracer.analysis.query",
            "tracer.analysis.runs",
            "tracer.analysis.split",
        ),
    ),
    ("execution and loaders", ("tracer.analysis.execution", "tracer.analysis.loaders")),
    ("live", ("tracer.analysis.live",)),
    ("public api", ("tracer.analysis",)),
    ("bench", ("tracer.bench",)),
    ("render", ("tracer.analysis.render",)),
    ("demo", ("demo_app",)),
    ("cli", ("tracer.cli",)),
)

#: Entries that place only the package itself, not what is under it.
_PACKAGE_ONLY = ("tracer", "tracer.analysis")


def _layer_of(name: str, layers=LAYERS) -> int | None:
    """The index of the layer that places ``name``, or None when none does."""
    best, best_len = None, -1
    for index, (_, entries) in enumerate(layers):
        for entry in entries:
            covers = name == entry or (entry not in _PACKAGE_ONLY and name.startswith(entry + "."))
            if covers and len(entry) > best_len:
                best, best_len = index, len(entry)
    return best


def _upward_imports(graph: dict[str, set[str]], layers=LAYERS) -> list[str]:
    """Every import of a module from a higher layer than its own, as ``a -> b``."""
    found = []
    for name in sorted(graph):
        own = _layer_of(name, layers)
        for target in sorted(graph[name]):
            theirs = _layer_of(target, layers)
            if own is not None and theirs is not None and theirs > own:
                found.append(f"{name} ({layers[own][0]}) -> {target} ({layers[theirs][0]})")
    return found


def test_every_module_belongs_to_one_layer():
    entries = [entry for _, layer in LAYERS for entry in layer]
    assert len(entries) == len(set(entries))
    assert [name for name in sorted(_modules()) if _layer_of(name) is None] == []


def test_imports_run_only_to_the_same_layer_or_a_lower_one():
    assert _upward_imports(_graph()) == []


def test_the_layer_rule_catches_an_upward_import():
    layers = (("low", ("pkg.low",)), ("mid", ("pkg.mid",)), ("high", ("pkg.high",)))
    graph = {
        "pkg.low.a": {"pkg.low.b"},
        "pkg.low.b": {"pkg.high.c"},  # against the direction
        "pkg.mid.d": {"pkg.low.a"},
        "pkg.high.c": {"pkg.mid.d", "pkg.low.b"},
    }
    assert _upward_imports(graph, layers) == ["pkg.low.b (low) -> pkg.high.c (high)"]
    assert _layer_of("pkg.mid.d.e", layers) == 1
    assert _layer_of("elsewhere", layers) is None


def test_the_packages_import_nothing_of_the_tests():
    """Test data (``tests/synthetic.py``) is not shipped: no installed module reads it."""
    found = set()
    for name, path in _modules().items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level:
                names = [node.module or ""]
            else:
                continue
            found.update(f"{name} -> {n}" for n in names if n.split(".")[0] == "tests")
    assert found == set()


def test_the_collector_imports_nothing_of_the_analyzer():
    graph = _graph()
    assert {
        f"{name} -> {target}"
        for name, deps in graph.items()
        if name.split(".")[0] == "collector"
        for target in deps
        if target.startswith("tracer.analysis")
    } == set()


def test_the_command_line_starts_without_loading_the_analyzer():
    assert _heavy_modules_after_import("tracer.cli") == "[]"
