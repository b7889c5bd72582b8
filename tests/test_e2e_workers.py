"""End to end: `parkway worker` runs in a process of its own; this test process is the client."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator

import pytest
import redis
from rq import Queue

from parkway import Parkway, RunStatus, WorkflowError
from tests import flows
from tests.conftest import SECRET
from tests.procs import ROOT, Worker

pytestmark = pytest.mark.slow


@pytest.fixture
def worker(redis_client: redis.Redis, redis_url: str) -> Iterator[Worker]:
    """`parkway worker` (not burst) on the test database; fails the test if it printed a traceback."""
    proc = Worker(redis_url, SECRET, env={"PARKWAY_EFFECTS_URL": redis_url})
    yield proc
    output = proc.stop()
    if "Traceback" in output:
        pytest.fail(f"the worker printed a traceback:\n{output[-3000:]}")


def _cli_env() -> dict[str, str]:
    env = {**os.environ, "PARKWAY_SECRET": SECRET, "PYTHONPATH": str(ROOT)}
    env.pop("PARKWAY_REDIS_URL", None)
    return env


def _burst(redis_url: str, *extra: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "parkway.cli", "worker", "--redis-url", redis_url, "--burst", *extra],
        cwd=ROOT,
        env=_cli_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def _token(pw: Parkway, run_id: str) -> str:
    items = pw.list_interrupts(run_id=run_id, include_tokens=True).items
    assert len(items) == 1, items
    assert items[0].resume_token is not None
    return items[0].resume_token


def test_two_interrupts_resumed_twice_while_the_worker_process_runs_the_node(pw: Parkway, worker: Worker) -> None:
    """A node asking for text, then a choice, finishes with both answers after two resumes from another process."""
    run_id = pw.start(flows.two_questions, {})
    first = pw.wait(run_id, timeout=10)
    assert first.status is RunStatus.WAITING and first.interrupt is not None
    assert first.interrupt.request.kind == "text"
    assert pw.resume(_token(pw, run_id), value="Ada").accepted

    second = pw.wait(run_id, timeout=10)
    assert second.status is RunStatus.WAITING and second.interrupt is not None
    assert second.interrupt.request.kind == "choice"
    assert second.interrupt.request_id != first.interrupt.request_id
    assert pw.resume(_token(pw, run_id), selected="blue").accepted

    done = pw.wait(run_id, timeout=10)
    assert done.status is RunStatus.COMPLETED, done
    assert done.output == {"name": "Ada", "color": "blue"}


def test_node_state_guard_keeps_the_side_effect_to_one_execution_in_the_worker(
    pw: Parkway, worker: Worker, redis_client: redis.Redis
) -> None:
    """A use_node_state flag keeps the worker's side effect to one execution across pause, resume and replay."""
    tag = uuid.uuid4().hex[:12]
    run_id = pw.start(flows.guarded, {"tag": tag})
    assert pw.wait(run_id, timeout=10).status is RunStatus.WAITING
    assert int(redis_client.get(f"test:effects:email:{tag}") or 0) == 1
    assert pw.resume(_token(pw, run_id), selected="red").accepted

    run = pw.wait(run_id, timeout=10)
    assert run.status is RunStatus.COMPLETED, run
    assert run.output == {"tag": tag, "decision": "red"}
    assert int(redis_client.get(f"test:effects:email:{tag}") or 0) == 1
    data_events = [e.data["data"] for e in pw.stream(run_id, timeout=5) if e.type == "data"]
    assert data_events == [{"sent": True}]


def test_workflow_state_written_by_one_node_is_read_by_the_next_in_the_worker(pw: Parkway, worker: Worker) -> None:
    """use_workflow_state set by one node is what the next node reads, with both nodes run by the worker process."""
    run_id = pw.start(flows.shared_state, {})
    run = pw.wait(run_id, timeout=10)
    assert run.status is RunStatus.COMPLETED, run
    assert run.output == {"seen": {"id": 42, "by": "writer"}}


def test_burst_worker_drains_the_queue_and_exits_0(pw: Parkway, redis_client: redis.Redis, redis_url: str) -> None:
    """`parkway worker --burst` runs every queued job (to a pause or the end), then exits 0."""
    parked = pw.start(flows.one_choice, {})
    shared = pw.start(flows.shared_state, {})
    looped = pw.start("tests.flows:loop", {})
    assert Queue("parkway", connection=redis_client).count == 3

    done = _burst(redis_url)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stdout + done.stderr, done.stderr
    assert Queue("parkway", connection=redis_client).count == 0
    assert pw.get_run(parked).status is RunStatus.WAITING
    assert pw.get_run(shared).output == {"seen": {"id": 42, "by": "writer"}}
    assert pw.get_run(looped).output == {"n": 3, "done": True}


def test_a_pool_of_two_burst_workers_completes_twenty_runs(
    pw: Parkway, redis_client: redis.Redis, redis_url: str
) -> None:
    """`parkway worker --workers 2 --burst` completes 20 started runs of a workflow without interrupts."""
    run_ids = [pw.start(flows.loop, {}) for _ in range(20)]

    done = _burst(redis_url, "--workers", "2")
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stdout + done.stderr, done.stderr
    runs = [pw.get_run(r) for r in run_ids]
    assert [r.status for r in runs] == [RunStatus.COMPLETED] * 20
    assert all(r.output == {"n": 3, "done": True} for r in runs)
    assert Queue("parkway", connection=redis_client).count == 0


@pytest.mark.parametrize(
    "ref",
    ["tests.flows:no_such_flow", "tests.no_such_module:flow", "tests.flows:COLORS", "tests.flows"],
)
def test_an_unknown_workflow_reference_fails_at_start_and_enqueues_nothing(
    pw: Parkway, redis_client: redis.Redis, ref: str
) -> None:
    """start() with a reference that names no importable Workflow raises WorkflowError; no run, no job."""
    with pytest.raises(WorkflowError, match="workflow|Workflow"):
        pw.start(ref, {})
    assert Queue("parkway", connection=redis_client).count == 0
    assert set(redis_client.scan_iter("pw:*")) <= {b"pw:keyid"}  # the token key's fingerprint, from connecting
    assert list(redis_client.scan_iter("rq:job:*")) == []
