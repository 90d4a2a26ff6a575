"""No import cycle among boss_agent's modules, counting every import the source names.

Python tolerates a cycle that only closes through a ``TYPE_CHECKING`` block or an
import inside a function, but a reader does not: following a task from ``sources/``
to ``runner/`` and back must never loop. So this reads every module with ``ast`` and
counts every ``import`` statement wherever it stands (type-only, lazy, module level).
A package's ``__init__`` counts as a module of its own: ``from a import b`` depends on
``a`` (the package) or on ``a.b`` when that is a module.
"""

from __future__ import annotations

import ast
from pathlib import Path

import boss_agent

ROOT = Path(boss_agent.__file__).parent


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, Path]:
    return {_module_name(path): path for path in ROOT.rglob("*.py")}


def _imported(node: ast.Import | ast.ImportFrom, module: str, is_package: bool, known: set[str]) -> set[str]:
    if isinstance(node, ast.Import):
        return {alias.name for alias in node.names}
    base = node.module or ""
    if node.level:
        package = module if is_package else module.rpartition(".")[0]
        for _ in range(node.level - 1):
            package = package.rpartition(".")[0]
        base = f"{package}.{base}" if base else package
    names = {f"{base}.{alias.name}" for alias in node.names}
    return {name for name in names if name in known} or {base}


def import_graph() -> dict[str, set[str]]:
    modules = _modules()
    known = set(modules)
    graph: dict[str, set[str]] = {}
    for module, path in modules.items():
        is_package = path.name == "__init__.py"
        edges: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import | ast.ImportFrom):
                edges |= {name for name in _imported(node, module, is_package, known) if name in known}
        graph[module] = edges - {module}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected component of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component: list[str] = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_the_graph_sees_type_only_and_function_level_imports() -> None:
    graph = import_graph()
    # runtime.py imports AppServer only under TYPE_CHECKING, and the runner inside a function.
    assert "boss_agent.appserver.client" in graph["boss_agent.daemon.runtime"]
    assert "boss_agent.runner" in graph["boss_agent.daemon.runtime"]


def test_no_import_cycle_among_boss_agent_modules() -> None:
    assert cycles(import_graph()) == []
