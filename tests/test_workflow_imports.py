"""Which workflow modules parkway imports: only the application's (or PARKWAY_WORKFLOWS' allow-list),
refused before import otherwise, and never one a caller or a stored run names."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from parkway import ConfigError, Parkway, RunStatus, Settings
from parkway.errors import WorkflowUnavailable
from parkway.http.app import hash_key
from parkway.runtime.clock import now_ms
from parkway.runtime.loading import WorkflowModules
from parkway.runtime.store import NewRun
from tests import flows
from tests.conftest import SECRET, Closing, Harness
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


def test_a_workflow_ref_outside_the_application_is_refused_before_import(closing: Closing) -> None:
    """`this:s` (the standard library) and an installed package are refused without importing
    them, with an error that names PARKWAY_WORKFLOWS."""
    sys.modules.pop("this", None)
    pw = closing(Parkway(Settings(secret=SECRET)))
    for ref in ("this:s", "pytest:main", "os.path:join"):
        with pytest.raises(WorkflowUnavailable, match="PARKWAY_WORKFLOWS"):
            pw.start(ref, {})
    assert "this" not in sys.modules


def test_an_allow_list_admits_its_modules_only() -> None:
    """With PARKWAY_WORKFLOWS, the modules it names load; application code outside it is refused."""
    settings = Settings.from_env({"PARKWAY_WORKFLOWS": "tests.flows, bench"}, secret=SECRET)
    assert settings.workflows == ("tests.flows", "bench")
    assert settings.modules.load("tests.flows:one_choice") is flows.one_choice
    with pytest.raises(WorkflowUnavailable, match="not in PARKWAY_WORKFLOWS"):
        WorkflowModules(("tests.flow",)).load("tests.flows:one_choice")  # a prefix is not a parent
    with pytest.raises(ConfigError):
        Settings(workflows=("tests/flows",))


def test_a_workflow_module_being_imported_by_another_thread_is_waited_for(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A workflow looked up while another thread is still importing its module is found once that
    import ends, never read from the half-made module as missing."""
    gate = tmp_path / "go"
    (tmp_path / "slow_flows.py").write_text(
        "import pathlib, time\n"
        f"while not pathlib.Path({str(gate)!r}).exists():\n"
        "    time.sleep(0.005)\n"
        "from tests.flows import one_choice as flow\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    modules = WorkflowModules(("slow_flows",))
    first = threading.Thread(target=modules.load, args=("slow_flows:flow",))
    first.start()
    try:
        deadline = time.monotonic() + 10
        while "slow_flows" not in sys.modules:  # the other thread's import is under way
            assert time.monotonic() < deadline, "the first import never began"
            time.sleep(0.005)
        threading.Timer(0.1, gate.write_text, ("",)).start()  # let it finish once the second waits
        assert modules.load("slow_flows:flow") is flows.one_choice
    finally:
        gate.write_text("")
        first.join(10)
        sys.modules.pop("slow_flows", None)


def test_a_listed_package_does_not_admit_its_submodules(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A reference to a submodule of a listed package (its test fixtures, say) is refused without being
    imported: the allow-list admits each module it names, by its full name, and nothing beneath it."""
    marker = tmp_path / "imported.txt"
    package = tmp_path / "listedpkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "fixtures.py").write_text(f"import pathlib\npathlib.Path({str(marker)!r}).write_text('ran')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(WorkflowUnavailable, match="not in PARKWAY_WORKFLOWS"):
        WorkflowModules(("listedpkg",)).load("listedpkg.fixtures:flow")
    assert not marker.exists() and "listedpkg.fixtures" not in sys.modules
    with pytest.raises(WorkflowUnavailable, match="not a parkway Workflow"):  # listed by name: imported
        WorkflowModules(("listedpkg.fixtures",)).load("listedpkg.fixtures:other")
    assert marker.exists()
    sys.modules.pop("listedpkg.fixtures", None)
    sys.modules.pop("listedpkg", None)


def test_a_run_record_naming_a_foreign_module_is_never_imported(harness: Harness) -> None:
    """A run whose stored ref names a module outside the allowed ones (as written by anyone with
    Redis access) is given back queued, with a node.deferred event; the module is not imported."""
    sys.modules.pop("antigravity", None)
    run_id = "run_foreign"
    harness.pw.store.create_run(NewRun(run_id, "foreign", "antigravity:fly", "start", {}, 60_000, now_ms()))
    harness.pw.backend.dispatcher.enqueue(run_id, 0, 0)
    harness.run_jobs()
    assert "antigravity" not in sys.modules
    run = harness.pw.get_run(run_id)
    assert run.status is RunStatus.QUEUED
    deferred = [e for e in harness.pw.store.read_events(run_id, "0", None, 1000) if e.type == "node.deferred"]
    assert deferred and "PARKWAY_WORKFLOWS" in deferred[0].data["reason"]
