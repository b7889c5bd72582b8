"""The `parkway` command, run as a real process (and through main() where the output is all that matters)."""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import select
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis
import structlog

from parkway import Parkway, RunStatus, Settings, cli
from parkway.adapters.redis import keys
from parkway.cli import program
from parkway.http.app import hash_key
from tests import flows
from tests.conftest import SECRET, Closing, Harness
from tests.procs import ROOT, WORKFLOWS, answers, free_port, parkway_script, wait_for

ERROR_LINE = re.compile(r"^parkway: error: \S.*$")


def _env(**extra: str) -> dict[str, str]:
    """The environment of a user's shell: no PARKWAY_REDIS_URL unless given, tests importable."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PARKWAY_")}
    env.update(PYTHONPATH=str(ROOT), PARKWAY_SECRET=SECRET, **extra)
    return env


def parkway(*args: str, env: dict[str, str] | None = None, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    """Run `parkway ARGS` with no terminal (stdin is /dev/null)."""
    return subprocess.run(
        [sys.executable, "-m", "parkway.cli", *args],
        cwd=ROOT,
        env=env or _env(),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def in_process(*args: str, env: dict[str, str] | None = None, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    """Run `parkway ARGS` through the command's own ``main`` in this process, as ``parkway`` would in
    a process of its own (the same environment, stdin empty, stdout and stderr captured, the exit
    status ``main`` returns or argparse exits with): for tests of what a command prints and returns,
    without paying an interpreter's start (about half a second of CPU) per command. ``timeout`` is
    accepted for the same call shape; what may hang runs through ``parkway``."""
    out, err = io.StringIO(), io.StringIO()
    environ, logging_config = dict(os.environ), structlog.get_config()
    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    stdin = sys.stdin
    os.environ.clear()
    os.environ.update(env or _env())
    try:
        sys.stdin = io.StringIO("")
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                status = program.main(list(args))
            except SystemExit as exc:  # argparse's usage errors and --help
                status = exc.code if isinstance(exc.code, int) else int(exc.code is not None)
    finally:
        sys.stdin = stdin
        os.environ.clear()
        os.environ.update(environ)
        structlog.configure(**logging_config)
        for sig, handler in handlers.items():
            signal.signal(sig, handler)
    return subprocess.CompletedProcess(["parkway", *args], status, out.getvalue(), err.getvalue())


def _json_lines(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


def _stderr_lines(done: subprocess.CompletedProcess[str]) -> list[str]:
    return [line for line in done.stderr.splitlines() if line.strip()]


def _assert_one_error_line(done: subprocess.CompletedProcess[str], pattern: str) -> None:
    assert done.returncode == 1, (done.returncode, done.stdout, done.stderr)
    lines = _stderr_lines(done)
    assert len(lines) == 1, done.stderr
    assert ERROR_LINE.match(lines[0]) and re.search(pattern, lines[0]), lines[0]
    assert "Traceback" not in done.stdout + done.stderr


# --- demo ------------------------------------------------------------------


def test_demo_without_a_terminal_or_a_redis_answers_the_first_option_and_completes() -> None:
    """`parkway demo` with stdin from /dev/null and no Redis answers 'approve', sees the token spent, and publishes."""
    env = _env()
    env.pop("PARKWAY_SECRET")  # a first-time user has no secret either
    done = parkway("demo", env=env)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stdout + done.stderr
    assert "answering with the first option 'approve'" in done.stdout
    assert re.search(r"^resume: accepted$", done.stdout, re.M)
    assert re.search(r"^the same token and answer again \(a retry\): accepted$", done.stdout, re.M)
    assert re.search(r"^the same token, another answer: already_resolved$", done.stdout, re.M)
    run = _json_lines(done.stdout)[-1]
    assert run["status"] == "completed"
    assert run["workflow"] == "approval"
    assert run["output"]["published"] is True
    assert run["output"]["decision"] == "approve"


# --- run, interrupts, resume, worker, show on Redis -------------------------


@pytest.mark.slow
def test_run_waits_then_interrupts_resume_worker_and_show_finish_it(redis_client: redis.Redis, redis_url: str) -> None:
    """run prints events to the interrupt and exits 0; interrupts lists it; resume accepts once; show shows it done."""
    url = ["--redis-url", redis_url]
    run_id = "cli_" + uuid.uuid4().hex
    command = [
        sys.executable,
        "-m",
        "parkway.cli",
        "run",
        "tests.flows:one_choice",
        "--input",
        "{}",
        "--run-id",
        run_id,
        "--timeout",
        "20",
        *url,
    ]
    with subprocess.Popen(
        command,
        cwd=ROOT,
        env=_env(),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as run:
        assert run.stdout is not None and run.stderr is not None
        try:
            first = json.loads(run.stdout.readline())  # printed after start() returned: the job is queued
            assert first["type"] == "run.started" and first["workflow"] == "one_choice"
            worker = parkway("worker", "--burst", *url)
            assert worker.returncode == 0, worker.stderr
            rest = run.stdout.read()  # not communicate(): it would skip what readline() buffered
            err = run.stderr.read()
            run.wait(5)
        finally:
            if run.poll() is None:
                run.kill()
    assert run.returncode == 0, err
    events = [first, *_json_lines(rest)]
    assert [e["type"] for e in events] == ["run.started", "node.started", "interrupt"]
    interrupt = events[-1]
    assert interrupt["resumeToken"].startswith(run_id + ".")
    assert interrupt["expiresAt"] > interrupt["createdAt"]
    assert interrupt["input"]["question"] == "Pick a color"
    assert f"run {run_id} is waiting" in err
    assert "Traceback" not in err

    listed = parkway("interrupts", *url, "--tokens", "--json")
    assert listed.returncode == 0, listed.stderr
    items = json.loads(listed.stdout)["items"]
    assert [(i["runId"], i["requestId"]) for i in items] == [(run_id, interrupt["requestId"])]
    token = items[0]["resumeToken"]
    assert token == interrupt["resumeToken"]

    accepted = parkway("resume", token, "--select", "red", *url)
    assert accepted.returncode == 0, accepted.stderr
    expected = {"outcome": "accepted", "runId": run_id, "requestId": interrupt["requestId"]}
    assert json.loads(accepted.stdout) == expected
    again = parkway("resume", token, "--select", "red", *url)  # a retry: the same answer reads accepted
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout) == expected
    other = parkway("resume", token, "--select", "blue", *url)
    assert other.returncode == 3, other.stderr
    assert json.loads(other.stdout)["outcome"] == "already_resolved"

    worker = parkway("worker", "--burst", *url)
    assert worker.returncode == 0, worker.stderr
    shown = parkway("show", run_id, *url)
    assert shown.returncode == 0, shown.stderr
    record = json.loads(shown.stdout)
    assert record["runId"] == run_id and record["status"] == "completed"
    assert record["output"] == {"picked": "red", "painted": "red"}
    assert parkway("interrupts", *url).stdout.strip() == "no pending interrupts"


@pytest.mark.slow
def test_resume_with_an_unknown_option_exits_1_with_one_error_line_and_keeps_the_token(
    pw: Parkway, redis_url: str
) -> None:
    """resume --select green on a fresh one_choice run exits 1 with one error line; the same token then works."""
    url = ["--redis-url", redis_url]
    run_id = pw.start(flows.one_choice, {})
    assert parkway("worker", "--burst", *url).returncode == 0
    token = pw.list_interrupts(run_id=run_id, include_tokens=True).items[0].resume_token
    assert token is not None

    refused = parkway("resume", token, "--select", "green", *url)
    _assert_one_error_line(refused, r"unknown option")
    assert refused.stdout == ""
    assert pw.get_run(run_id).status is RunStatus.WAITING

    assert parkway("resume", token, "--select", "blue", *url).returncode == 0
    assert parkway("worker", "--burst", *url).returncode == 0
    assert pw.get_run(run_id).output == {"picked": "blue", "painted": "blue"}


# --- errors: one clear line, exit 1 ----------------------------------------


def test_resume_of_a_malformed_token_on_redis_exits_1_with_one_error_line(redis_url: str) -> None:
    """`parkway resume not-a-token --select x` against a Redis exits 1 with a single 'malformed' line that shows
    the shape a token has."""
    _assert_one_error_line(parkway("resume", "not-a-token", "--select", "x", "--redis-url", redis_url),
                           r"malformed: expected RUN_ID\.REQUEST_ID\.SIGNATURE")


def test_commands_that_need_a_redis_say_so_in_one_line() -> None:
    """`parkway resume` in a shell with no Redis configured says it needs one, in one line."""
    _assert_one_error_line(parkway("resume", "not-a-token", "--select", "x"), "needs a Redis")


@pytest.mark.parametrize(
    ("args", "pattern"),
    [
        (["run", "tests.flows:one_choice", "--input", "{not json"], r"--input is not valid JSON"),
        (["run", "tests.flows:one_choice", "--input", "[1, 2]"], r"input must be a dict"),
        (["run", "tests.flows:no_such_flow"], r"'tests.flows:no_such_flow' is not a parkway Workflow"),
        (["resume", "run_x." + "A" * 32, "--value", "{not json"], r"--value is not valid JSON"),
        (["show", "run_does_not_exist"], r"no run 'run_does_not_exist'"),
        (["show", "bad*id"], r"invalid run id 'bad\*id'"),
    ],
    ids=[
        "bad-input-json",
        "input-not-object",
        "unknown-workflow",
        "bad-value-json",
        "unknown-run",
        "invalid-run-id",
    ],
)
def test_bad_arguments_exit_1_with_one_clear_line(redis_url: str, args: list[str], pattern: str) -> None:
    """Invalid input, an unknown run and an invalid id each exit 1 with one `parkway: error:` line, no traceback."""
    _assert_one_error_line(parkway(*args, "--redis-url", redis_url), pattern)


@pytest.mark.parametrize(
    ("args", "flag"),
    [
        (["interrupts", "--limit", "0"], "--limit"),
        (["interrupts", "--limit", "1001"], "--limit"),
        (["interrupts", "--limit", "ten"], "--limit"),
        (["fork", "run_x", "--step", "-1"], "--step"),
        (["run", "tests.flows:one_choice", "--ttl-ms", "5"], "--ttl-ms"),
        (["worker", "--workers", "0"], "--workers"),
    ],
    ids=["limit-0", "limit-1001", "limit-word", "step-negative", "ttl-too-short", "workers-0"],
)
def test_a_number_out_of_range_is_a_usage_error_naming_the_flag(redis_url: str, args: list[str], flag: str) -> None:
    """A numeric flag out of its range exits 2, like every usage error, with the command's usage and the flag's name."""
    done = parkway(*args, "--redis-url", redis_url)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert f"error: argument {flag}: must be an integer" in done.stderr, done.stderr


def test_worker_with_zero_workers_is_refused_without_a_traceback(redis_url: str) -> None:
    """`parkway worker --workers 0` is refused with a clear message, not a traceback."""
    done = parkway("worker", "--workers", "0", "--burst", "--redis-url", redis_url)
    assert done.returncode != 0
    assert "Traceback" not in done.stderr, done.stderr
    assert "--workers" in done.stderr


@pytest.mark.slow  # the client library retries for ~10 s before giving up
def test_worker_against_an_unreachable_redis_is_one_clear_line() -> None:
    """`parkway worker` against a Redis that refuses connections exits 1 with one error line after its start line."""
    done = parkway("worker", "--burst", "--redis-url", "redis://127.0.0.1:1/0")
    start, *rest = done.stderr.splitlines(keepends=True)
    assert start.startswith("parkway worker: queue 'parkway' on redis://127.0.0.1:1/0"), done.stderr
    _assert_one_error_line(subprocess.CompletedProcess(done.args, done.returncode, done.stdout, "".join(rest)),
                           r"unreachable")


def test_worker_without_a_redis_is_one_clear_line() -> None:
    """`parkway worker` with no Redis configured says it needs one."""
    _assert_one_error_line(parkway("worker", "--burst"), r"needs a Redis")


# --- help ------------------------------------------------------------------


def _subcommands() -> list[str]:
    action = next(a for a in cli.parser()._actions if a.dest == "command")
    assert action.choices is not None
    return list(action.choices)


def test_every_subcommand_is_known() -> None:
    """The parser offers at least the documented commands."""
    assert {"worker", "run", "interrupts", "resume", "show", "demo"} <= set(_subcommands())


@pytest.mark.parametrize("argv", [["--help"], *[[name, "--help"] for name in _subcommands()]], ids=" ".join)
def test_help_exits_0(argv: Sequence[str], capsys: pytest.CaptureFixture[str]) -> None:
    """`parkway --help` and each subcommand's --help print usage and exit 0."""
    with pytest.raises(SystemExit) as exit_:
        cli.main(list(argv))
    assert exit_.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: parkway")


