"""Hardening: ids by full match, only allowed workflow modules, one token key, one attempt per
activation, bounded input, a quiet library, and a CLI that works from the application's directory."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import redis

from parkway import ConfigError, InvalidAnswer, Parkway, ResumeOutcome, RunStatus, Settings, ValidationError
from parkway.adapters.limits import Limits
from parkway.adapters.redis import keys
from parkway.errors import InvalidId, MalformedResume, WorkflowUnavailable
from parkway.runtime.clock import now_ms
from parkway.runtime.loading import WorkflowModules
from parkway.runtime.protocol import check_id
from parkway.runtime.store import NewRun
from tests import flows
from tests.conftest import SECRET, Closing, Harness
from tests.procs import ROOT, Worker, wait_for

# --- ids ------------------------------------------------------------------------------------


@pytest.mark.parametrize("bad", ["evil\n", "evil\r\n", "\nevil", "ev\nil", "evil ", "a" * 65, "", "-x", "é", "١٢"])
def test_ids_are_checked_by_full_match(bad: str) -> None:
    """An id with a trailing newline (which `$` would let through), a space, a non-ASCII letter or
    digit, or the wrong length is refused."""
    with pytest.raises(InvalidId):
        check_id(bad, "run id")


@pytest.mark.parametrize("where", ["run_id", "workflow", "request_id", "queue"])
def test_a_trailing_newline_reaches_no_key(harness: Harness, where: str) -> None:
    """start(run_id="evil\\n"), a listing filter, a resume's requestId and a queue name ending in a
    newline are refused before anything is written."""
    with pytest.raises(ValidationError):
        if where == "run_id":
            harness.pw.start(flows.one_choice, {}, run_id="evil\n")
        elif where == "workflow":
            harness.pw.list_interrupts(workflow="one_choice\n")
        elif where == "request_id":
            run_id = harness.start_and_run(flows.one_choice)
            harness.pw.resume(harness.token(run_id), selected="red", request_id="int_x\n")
        else:
            Settings(queue="parkway\n")
    with pytest.raises(ValidationError):
        harness.pw.list_interrupts(cursor="n.0000000000000:0000000000000:w:r:q\n")


# --- which workflow modules run ---------------------------------------------------------------


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
    """With PARKWAY_WORKFLOWS, its modules (and submodules) load; application code outside it is refused."""
    settings = Settings.from_env({"PARKWAY_WORKFLOWS": "tests.flows, bench"}, secret=SECRET)
    assert settings.workflows == ("tests.flows", "bench")
    assert settings.modules.load("tests.flows:one_choice") is flows.one_choice
    with pytest.raises(WorkflowUnavailable, match="not in PARKWAY_WORKFLOWS"):
        WorkflowModules(("tests.flow",)).load("tests.flows:one_choice")  # a prefix is not a parent
    with pytest.raises(ConfigError):
        Settings(workflows=("tests/flows",))


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


# --- one token key --------------------------------------------------------------------------


def test_a_client_with_another_key_is_refused_at_start(
    redis_url: str, redis_client: redis.Redis, closing: Closing
) -> None:
    """A second client with a different PARKWAY_SECRET, or none at all, is refused with an error
    that says why; the key itself is not stored, only a fingerprint."""
    closing(Parkway(Settings(redis_url=redis_url, secret=SECRET)))
    with pytest.raises(ConfigError, match="PARKWAY_SECRET"):
        Parkway(Settings(redis_url=redis_url, secret="another-secret-" + "y" * 32))
    with pytest.raises(ConfigError, match="generated in Redis"):
        Parkway(Settings(redis_url=redis_url))
    stored = b"".join(redis_client.mget([k for k in redis_client.scan_iter("pw:*")]) or [])
    assert SECRET.encode() not in stored
    closing(Parkway(Settings(redis_url=redis_url, secret=SECRET)))  # the same key is welcome


def _connections(client: redis.Redis) -> int:
    """Connections open on the client's database (other databases belong to other test sessions)."""
    db = str(client.connection_pool.connection_kwargs.get("db", 0))
    return sum(1 for c in client.client_list() if str(c["db"]) == db)


