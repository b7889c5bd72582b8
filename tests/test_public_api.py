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
