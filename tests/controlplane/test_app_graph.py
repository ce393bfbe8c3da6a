"""The apps of the control plane import each other in one direction only: the graph of their
imports is acyclic, and it is the layering README's architecture section describes.

Counted: every ``import`` of ``controlplane.<app>`` in another app's code, at module level or
inside a function. Not counted: imports under ``if TYPE_CHECKING:`` (annotations only, never
executed) and management commands (entry points that compose apps, like ``urls.py``; no app
imports them). Migrations name other apps as dependencies, not imports.
"""

from __future__ import annotations

import ast
from graphlib import CycleError, TopologicalSorter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2] / "controlplane"
APPS = sorted(p.name for p in ROOT.iterdir() if (p / "apps.py").exists())
# Lowest first: an app may import only apps before it.
LAYERS = ["core", "inventory", "tenancy", "accounts", "billing", "telemetry", "planning", "agents"]


def _type_checking_lines(tree: ast.Module) -> set[int]:
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and getattr(node.test, "id", None) == "TYPE_CHECKING":
            for inner in node.body:
                lines.update(range(inner.lineno, (inner.end_lineno or inner.lineno) + 1))
    return lines


def _imported_apps(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skip = _type_checking_lines(tree)
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            modules = [node.module]
        elif isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        else:
            continue
        if node.lineno in skip:
            continue
        for module in modules:
            parts = module.split(".")
            if len(parts) > 1 and parts[0] == "controlplane" and parts[1] in APPS:
                found.add(parts[1])
    return found


def app_graph() -> dict[str, set[str]]:
    """app -> the other apps its code imports."""
    graph: dict[str, set[str]] = {app: set() for app in APPS}
    for app in APPS:
        for path in (ROOT / app).rglob("*.py"):
            if "migrations" in path.parts or "commands" in path.parts:
                continue
            graph[app] |= _imported_apps(path) - {app}
    return graph


def test_every_app_has_a_layer() -> None:
    assert sorted(LAYERS) == APPS


def test_the_app_import_graph_is_acyclic() -> None:
    try:
        order = list(TopologicalSorter(app_graph()).static_order())
    except CycleError as exc:
        raise AssertionError(f"apps import each other in a circle: {exc.args[1]}") from None

    assert sorted(order) == APPS


def test_apps_import_only_lower_layers() -> None:
    upward = {
        (app, other)
        for app, others in app_graph().items()
        for other in others
        if LAYERS.index(other) > LAYERS.index(app)
    }

    assert upward == set()
