"""The public surface stays small, sorted and complete."""

from __future__ import annotations

import parkway


def test_all_is_sorted_and_complete() -> None:
    """parkway.__all__, parkway.errors.__all__ and parkway.agents.__all__ are sorted, and every name
    in them exists."""
    from parkway import agents, errors

    for module in (parkway, errors, agents):
        assert module.__all__ == sorted(module.__all__), module.__name__
        for name in module.__all__:
            assert hasattr(module, name), f"{module.__name__}.{name}"


def test_every_public_error_is_exported_from_parkway_errors() -> None:
    """Each ParkwayError subclass users can catch is in parkway.errors.__all__; parkway itself
    exports the root and only errors (no session or agent error: those are their submodules')."""
    from parkway import errors
    from parkway.runtime import errors as defined

    public = {n for n, v in vars(defined).items() if isinstance(v, type) and issubclass(v, defined.ParkwayError)}
    assert public == set(errors.__all__)
    top = {n for n in parkway.__all__ if n in public}
    assert "ParkwayError" in top and not any(n.startswith(("Session", "Branch", "Tool")) for n in top)


def test_the_top_level_is_the_workflow_api_the_client_and_common_errors() -> None:
    """Agents' hooks live in parkway.agents and sessions' types in parkway.sessions, not at the top
    level; the top level stays small (at most 50 names)."""
    from parkway import agents

    assert not set(agents.__all__) & set(parkway.__all__)
    assert not {"Sent", "Cleared", "SessionView"} & set(parkway.__all__)
    assert len(parkway.__all__) <= 50


def test_runtime_imports_neither_redis_nor_rq() -> None:
    """parkway.runtime is pure logic: no redis, no rq."""
    import pathlib

    root = pathlib.Path(parkway.__file__).parent / "runtime"
    for path in root.glob("*.py"):
        text = path.read_text()
        assert "import redis" not in text and "from redis" not in text, path
        assert "import rq" not in text and "from rq" not in text, path


def _relative_imports(package: str) -> dict[str, set[str]]:
    """Each module of ``package`` (a folder of parkway) and the sibling modules it imports."""
    import ast
    import pathlib

    root = pathlib.Path(parkway.__file__).parent / package
    graph: dict[str, set[str]] = {}
    for path in root.glob("*.py"):
        found = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level == 1:
                found |= {node.module.split(".")[0]} if node.module else {a.name for a in node.names}
        graph[path.stem] = found
    return graph


def test_the_workers_modules_import_one_another_without_a_cycle() -> None:
    """No module of parkway.workers imports, through its siblings, itself; and none imports the
    backend or the client above it."""
    import pathlib

    graph = _relative_imports("workers")

    def reaches(start: str, seen: frozenset[str]) -> None:
        for nxt in graph.get(start, set()):
            assert nxt not in seen, f"import cycle: {' -> '.join([*seen, nxt])}"
            reaches(nxt, seen | {nxt})

    for module in graph:
        reaches(module, frozenset({module}))
    root = pathlib.Path(parkway.__file__).parent / "workers"
    for path in root.glob("*.py"):
        text = path.read_text()
        assert "..backend" not in text and "..client" not in text, path
