"""The public surface stays small, sorted and complete."""

from __future__ import annotations

import parkway


def test_all_is_sorted_and_complete() -> None:
    """parkway.__all__ is sorted, and every name in it exists."""
    assert parkway.__all__ == sorted(parkway.__all__)
    for name in parkway.__all__:
        assert hasattr(parkway, name), name


def test_every_public_error_is_exported() -> None:
    """Each ParkwayError subclass users can catch is in __all__."""
    from parkway.runtime import errors

    public = {n for n, v in vars(errors).items() if isinstance(v, type) and issubclass(v, errors.ParkwayError)}
    assert public <= set(parkway.__all__)


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
