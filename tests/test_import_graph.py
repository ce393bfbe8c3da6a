"""No import circles: the modules of pdd_core, controlplane and frontend import each other in one
direction only, and so do the control plane's Django apps.

Every import counts, wherever it stands: at module level, inside a function, under
``if TYPE_CHECKING:`` (a lazy or annotation-only import is still a circle in the design). A
relative import is resolved against its module; ``from pkg import name`` names the submodule
``pkg.name`` where there is one, else ``pkg`` itself. Importing ``a.b.c`` also runs ``a`` and
``a.b``, but those implicit arrows to a package's ``__init__`` are not drawn: each would tie every
module of a package that re-exports its modules into one circle. A circle is a strongly connected
component of the graph (Tarjan's algorithm), reported as the set of its modules.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("pdd_core", "controlplane", "frontend")

# Circles known to remain, each matched exactly (the whole set of modules, not a prefix): the
# tests fail on any other circle, and on one of these that changes or is gone.
KNOWN_MODULE_CIRCLES: frozenset[frozenset[str]] = frozenset()
KNOWN_APP_CIRCLES: frozenset[frozenset[str]] = frozenset()


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    """Every module of the three packages, by dotted name."""
    found: dict[str, Path] = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            found[_module_name(path)] = path
    return found


def _imported(name: str, path: Path, known: Mapping[str, Path]) -> set[str]:
    """The modules of ``known`` that the module ``name`` (at ``path``) imports, at any depth."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            for alias in node.names:
                submodule = f"{base}.{alias.name}"
                found.add(submodule if submodule in known else base)
    return {module for module in found if module in known and module != name}


def module_graph() -> dict[str, set[str]]:
    """module -> the modules of the three packages it imports."""
    known = modules()
    return {name: _imported(name, path, known) for name, path in known.items()}


def app_graph() -> dict[str, set[str]]:
    """``controlplane.<app>`` -> the other apps its modules import. Not counted: migrations (they
    name other apps as dependencies) and management commands (entry points that compose apps,
    like ``urls.py``; README's architecture section)."""
    apps = {
        f"controlplane.{path.parent.name}" for path in (ROOT / "controlplane").glob("*/apps.py")
    }

    def app_of(module: str) -> str | None:
        app = ".".join(module.split(".")[:2])
        outside = ".migrations" in module or ".management.commands" in module
        return app if app in apps and not outside else None

    graph: dict[str, set[str]] = {app: set() for app in apps}
    for module, imported in module_graph().items():
        if (source := app_of(module)) is not None:
            graph[source] |= {t for m in imported if (t := app_of(m)) not in (None, source)}
    return graph


def circles(graph: Mapping[str, Iterable[str]]) -> set[frozenset[str]]:
    """The strongly connected components of more than one node (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: set[frozenset[str]] = set()

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in graph.get(node, ()):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = {node}
            while (member := stack.pop()) != node:
                component.add(member)
            on_stack.difference_update(component)
            if len(component) > 1:
                found.add(frozenset(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def _report(found: set[frozenset[str]], known: frozenset[frozenset[str]]) -> str:
    new = sorted(sorted(circle) for circle in found - known)
    gone = sorted(sorted(circle) for circle in known - found)
    lines = [f"new circle: {' <-> '.join(circle)}" for circle in new]
    lines += [f"allowed circle no longer found (drop it from the list): {c}" for c in gone]
    return "\n".join(lines)


def test_tarjan_finds_each_circle_once() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": {"e"}, "e": {"d"}, "f": {"a"}}

    assert circles(graph) == {frozenset("abc"), frozenset("de")}


def test_every_kind_of_import_is_an_arrow(tmp_path: Path) -> None:
    (tmp_path / "pkg" / "sub").mkdir(parents=True)
    (tmp_path / "pkg" / "sub" / "a.py").write_text(
        "from typing import TYPE_CHECKING\n"
        "from . import b\n"
        "from .c import name\n"
        "from ..d import other\n"
        "if TYPE_CHECKING:\n"
        "    from pkg import e\n"
        "def late():\n"
        "    import pkg.sub.f\n"
        "    import json\n"
    )
    names = ("pkg", "pkg.sub", "pkg.sub.b", "pkg.sub.c", "pkg.sub.f", "pkg.d", "pkg.e")
    known = dict.fromkeys(names, tmp_path)

    found = _imported("pkg.sub.a", tmp_path / "pkg" / "sub" / "a.py", known)

    assert found == {"pkg.sub.b", "pkg.sub.c", "pkg.d", "pkg.e", "pkg.sub.f"}


def test_the_module_import_graph_has_no_circle() -> None:
    found = circles(module_graph())

    assert found == KNOWN_MODULE_CIRCLES, _report(found, KNOWN_MODULE_CIRCLES)


def test_the_django_app_import_graph_has_no_circle() -> None:
    found = circles(app_graph())

    assert found == KNOWN_APP_CIRCLES, _report(found, KNOWN_APP_CIRCLES)
