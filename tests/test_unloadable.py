"""A workflow that cannot be loaded when a resume's job runs keeps the answer: the run is given back
queued (node.deferred) and replays with the answer once a worker can load the workflow again."""

from __future__ import annotations

import sys
import uuid
from pathlib import Path

import pytest

from parkway import ResumeOutcome, RunStatus
from parkway.workers.reconciler import reconcile_once
from tests.conftest import Harness

GOOD = """
from parkway import Workflow, use_interrupt

flow = Workflow("deployed")


@flow.node(start=True)
def ask(data):
    options = [{"id": "red", "label": "Red"}, {"id": "blue", "label": "Blue"}]
    return {"color": use_interrupt({"kind": "choice", "question": "Color?", "options": options}, id="color")}
"""

BROKEN = {
    "import fails": "raise RuntimeError('half deployed')\n",
    "syntax error": "def ask(:\n",
    "attribute gone": GOOD.replace("flow = ", "renamed = ").replace("@flow.", "@renamed."),
    "node gone": GOOD.replace("def ask", "def asked"),
}


@pytest.mark.parametrize("breakage", sorted(BROKEN))
def test_an_unloadable_workflow_at_resume_time_keeps_the_answer_until_it_loads(
    harness: Harness, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, breakage: str
) -> None:
    """Between the pause and its resume's job the module breaks (an import that raises, a syntax
    error, the workflow or its node renamed): the job gives the run back queued, saying why; the
    token reads already_resolved; once the module is fixed, the run completes with the answer."""
    module = f"pw_deploy_{uuid.uuid4().hex[:8]}"
    source = tmp_path / f"{module}.py"
    source.write_text(GOOD)
    monkeypatch.syspath_prepend(str(tmp_path))
    run_id = harness.start_and_run(f"{module}:flow")
    token = harness.token(run_id)
    source.write_text(BROKEN[breakage])
    sys.modules.pop(module, None)
    assert harness.pw.resume(token, selected="blue").accepted
    harness.run_jobs()
    run = harness.pw.get_run(run_id)
    assert run.status is RunStatus.QUEUED, run
    deferred = [e for e in harness.pw.store.read_events(run_id, "0", None, 1000) if e.type == "node.deferred"]
    assert deferred and module in deferred[-1].data["reason"], deferred
    assert harness.pw.resume(token, selected="red").outcome is ResumeOutcome.ALREADY_RESOLVED
    source.write_text(GOOD)  # the deploy is fixed
    sys.modules.pop(module, None)
    reconcile_once(harness.pw.store, harness.pw.backend.dispatcher, outbox_age_ms=0)
    harness.run_jobs()
    harness.pw.wait(run_id, timeout=10)
    run = harness.pw.get_run(run_id)
    assert run.status is RunStatus.COMPLETED and run.output == {"color": "blue"}, run
