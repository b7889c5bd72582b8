"""What the HTTP server imports: only the operator's workflow modules, never one a caller names."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from parkway.http.app import hash_key
from parkway.runtime.errors import WorkflowUnavailable
from parkway.runtime.loading import WorkflowModules
from tests.procs import free_port
from tests.test_api import Server, _api, close_api_clients
from tests.test_cli import _env, parkway


@pytest.fixture(autouse=True)
def _close_clients() -> Iterator[None]:
    yield
    close_api_clients()


def _plant(directory: Path) -> Path:
    """Modules an attacker hopes the server imports: one that writes a file, one that exits."""
    marker = directory / "imported.txt"
    (directory / "seed_db.py").write_text(f"open({str(marker)!r}, 'w').write('ran')\n")
    (directory / "setup.py").write_text("raise SystemExit('setup.py ran')\n")
    return marker


def test_a_caller_naming_a_module_outside_the_workflow_list_imports_nothing(
    redis_url: str, redis_client: redis.Redis, tmp_path: Path
) -> None:
    """Modules in the server's working directory that the operator did not list are refused without
    being imported (no side effect), and the server answers as before afterwards."""
    marker = _plant(tmp_path)
    srv = Server(redis_url, cwd=tmp_path)
    try:
        api = _api(srv)
        for ref in ("seed_db:x", "setup:x"):
            answer = api.post("/v1/runs", json={"workflow": ref, "input": {}})
            assert answer.status_code == 422, answer.text
            assert str(tmp_path) not in answer.text  # nor where the server runs
        assert not marker.exists()
        assert api.get("/v1/interrupts").status_code == 200
        assert api.post("/v1/runs", json={"workflow": "tests.flows:one_choice", "input": {}}).status_code == 201
    finally:
        srv.stop()


def test_an_allowed_module_that_exits_while_imported_is_unavailable_not_fatal(tmp_path: Path,
                                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """A listed module whose import raises SystemExit (a BaseException) is reported as unavailable."""
    (tmp_path / "exits_on_import.py").write_text("raise SystemExit(3)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(WorkflowUnavailable, match="SystemExit"):
        WorkflowModules(("exits_on_import",)).load("exits_on_import:flow")


def test_the_server_refuses_to_start_without_a_workflow_list(redis_url: str) -> None:
    """Without PARKWAY_WORKFLOWS (or --workflows) the server would import whatever a caller names: it
    does not start."""
    env = _env(PARKWAY_REDIS_URL=redis_url, PARKWAY_API_KEYS=f"{hash_key('k' * 32)}=machine")
    refused = parkway("serve", "--port", str(free_port()), env=env)
    assert refused.returncode == 1 and "PARKWAY_WORKFLOWS" in refused.stderr