def test_help_as_a_process_exits_0() -> None:
    """`python -m parkway.cli --help` as a real process exits 0 and names every subcommand."""
    done = parkway("--help")
    assert done.returncode == 0, done.stderr
    for name in _subcommands():
        assert name in done.stdout


def test_no_subcommand_is_a_usage_error() -> None:
    """`parkway` alone prints usage and exits 2 (argparse's usage error)."""
    done = parkway()
    assert done.returncode == 2
    assert "usage: parkway" in done.stderr and "Traceback" not in done.stderr


# --- the interactive path, in a pseudo-terminal ------------------------------


CTRL_C = b"\x03"
"""An answer that sends SIGINT, as Ctrl-C at a terminal would (the pty here is no controlling terminal)."""


def _in_a_terminal(
    args: Sequence[str],
    answers: Sequence[tuple[bytes, bytes]],
    timeout: float = 20,
    env: dict[str, str] | None = None,
    answering: bool = True,
) -> tuple[int, str]:
    """Run `parkway ARGS` on a pseudo-terminal; type each answer once its prompt has appeared. Returns (rc, output).
    Not ``answering``: stdin is /dev/null, only the output is a terminal."""
    master, slave = os.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "parkway.cli", *args],
        cwd=ROOT,
        env=env or _env(),
        stdin=slave if answering else subprocess.DEVNULL,
        stdout=slave,
        stderr=slave,
        start_new_session=True,
    )
    os.close(slave)
    output, pending, seen = b"", list(answers), 0
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.1)
            if ready:
                try:
                    chunk = os.read(master, 4096)
                except OSError:  # EIO: every process holding the terminal is gone
                    break
                if not chunk:
                    break
                output += chunk
                if pending and output.find(pending[0][0], seen) != -1:
                    seen = output.find(pending[0][0], seen) + len(pending[0][0])
                    answer = pending.pop(0)[1]
                    if answer == CTRL_C:
                        proc.send_signal(signal.SIGINT)
                    else:
                        os.write(master, answer)
            elif proc.poll() is not None:
                break
        rc = proc.wait(max(0.1, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(5)
        text = output.decode(errors="replace")
        raise AssertionError(f"parkway {' '.join(args)} did not finish in {timeout}s:\n{text}") from None
    finally:
        os.close(master)
    return rc, output.decode(errors="replace").replace("\r\n", "\n")


def _completed_output(text: str) -> dict[str, Any]:
    """The output a terminal's `parkway run` printed once its run completed."""
    completed = [line for line in text.splitlines() if re.match(r"run \S+ completed", line)]
    outputs = [line.removeprefix("output: ") for line in text.splitlines() if line.startswith("output: ")]
    assert len(completed) == 1 and len(outputs) == 1, text
    output: dict[str, Any] = json.loads(outputs[0])
    return output


def test_run_in_a_terminal_asks_and_typing_2_picks_blue() -> None:
    """In a terminal (embedded, no Redis) `parkway run` lists the options; typing 2 picks blue; the run completes."""
    rc, text = _in_a_terminal(["run", "tests.flows:one_choice", "--timeout", "15"], [(b"answer (", b"2\n")])
    assert rc == 0, text
    assert "1. Red [red]" in text and "2. Blue [blue]" in text
    assert "resume: accepted" in text
    assert _completed_output(text) == {"picked": "blue", "painted": "blue"}
    assert "Traceback" not in text


def test_run_in_a_terminal_answers_two_interrupts_in_turn() -> None:
    """In a terminal, `parkway run` asks a node's two questions in turn and the run completes with both answers."""
    rc, text = _in_a_terminal(
        ["run", "tests.flows:two_questions", "--timeout", "5"], [(b"> ", b"Ada\n"), (b"answer (", b"2\n")]
    )
    assert rc == 0, text
    assert text.count("resume: accepted") == 2, text
    assert _completed_output(text) == {"name": "Ada", "color": "blue"}


def test_run_at_a_terminal_prints_one_readable_line_per_event() -> None:
    """`parkway run` at a terminal prints each event as one line (UTC time, type, gist; an interrupt's question and
    options), no JSON and no token; with --json it prints JSON lines there too."""
    rc, text = _in_a_terminal(["run", "tests.flows:one_choice"], [], answering=False)
    assert rc == 0, text
    lines = [line for line in text.splitlines() if re.match(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ  ", line)]
    assert [line.split()[1] for line in lines] == ["run.started", "node.started", "interrupt"], text
    assert "choose: Pick a color  [red] Red | [blue] Blue  (request i0_" in lines[-1]
    assert '{"type"' not in text and "resumeToken" not in text, text
    rc, text = _in_a_terminal(["run", "tests.flows:one_choice", "--json"], [], answering=False)
    as_json = _json_lines(text)
    assert [e["type"] for e in as_json] == ["run.started", "node.started", "interrupt"]


def test_replay_reports_consistent_or_nondeterministic_by_exit_status(
    redis_url: str, redis_client: redis.Redis, closing: Closing
) -> None:
    """check-deploy (or replay, its old name) exits 0 for the code the run recorded and 3 for code whose
    hooks changed, with JSON."""

    settings = Settings(redis_url=redis_url, secret=SECRET)
    harness = Harness("redis", closing(Parkway(settings)), settings, redis_client)
    run_id = harness.start_and_run(flows.announcer, {"tag": "cli"})
    env = _env(PARKWAY_REDIS_URL=redis_url)
    same = parkway("check-deploy", run_id, "--against", "tests.flows:announcer", env=env)
    assert same.returncode == 0 and json.loads(same.stdout)["outcome"] == "consistent", same.stderr
    changed = parkway("check-deploy", run_id, "--against", "tests.flows:announcer_changed", env=env)
    assert changed.returncode == 3 and json.loads(changed.stdout)["outcome"] == "nondeterministic", changed.stderr
    old_name = parkway("replay", run_id, "--against", "tests.flows:announcer", env=env)  # its deprecated alias
    assert old_name.returncode == 0 and json.loads(old_name.stdout)["outcome"] == "consistent", old_name.stderr


def test_serve_answers_health_and_refuses_without_keys(redis_url: str, redis_client: redis.Redis) -> None:
    """`parkway serve` without keys, or without the workflows it may import, refuses to start; with both
    it serves /healthz and /v1 for the key."""
    refused = parkway("serve", "--port", str(free_port()), env=_env(PARKWAY_REDIS_URL=redis_url))
    assert refused.returncode == 1 and "PARKWAY_API_KEYS" in refused.stderr
    port = free_port()
    env = _env(PARKWAY_REDIS_URL=redis_url, PARKWAY_API_KEYS=f"{hash_key('k' * 32)}=machine")
    unlisted = parkway("serve", "--port", str(port), env=env)
    assert unlisted.returncode == 1 and "PARKWAY_WORKFLOWS" in unlisted.stderr  # it would import what callers name
    proc = subprocess.Popen([sys.executable, "-m", "parkway.cli", "serve", "--port", str(port),
                             "--workflows", WORKFLOWS], cwd=ROOT, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        wait_for(lambda: answers(f"http://127.0.0.1:{port}"), 30, "parkway serve to answer")
        listed = httpx.get(f"http://127.0.0.1:{port}/v1/interrupts", headers={"Authorization": "Bearer " + "k" * 32})
        assert listed.status_code == 200 and listed.json()["items"] == []
    finally:
        proc.terminate()
        proc.wait(10)
        assert proc.stderr is not None
        proc.stderr.close()


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
    """Run the ``parkway`` script itself (``parkway_script``: this interpreter's own)."""
    return subprocess.run(
        [*parkway_script(), *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout,
        stdin=subprocess.DEVNULL,
    )


def test_the_script_run_is_this_interpreters_own_not_the_first_on_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A stale ``parkway`` script earlier on PATH is not the one the tests run: the one beside
    ``sys.executable`` is."""
    if not (Path(sys.executable).parent / "parkway").exists():
        pytest.skip("no parkway script installed beside this interpreter")
    stale = tmp_path / "parkway"
    stale.write_text("#!/bin/sh\necho stale\n")
    stale.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ.get('PATH', '')}")
    done = _parkway("--help", cwd=ROOT, env=_env())
    assert done.returncode == 0 and "stale" not in done.stdout and "usage: parkway" in done.stdout


def test_a_command_against_a_closed_port_fails_within_seconds_naming_the_url() -> None:
    """The ``parkway`` script against a port nobody listens on exits 1 within a few seconds of what
    starting the interpreter and importing the command's modules takes on this machine now (measured
    beside it: a loaded CI host can take seconds for that alone, and more for the same work a moment
    later: one CI simulation took 2.3 s past it), with one error line that names the URL it tried, its
    password left out (it used to retry for 10 s, silently)."""
    port = free_port()
    started = time.monotonic()
    subprocess.run([sys.executable, "-c", "import parkway.cli.runs, parkway.client.sync"], cwd=ROOT, env=_env(),
                   check=True, timeout=30)
    starting = time.monotonic() - started
    started = time.monotonic()
    done = _parkway("runs", "--redis-url", f"redis://:s3cret@127.0.0.1:{port}/0", cwd=ROOT, env=_env(), timeout=30)
    elapsed = time.monotonic() - started
    assert done.returncode == 1, done.stderr
    assert elapsed - starting <= 4.0, f"took {elapsed:.2f}s, {starting:.2f}s of it to start"
    [line] = done.stderr.splitlines()
    assert ERROR_LINE.match(line) and f"redis://127.0.0.1:{port}/0" in line and "s3cret" not in line, line


def test_a_closed_stdout_ends_the_command_quietly_with_141(redis_url: str, redis_client: redis.Redis) -> None:
    """``parkway runs | head`` with head gone: the ``parkway`` script exits 141 (128 + SIGPIPE, as
    other Unix tools) and prints no traceback."""
    read, write = os.pipe()
    os.close(read)  # the reader is gone before anything is written
    try:
        done = subprocess.run([*parkway_script(), "runs", "--redis-url", redis_url], cwd=ROOT, env=_env(),
                              stdout=write, stderr=subprocess.PIPE, text=True, timeout=30, stdin=subprocess.DEVNULL)
    finally:
        os.close(write)
    assert done.returncode == program.PIPE_CLOSED == 141, done.stderr
    assert "Traceback" not in done.stderr and "BrokenPipe" not in done.stderr, done.stderr


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
