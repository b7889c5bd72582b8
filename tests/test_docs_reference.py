"""The documentation's reference pages are made from the code at each build (docs/hooks.py): each names
everything its source has, so a new field, command, route or metric cannot be missing from the site."""

from __future__ import annotations

import dataclasses
import importlib.util
import re
from types import ModuleType

import pytest

from tests.procs import ROOT


def _hooks() -> ModuleType:
    spec = importlib.util.spec_from_file_location("docs_hooks", ROOT / "docs" / "hooks.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def hooks() -> ModuleType:
    return _hooks()


def test_every_page_marker_names_a_generator_and_every_generator_is_used(hooks: ModuleType) -> None:
    """Each `<!-- generated: NAME -->` of a page names a generator, and each generator fills some page."""
    used = {m for page in (ROOT / "docs").rglob("*.md") for m in hooks.MARKER.findall(page.read_text())}
    assert used == set(hooks.GENERATORS)


def test_the_settings_page_has_every_field_and_every_variable_the_code_reads(hooks: ModuleType) -> None:
    """Every Settings field (with its docstring) and every PARKWAY_* variable named in parkway/ is on the page."""
    from parkway.config import Settings

    page = hooks.settings()
    for field in dataclasses.fields(Settings):
        assert f"| `{field.name}` |" in page
    assert "a worker silent this long has lost its attempt" in page  # lease_ms's docstring
    named = {n for p in (ROOT / "parkway").rglob("*.py")
             for n in re.findall(r"PARKWAY_[A-Z][A-Z_]*[A-Z]", p.read_text())}
    missing = {name for name in named if f"`{name}`" not in page}
    assert len(named) >= 15 and not missing, missing


def test_the_cli_page_has_every_command_s_help(hooks: ModuleType) -> None:
    """The page holds `--help` of every command and subcommand of the parser, as it prints it."""
    from parkway.cli import parser

    page = hooks.cli()
    names = [name for name, _ in hooks._commands(parser())]
    assert len(names) >= 18 and {"parkway serve", "parkway session"} <= set(names)
    assert all(f"### `{name}`" in page for name in names)
    assert "start a run and print its events" in page  # `parkway run`'s description


def test_the_http_page_has_every_route_of_the_openapi_document(hooks: ModuleType) -> None:
    """Every method and path of the app's OpenAPI document has its section, every schema too."""
    document = hooks.openapi_document()
    page = hooks.http()
    routes = [f"{method.upper()} {path}" for path, item in document["paths"].items() for method in item]
    assert len(routes) >= 25 and all(f"### `{route}`" in page for route in routes)
    assert all(f"### {name}\n" in page for name in document["components"]["schemas"])


def test_the_metrics_and_errors_pages_have_every_family_and_every_error(hooks: ModuleType) -> None:
    """The metrics table lists each family /metrics serves; the errors table each error of parkway.errors."""
    import parkway.errors

    metrics, errors = hooks.metrics(), hooks.errors()
    for family in ("parkway_interrupts_pending", "parkway_resumes_total", "parkway_oldest_job_age_seconds"):
        assert f"`{family}`" in metrics
    names = [n for n in dir(parkway.errors) if isinstance(getattr(parkway.errors, n), type)
             and issubclass(getattr(parkway.errors, n), BaseException)]
    assert len(names) >= 20 and all(f"| `{name}` |" in errors for name in names)
