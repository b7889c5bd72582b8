"""An answer taken for an interrupt the code no longer asks for is never dropped (issue 19, defect 5).

A run waits at ``use_interrupt(..., id="approval")``; a deploy renames it ``approval-v2``. The replay
check says so, naming it; an answer given anyway stays in the journal, and the worker stops the run
visibly (queued, ``node.deferred`` with a NondeterminismError naming the answer and its id) instead
of asking again under a new interrupt; deploying code that asks for it again lets the run go on."""

from __future__ import annotations

import json
import os
import sys
import uuid
from pathlib import Path

import pytest

from parkway import RunStatus
from parkway.workers.reconciler import reconcile_once
from tests.conftest import Harness
from tests.test_cli import _env, parkway

CODE = """
from parkway import Workflow, use_interrupt

flow = Workflow("renamed-approval")


@flow.node(start=True)
def approve(data):
    options = [{"id": "accept", "label": "Accept"}, {"id": "reject", "label": "Reject"}]
    return {"verdict": use_interrupt({"kind": "choice", "question": "Approve?", "options": options}, id="approval")}
"""
RENAMED = CODE.replace('id="approval"', 'id="approval-v2"')


def _deploy(source: Path, code: str) -> None:
    source.write_text(code)
    sys.modules.pop(source.stem, None)


@pytest.fixture
def deployed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A module of the test's own, importable, holding CODE (the test deploys other code in it)."""
    source = tmp_path / f"pw_renamed_{uuid.uuid4().hex[:8]}.py"
    _deploy(source, CODE)
    monkeypatch.syspath_prepend(str(tmp_path))
    return source


def test_replay_reports_a_pending_interrupt_the_new_code_no_longer_reaches(harness: Harness, deployed: Path) -> None:
    """Against the renamed code, the replay check of a run waiting on 'approval' is
    nondeterministic and names it (before the fix: consistent)."""
    module = deployed.stem
    run_id = harness.start_and_run(f"{module}:flow")
    assert harness.pw.check_deploy(run_id, f"{module}:flow").outcome == "consistent"
    _deploy(deployed, RENAMED)
    report = harness.pw.check_deploy(run_id, f"{module}:flow")
    assert report.outcome == "nondeterministic", report
    assert "'approval'" in report.detail and "i:approval-v2" in report.detail, report.detail


def test_an_answer_no_hook_consumes_stops_the_run_visibly_and_a_deploy_that_asks_for_it_goes_on(
    harness: Harness, deployed: Path
) -> None:
    """The answer to 'approval' given after the rename: the worker does not ask again under a new
    interrupt (before the fix it did, and the answer was gone); the run is given back queued with a
    NondeterminismError naming the answer and its id, the answer stays in the journal, the replay
    check says so, and once code asking for 'approval' is deployed the run completes with it."""
    module = deployed.stem
    run_id = harness.start_and_run(f"{module}:flow")
    token = harness.token(run_id)
    _deploy(deployed, RENAMED)
    assert harness.pw.resume(token, selected="reject").accepted
    harness.run_jobs()
    run = harness.pw.get_run(run_id)
    assert run.status is RunStatus.QUEUED, run
    assert not harness.pw.list_interrupts(run_id=run_id).items  # not asked again
    deferred = [e for e in harness.pw.store.read_events(run_id, "0", None, 1000) if e.type == "node.deferred"]
    assert deferred and deferred[-1].data["error"] == "NondeterminismError", deferred
    assert "'approval'" in deferred[-1].data["reason"] and "i:approval" in deferred[-1].data["reason"]
    journal, _ = harness.pw.store.read_activation(run_id, run.step)
    assert journal["i:approval"].value == "reject"  # the answer is kept
    report = harness.pw.check_deploy(run_id, f"{module}:flow")
    assert report.outcome == "nondeterministic" and "'approval'" in report.detail, report
    _deploy(deployed, CODE)  # the code that asks for it again
    reconcile_once(harness.pw.store, harness.pw.backend.dispatcher, outbox_age_ms=0)
    harness.run_jobs()
    harness.pw.wait(run_id, timeout=10)
    run = harness.pw.get_run(run_id)
    assert run.status is RunStatus.COMPLETED and run.output == {"verdict": "reject"}, run


def test_the_replay_command_exits_nondeterministic_for_a_renamed_pending_interrupt(
    redis_url: str, redis_client: object, deployed: Path
) -> None:
    """`parkway replay RUN --against` prints the report naming the interrupt and exits 3."""
    from parkway import Parkway, Settings
    from tests.conftest import SECRET

    settings = Settings(redis_url=redis_url, secret=SECRET)
    with Parkway(settings) as pw:
        h = Harness("redis", pw, settings, redis_client)  # type: ignore[arg-type]
        run_id = h.start_and_run(f"{deployed.stem}:flow")
    _deploy(deployed, RENAMED)
    env = _env(PARKWAY_REDIS_URL=redis_url)
    env["PYTHONPATH"] += os.pathsep + str(deployed.parent)
    done = parkway("check-deploy", run_id, "--against", f"{deployed.stem}:flow", env=env)
    assert done.returncode == 3, (done.stdout, done.stderr)
    assert "'approval'" in json.loads(done.stdout)["detail"]
