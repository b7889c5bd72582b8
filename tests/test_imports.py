"""parkway's modules import each other without a cycle: read statically from every import statement
(at module level or inside a function), a package's ``__init__`` counting as a module of its own."""

from __future__ import annotations

import ast
from pathlib import Path

import parkway

ROOT = Path(parkway.__file__).parent


def module_files(root: Path = ROOT) -> dict[str, Path]:
    """Every module of the package by dotted name (a package by its own name, for its ``__init__``)."""
    modules = {}
    for path in root.rglob("*.py"):
        parts = path.relative_to(root.parent).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        modules[".".join(parts)] = path
    return modules


def imported(module: str, node: ast.Import | ast.ImportFrom, modules: dict[str, Path]) -> set[str]:
    """The modules of ``modules`` one import statement in ``module`` names: ``from a import b`` names
    ``a`` and, when it is a module, ``a.b``; a relative import is resolved from ``module``'s package."""
    if isinstance(node, ast.Import):
        names = [alias.name for alias in node.names]
    else:
        if node.level:
            package = module.split(".")
            if modules[module].name != "__init__.py":
                package = package[:-1]
            package = package[: len(package) - node.level + 1]
            target = ".".join(package + ([node.module] if node.module else []))
        else:
            target = node.module or ""
        names = [target] + [f"{target}.{alias.name}" for alias in node.names]
    return {name for name in names if name in modules}


def import_graph(modules: dict[str, Path]) -> dict[str, set[str]]:
    """Each module's imports of the package's other modules (every statement, however nested)."""
    graph = {}
    for module, path in modules.items():
        tree = ast.parse(path.read_text(), str(path))
        edges: set[str] = set()
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                edges |= imported(module, node, modules)
        edges.discard(module)
        graph[module] = edges
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, edges = work[-1]
            for nxt in edges:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph[nxt]))))
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return found


def test_cycles_are_found() -> None:
    """The finder reports a cycle through a package's ``__init__`` and none in a chain."""
    graph = {"p": {"p.a"}, "p.a": {"p.b"}, "p.b": {"p"}, "q": {"q.a"}, "q.a": set()}
    assert cycles(graph) == [["p", "p.a", "p.b"]]


def test_relative_imports_resolve() -> None:
    """``from . import x`` in a package's module names the package and its module ``x``."""
    modules = {"p": Path("p/__init__.py"), "p.a": Path("p/a.py"), "p.b": Path("p/b.py")}
    node = ast.parse("from . import b").body[0]
    assert isinstance(node, ast.ImportFrom)
    assert imported("p.a", node, modules) == {"p", "p.b"}


def test_no_import_cycle() -> None:
    """No module of parkway imports, directly or through others, a module that imports it."""
    found = cycles(import_graph(module_files()))
    assert not found, "import cycles in parkway:\n" + "\n".join(" <-> ".join(c) for c in found)
