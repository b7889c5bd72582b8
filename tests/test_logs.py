"""Logs are facts with the job's context bound; a library left unconfigured prints nothing on stdout."""

from __future__ import annotations

import io
import subprocess
import sys
import textwrap

import structlog
from structlog.testing import capture_logs

from parkway import Parkway
from parkway.runtime import executor
from parkway.runtime.store import NewRun
from tests import flows
from tests.conftest import Harness
from tests.procs import ROOT
from tests.test_cli import _user_env


def test_a_job_logs_with_run_node_step_and_request_bound(harness: Harness) -> None:
    """node_parked carries run_id, node, step and request_id; the context is unbound after the job."""
    run_id = "run_logged"
    harness.manual_store.create_run(executor_new_run(run_id, flows.one_choice.ref()))
    with capture_logs(processors=[structlog.contextvars.merge_contextvars]) as logs:
        executor.execute(harness.pw.store, harness.pw.backend.options, run_id, 0, 0)
    parked = [entry for entry in logs if entry["event"] == "node_parked"]
    assert len(parked) == 1
    assert parked[0]["run_id"] == run_id and parked[0]["node"] == "choose" and parked[0]["step"] == 0
    assert parked[0]["request_id"].endswith("_" + run_id)  # a minted id carries its run
    assert structlog.contextvars.get_contextvars() == {}


def test_a_stale_job_logs_why(harness: Harness) -> None:
    """A duplicate job logs job_stale with the reason instead of committing."""
    run_id = "run_stale_log"
    harness.manual_store.create_run(executor_new_run(run_id, flows.one_choice.ref()))
    executor.execute(harness.pw.store, harness.pw.backend.options, run_id, 0, 0)
    with capture_logs() as logs:
        assert executor.execute(harness.pw.store, harness.pw.backend.options, run_id, 0, 0) is executor.JobEnd.STALE
    assert [e["event"] for e in logs] == ["job_stale"]
    assert "fence" in logs[0]["reason"]


def test_start_and_an_accepted_resume_are_logged_on_both_stores(harness: Harness) -> None:
    """On Redis the job goes with the commit (a hand-off): the client still says what it did."""
    with capture_logs() as logs:
        run_id = harness.pw.start(flows.one_choice, {})
        harness.run_jobs()
        assert harness.pw.resume(harness.token(run_id), selected="red").accepted
    events = [e["event"] for e in logs if e.get("run_id") == run_id]
    assert "run_started" in events and "resume_accepted" in events, events


def executor_new_run(run_id: str, ref: str):  # type: ignore[no-untyped-def]

    return NewRun(run_id, "one_choice", ref, "choose", {}, 60_000, 0)


def test_a_line_below_the_configured_level_builds_no_logger() -> None:
    """A worker configured at WARNING drops info lines without building a logger for each (the
    logger factory is not called), and still writes its warnings."""
    from parkway.logs import configure
    from parkway.runtime.logger import get_logger

    out = io.StringIO()
    built: list[object] = []

    def factory(*args: object) -> structlog.PrintLogger:
        built.append(args)
        return structlog.PrintLogger(out)

    old = structlog.get_config()
    was_configured = structlog.is_configured()
    try:
        configure("WARNING", json=True)
        structlog.configure(logger_factory=factory)
        log = get_logger()
        log.info("quiet", a=1)
        log.debug("quieter")
        assert built == [] and out.getvalue() == ""
        log.warning("loud", a=2)
        assert len(built) == 1 and out.getvalue().count("\n") == 1 and '"loud"' in out.getvalue()
    finally:
        structlog.reset_defaults()
        if was_configured:
            structlog.configure(**old)


def test_lines_about_a_run_name_its_workflow_a_completed_node_its_duration_a_failure_its_traceback(
    harness: Harness,
) -> None:
    """node_completed carries the workflow and the node's duration; run_failed is an error with the exception
    (its traceback rendered by the configured processors), and names the workflow too."""
    with capture_logs(processors=[structlog.contextvars.merge_contextvars]) as logs:
        harness.start_and_run(flows.loop, {})
        harness.start_and_run(flows.boom, {})
    completed = [e for e in logs if e["event"] == "node_completed"]
    assert completed and all(e["workflow"] == "loop" and e["duration_ms"] >= 0 for e in completed), completed
    failed = [e for e in logs if e["event"] == "run_failed"]
    assert len(failed) == 1 and failed[0]["log_level"] == "error" and failed[0]["workflow"] == "boom"
    assert isinstance(failed[0]["exc_info"], ValueError) and "the node broke" in str(failed[0]["exc_info"])
    rendered = structlog.processors.format_exc_info(None, "error", dict(failed[0]))
    assert "Traceback" in rendered["exception"] and "explode" in rendered["exception"]


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


def test_a_configuration_waiting_for_the_first_line_imports_structlog_only_then() -> None:
    """`configure(at_first_line=True)` (what the CLI's listing commands do) leaves structlog unimported
    until parkway logs; that first line then comes out as configured (JSON at WARNING), and a
    configuration applied at once replaces one still waiting."""
    program = textwrap.dedent(
        """
        import io, json, sys
        from parkway.logs import configure
        from parkway.runtime.logger import get_logger

        out = io.StringIO()
        configure("WARNING", json=True, file=out, at_first_line=True)
        print("before:", "structlog" in sys.modules)
        get_logger().info("dropped")
        get_logger().warning("kept", a=1)
        line = json.loads(out.getvalue())
        print("after:", "structlog" in sys.modules, line["event"], line["a"], line["level"])

        later = io.StringIO()
        configure("ERROR", json=True, file=later, at_first_line=True)
        configure("INFO", json=True, file=later)  # now: the waiting one is forgotten
        get_logger().info("shown")
        print("replaced:", [json.loads(x)["event"] for x in later.getvalue().splitlines()])
        """
    )
    done = subprocess.run([sys.executable, "-c", program], cwd=ROOT, env=_user_env(), capture_output=True,
                          text=True, timeout=60, check=True)
    assert done.stdout.splitlines() == ["before: False", "after: True kept 1 warning", "replaced: ['shown']"], (
        done.stdout + done.stderr
    )


def test_a_cli_command_that_logged_nothing_leaves_no_configuration_waiting(pw: Parkway, redis_url: str) -> None:
    """`parkway interrupts` run in-process (its `main`) logs nothing; when it returns, nothing it
    set up waits for a first line to reconfigure structlog under the caller's own configuration."""
    program = textwrap.dedent(
        f"""
        from structlog.testing import capture_logs
        from parkway.cli import main
        from parkway.runtime.logger import get_logger

        assert main(["interrupts", "--redis-url", {redis_url!r}]) == 0
        with capture_logs() as logs:
            get_logger().info("after")
        print("captured:", [e["event"] for e in logs])
        """
    )
    done = subprocess.run([sys.executable, "-c", program], cwd=ROOT, env=_user_env(), capture_output=True,
                          text=True, timeout=60, check=True)
    assert done.stdout.splitlines()[-1] == "captured: ['after']", done.stdout + done.stderr
