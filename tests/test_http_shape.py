"""The HTTP surface's shape: an app module that only assembles, routers per resource, small functions."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import parkway

ROOT = Path(parkway.__file__).parent
HTTP_FILES = sorted((ROOT / "http").rglob("*.py")) + [ROOT / "sessions" / "http.py"]


def test_create_app_only_assembles() -> None:
    """create_app is at most 60 lines and declares no route of its own (no function inside it)."""
    from parkway.http.app import create_app

    source = inspect.getsource(create_app)
    assert len(source.splitlines()) <= 60
    inner = [n for n in ast.walk(ast.parse(source)) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]
    assert [n.name for n in inner] == ["create_app"]


def test_every_route_comes_from_a_resource_router() -> None:
    """Each route of the app is declared in a module of parkway/http/routes or the sessions feature's router."""
    from parkway import Parkway
    from parkway.http.app import create_app

    with Parkway() as pw:
        app = create_app(pw, {})
    # (FastAPI keeps each included router whole: its routes are read from it)
    routers = [r.original_router for r in app.routes if hasattr(r, "original_router")]
    ours = {route.endpoint.__module__ for router in routers for route in router.routes}
    assert not [r for r in app.routes if getattr(r, "endpoint", None) is not None
                and r.endpoint.__module__.startswith("parkway.")]  # no route added to the app itself
    assert ours == {"parkway.http.routes.health", "parkway.http.routes.runs", "parkway.http.routes.interrupts",
                    "parkway.http.routes.links", "parkway.http.routes.ui", "parkway.http.routes.slack",
                    "parkway.sessions.http"}


def test_no_function_over_80_lines_and_no_file_over_800() -> None:
    """No function of the HTTP surface runs over 80 lines, and no file over 800."""
    long = []
    for path in HTTP_FILES:
        text = path.read_text()
        if len(text.splitlines()) > 800:
            long.append(f"{path.name}: {len(text.splitlines())} lines")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.end_lineno is not None:
                size = node.end_lineno - node.lineno + 1
                if size > 80:
                    long.append(f"{path.name}:{node.name}: {size} lines")
    assert long == []