def test_a_client_refused_at_start_leaves_no_connection_open(
    redis_url: str, redis_client: redis.Redis, closing: Closing
) -> None:
    """A Parkway refused for another key closes the connection it opened to find out, even while the
    error (and everything its traceback holds) is still alive."""
    closing(Parkway(Settings(redis_url=redis_url, secret=SECRET)))
    before = _connections(redis_client)
    with pytest.raises(ConfigError) as refused:
        Parkway(Settings(redis_url=redis_url, secret="another-secret-" + "y" * 32))
    assert refused.traceback and _connections(redis_client) == before


def test_installing_a_worker_runtime_again_closes_the_one_it_replaces(
    redis_url: str, redis_client: redis.Redis
) -> None:
    """jobs.install twice in one process leaves one runtime's connections open, not two."""
    from parkway.workers import jobs

    settings = Settings(redis_url=redis_url, secret=SECRET)
    first = jobs.install(settings)
    first.store.client.ping()
    before = _connections(redis_client)
    jobs.install(settings).store.client.ping()
    assert _connections(redis_client) == before
    jobs.uninstall()
    assert _connections(redis_client) == before - 1


@pytest.mark.slow
def test_a_worker_with_another_key_refuses_to_start(
    redis_url: str, redis_client: redis.Redis, closing: Closing
) -> None:
    """`parkway worker` whose PARKWAY_SECRET differs from the clients' exits non-zero saying so."""
    closing(Parkway(Settings(redis_url=redis_url, secret=SECRET)))
    worker = Worker(redis_url, "a-different-secret-" + "z" * 32, "--burst")
    worker.proc.wait(30)
    out = worker.stop()
    assert worker.proc.returncode != 0 and "PARKWAY_SECRET" in out, out


# --- one attempt per activation -------------------------------------------------------------


def test_a_duplicate_job_never_runs_a_node_while_another_attempt_holds_the_lease(harness: Harness) -> None:
    """While one attempt holds a live lease on the activation, a second copy of its job is stale and
    runs nothing; once that lease has lapsed, a copy may take the activation over."""
    run_id = harness.pw.start(flows.stepper, {"tag": "dup"})
    now = now_ms()
    harness.pw.store.begin(run_id, 0, 0, now, now + 60_000)  # another worker is running it
    harness.pw.backend.dispatcher.enqueue(run_id, 0, 0)
    harness.run_jobs()
    assert flows.effects["charge:dup"] == 0
    assert harness.pw.get_run(run_id).status is RunStatus.RUNNING
    harness.pw.store.heartbeat([run_id], now_ms() - 1)  # its worker went silent
    harness.pw.store.begin(run_id, 0, 0, now_ms(), now_ms() + 60_000)
    assert flows.effects["charge:dup"] == 0


@pytest.mark.slow
def test_two_copies_of_one_job_on_two_workers_charge_once(
    redis_url: str, redis_client: redis.Redis, closing: Closing
) -> None:
    """The same job pushed twice before two worker processes start runs the node body once."""
    pw = closing(Parkway(Settings(redis_url=redis_url, secret=SECRET)))
    run_id = pw.start(flows.blocking, {"tag": "twice"})
    redis_client.set("test:block:twice", 1)
    job = f"pw-{run_id}-0"
    redis_client.rpush("rq:queue:parkway", job)  # the second copy
    env = {"PARKWAY_EFFECTS_URL": redis_url}
    workers = [Worker(redis_url, SECRET, env=env), Worker(redis_url, SECRET, env=env)]
    try:
        wait_for(lambda: redis_client.exists("test:inside:twice"), 30, "one attempt inside the node")
        time.sleep(1.5)  # the other worker has had the copy by now
        assert int(redis_client.get("test:effects:charge:twice") or 0) == 1
        redis_client.delete("test:block:twice")
        wait_for(lambda: pw.get_run(run_id).status is RunStatus.COMPLETED, 30, "the run to complete")
        assert int(redis_client.get("test:effects:charge:twice") or 0) == 1
    finally:
        for w in workers:
            w.stop()


# --- bounded input --------------------------------------------------------------------------


def _nested(depth: int) -> list:
    value: list = ["red"]
    for _ in range(depth):
        value = [value]
    return value


@pytest.mark.parametrize("depth", [400, 600, 5000])
def test_deep_answers_and_inputs_are_refused_and_the_interrupt_stays_open(harness: Harness, depth: int) -> None:
    """A selected or value nested hundreds of levels deep, and such a run input, raise a parkway
    error (never RecursionError); the interrupt stays open."""
    run_id = harness.start_and_run(flows.one_choice)
    token = harness.token(run_id)
    with pytest.raises(InvalidAnswer):
        harness.pw.resume(token, selected=_nested(depth))
    with pytest.raises(ValidationError):
        harness.pw.start(flows.one_choice, {"deep": _nested(depth)})
    assert harness.pw.resume(token, selected="red").accepted


def test_resume_message_needs_the_request_id_and_checks_it(harness: Harness) -> None:
    """resume_message without requestId is malformed; with another request's id it is refused."""
    run_id = harness.start_and_run(flows.one_choice)
    token = harness.token(run_id)
    with pytest.raises(MalformedResume, match="requestId"):
        harness.pw.resume_message({"metadata": {"resume": {"token": token, "selected": "red"}}})
    with pytest.raises(InvalidAnswer, match="requestId"):
        resume = {"token": token, "requestId": "int_other", "selected": "red"}
        harness.pw.resume_message({"metadata": {"resume": resume}})
    assert harness.pw.get_run(run_id).status is RunStatus.WAITING


@pytest.mark.parametrize("answer", [{}, {"selected": "red"}])
def test_cancel_in_a_message_cancels_and_is_never_recorded_as_an_answer(harness: Harness, answer: dict) -> None:
    """{cancel: true} (alone, or beside an answer) cancels the interrupt: the run ends cancelled,
    no answer is recorded, and the token is spent."""
    run_id = harness.start_and_run(flows.one_choice)
    token = harness.token(run_id)
    request_id = token.split(".")[1]
    message = {"metadata": {"resume": {"token": token, "requestId": request_id, "cancel": True, **answer}}}
    assert harness.pw.resume_message(message).accepted
    harness.run_jobs()
    run = harness.pw.get_run(run_id)
    assert run.status is RunStatus.CANCELLED and "picked" not in run.data
    events = [e.type for e in harness.pw.store.read_events(run_id, "0", None, 1000)]
    assert "interrupt.cancelled" in events and "interrupt.resumed" not in events
    assert harness.pw.resume(token, selected="red").outcome is ResumeOutcome.ALREADY_RESOLVED


# --- retention ------------------------------------------------------------------------------


def test_retention_is_a_setting(redis_url: str, redis_client: redis.Redis, closing: Closing) -> None:
    """PARKWAY_RETENTION_MS sets how long a run's summary outlives its records (7 days by default)."""
    assert Settings.from_env({}).limits.retention_ms == 7 * 24 * 3600 * 1000
    settings = Settings.from_env({"PARKWAY_RETENTION_MS": "5000"}, redis_url=redis_url, secret=SECRET)
    assert settings.limits == Limits(retention_ms=5000)
    run_id = closing(Parkway(settings)).start(flows.one_choice, {})
    records, summary = redis_client.pttl(keys.run(run_id)), redis_client.pttl(keys.summary(run_id))
    assert 0 < records < summary <= records + 5000 and summary >= records + 4000
    with pytest.raises(ConfigError):
        Settings.from_env({"PARKWAY_RETENTION_MS": "soon"})


# --- the command line and the library, as a user meets them --------------------------------

EXPENSES = textwrap.dedent(
    """
    from parkway import Workflow, use_interrupt

    expense = Workflow("expense")

    @expense.node(start=True)
    def review(data):
        return {"ok": use_interrupt({"kind": "text", "question": "Why?"}, id="why")}
    """
)


def _parkway(*args: str, cwd: Path, env: dict[str, str], timeout: float = 60) -> subprocess.CompletedProcess[str]:
    exe = shutil.which("parkway")
    command = [exe] if exe else [sys.executable, "-c", "import sys; from parkway.cli import main; sys.exit(main())"]
    return subprocess.run(
        [*command, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL
    )


def _user_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PARKWAY_") and k != "PYTHONPATH"}
    return {**env, "PARKWAY_SECRET": SECRET, **extra}


@pytest.mark.slow
def test_the_production_commands_work_from_the_modules_directory(
    tmp_path: Path, redis_url: str, redis_client: redis.Redis, closing: Closing
) -> None:
    """`parkway worker` and `parkway run expenses:expense`, started in the directory of expenses.py
    (as the README says), find it; a worker started elsewhere leaves the run queued and says how
    to fix it, and a worker with --path then completes it."""
    (tmp_path / "app").mkdir()
    (tmp_path / "app" / "expenses.py").write_text(EXPENSES)
    env = _user_env(PARKWAY_REDIS_URL=redis_url)
    started = _parkway("run", "expenses:expense", "--run-id", "exp1", "--timeout", "1", cwd=tmp_path / "app", env=env)
    assert "No module named" not in started.stderr, started.stderr
    # a worker in the wrong directory: the run is given back, not failed
    elsewhere = _parkway("worker", "--burst", cwd=tmp_path, env=env)
    assert elsewhere.returncode == 0, elsewhere.stderr
    pw = closing(Parkway(Settings(redis_url=redis_url, secret=SECRET)))
    assert pw.get_run("exp1").status is RunStatus.QUEUED
    deferred = [e for e in pw.store.read_events("exp1", "0", None, 1000) if e.type == "node.deferred"]
    assert deferred and "--path" in deferred[0].data["reason"]
    # the reconciler enqueues it again (its outbox entry aged here rather than waited for)
    redis_client.zadd(keys.outbox(), {m: 0 for m in redis_client.zrange(keys.outbox(), 0, -1)})
    assert "exp1" in _parkway("reconcile", cwd=tmp_path, env=env).stdout
    # and a worker that can import it parks it
    right = _parkway("worker", "--burst", "--path", str(tmp_path / "app"), cwd=tmp_path, env=env)
    assert right.returncode == 0, right.stderr
    wait_for(lambda: pw.get_run("exp1").status is RunStatus.WAITING, 20, "the run to park")


@pytest.mark.parametrize("command", [["demo"], ["run", "tests.flows:one_choice", "--timeout", "10"]])
def test_a_closed_stdin_is_no_crash(command: list[str]) -> None:
    """`parkway demo <&-` and `parkway run ... <&-` (stdin closed, not /dev/null) run without a traceback."""
    line = " ".join([sys.executable, "-m", "parkway.cli", *command]) + " <&-"
    done = subprocess.run(
        ["bash", "-c", line], cwd=ROOT, env=_user_env(), capture_output=True, text=True, timeout=60
    )
    assert "Traceback" not in done.stderr and "AttributeError" not in done.stderr, done.stderr
    assert done.returncode == 0, done.stderr


def test_a_deep_value_on_the_command_line_is_a_clear_error(tmp_path: Path) -> None:
    """--value with 50,000 nested brackets exits 1 with a parkway error, not a traceback."""
    done = _parkway("resume", "run_1.int_1." + "A" * 32, "--value", "[" * 50_000 + "]" * 50_000,
                    cwd=tmp_path, env=_user_env(PARKWAY_REDIS_URL="redis://127.0.0.1:1/0"))
    assert done.returncode == 1 and "parkway: error" in done.stderr and "Traceback" not in done.stderr, done.stderr


def test_the_library_is_quiet_on_stdout() -> None:
    """Used as a library with structlog unconfigured, parkway prints nothing on stdout (INFO lines
    are dropped); its warnings go to stderr."""
    program = textwrap.dedent(
        """
        from parkway import Parkway, Settings
        from parkway.demo import approval
        pw = Parkway(Settings())
        run_id = pw.start(approval, {"title": "t"})
        pw.wait(run_id, timeout=10)
        token = pw.list_interrupts(include_tokens=True).items[0].resume_token
        pw.resume(token, selected="approve")
        print("done:", pw.wait(run_id, timeout=10).status.value)
        """
    )
    done = subprocess.run([sys.executable, "-c", program], cwd=ROOT, env=_user_env(), capture_output=True,
                          text=True, timeout=60)
    assert done.stdout == "done: completed\n", done.stdout
    assert "run_started" not in done.stderr and "resume_accepted" not in done.stderr
    assert "embedded" in done.stderr  # the one warning: nothing survives the process
