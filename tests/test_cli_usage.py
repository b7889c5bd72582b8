"""The `parkway` command as a first-time user meets it: help, prompts, errors, exit statuses, JSON shape."""

from __future__ import annotations

import argparse
import io
import json
import re
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator

import pytest
import redis

from parkway import Parkway, RunStatus, Settings, cli
from parkway.cli import ask, interrupts
from parkway.runtime.protocol import Interrupt, InterruptRequest, Option
from tests import flows
from tests.conftest import SECRET, Harness
from tests.procs import ROOT
from tests.test_cli import (
    CTRL_C,
    _assert_one_error_line,
    _completed_output,
    _env,
    _in_a_terminal,
    _json_lines,
    _stderr_lines,
    in_process,
)


def _waiting(pw: Parkway, redis_url: str, workflow: object = flows.one_choice) -> tuple[str, str]:
    """Start a run on Redis and let a burst worker take it to its first interrupt; return (run id, token)."""
    run_id = pw.start(workflow, {})  # type: ignore[arg-type]
    assert in_process("worker", "--burst", "--redis-url", redis_url).returncode == 0
    token = pw.list_interrupts(run_id=run_id, include_tokens=True).items[0].resume_token
    assert token is not None
    return run_id, token


# --- help ------------------------------------------------------------------


def _subparsers() -> dict[str, argparse.ArgumentParser]:
    action = next(a for a in cli.parser()._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


@pytest.mark.parametrize("name", sorted(_subparsers()))
def test_every_option_and_positional_has_a_help_text(name: str) -> None:
    """Each command's options and positionals all say what they are for."""
    missing = [
        a.option_strings[0] if a.option_strings else a.dest
        for a in _subparsers()[name]._actions
        if not a.help or a.help == argparse.SUPPRESS
    ]
    assert missing == []


def test_the_top_level_options_and_the_command_have_help_texts() -> None:
    """`parkway --help` explains -v and the COMMAND positional, not only each command."""
    assert all(a.help and a.help != argparse.SUPPRESS for a in cli.parser()._actions)


@pytest.mark.parametrize("name", ["resume", "cancel"])
def test_resume_and_cancel_help_state_the_same_exit_statuses(name: str) -> None:
    """`resume --help` and `cancel --help` both list 0 accepted, 3 already resolved, 4 expired, 5 unknown."""
    text = _subparsers()[name].format_help()
    for status in ("0 accepted", "3 already", "4 expired", "5 unknown"):
        assert status in text, text


def test_redis_url_help_fits_each_command() -> None:
    """worker says a Redis is required; demo offers no --redis-url; only run mentions embedded."""
    subs = _subparsers()
    assert "--redis-url" not in subs["demo"].format_help()
    worker = next(a for a in subs["worker"]._actions if "--redis-url" in a.option_strings)
    assert worker.help is not None and "required" in worker.help and "embedded" not in worker.help
    for name in ("interrupts", "resume", "show", "cancel", "events", "reconcile"):
        action = next(a for a in subs[name]._actions if "--redis-url" in a.option_strings)
        assert action.help is not None and "embedded" not in action.help, name


def test_verbose_is_accepted_after_the_subcommand() -> None:
    """`parkway show X -v` parses like `parkway -v show X`; without -v either place, verbose is off."""
    assert cli.parser().parse_args(["show", "run_x", "-v"]).verbose is True
    assert cli.parser().parse_args(["-v", "show", "run_x"]).verbose is True
    assert cli.parser().parse_args(["show", "run_x"]).verbose is False


def test_a_mistyped_command_or_option_gets_the_nearest_one_suggested(capsys: pytest.CaptureFixture[str]) -> None:
    """`parkway shw` suggests show; `parkway resume T --selct x` is refused by resume's own usage,
    suggesting --select; both are usage errors (exit 2)."""
    with pytest.raises(SystemExit) as exited:
        cli.main(["shw", "run_x"])
    assert exited.value.code == 2
    assert "did you mean 'show'?" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exited:
        cli.main(["resume", "tok", "--selct", "red"])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert "usage: parkway resume" in err and "--selct" in err and "did you mean --select?" in err, err


# --- the prompt ------------------------------------------------------------


def test_prompt_shows_option_descriptions_and_a_text_limit() -> None:
    """ask() shows each option's description, and a text request's maxLength."""
    out = io.StringIO()
    choice = InterruptRequest(
        kind="choice", question="Publish?", options=(Option(id="approve", label="Approve", description="now"),)
    )
    ask.ask(choice, stdin=io.StringIO("1\n"), out=out)
    assert "1. Approve [approve] - now" in out.getvalue()
    out = io.StringIO()
    ask.ask(InterruptRequest(kind="text", question="Name?", max_length=80), stdin=io.StringIO("Ada\n"), out=out)
    assert "80 characters" in out.getvalue()


def test_prompt_asks_again_after_a_wrong_answer_saying_what_was_wrong() -> None:
    """ask() re-asks after an out-of-range number or unknown id, naming the problem, and returns the valid pick."""
    request = InterruptRequest(
        kind="choice", question="Pick", options=(Option(id="red", label="Red"), Option(id="blue", label="Blue"))
    )
    out = io.StringIO()
    assert ask.ask(request, stdin=io.StringIO("7\ngreen\n2\n"), out=out) == {"selected": "blue"}
    text = out.getvalue()
    assert text.count("answer (") == 3
    assert "green" in text and "7" in text


def _contract_request() -> InterruptRequest:
    return InterruptRequest(
        kind="contract", question=flows.pick_job.question, schema_id="pick-job", schema_version=2,
        payload={"team": "ops", "limit": 5}, contract_ref="tests.flows:pick_job",
    )


def test_contract_prompt_shows_the_schema_and_asks_again_until_the_json_fits() -> None:
    """ask() of a contract shows the question, the schema id and version, the request's data and the
    response model's fields (name, type, required, description, limits); it asks for JSON again after
    text that is not JSON and after JSON that breaks the model, saying why, and returns value=."""
    out = io.StringIO()
    answers = io.StringIO('job 7\n{"job_id": "nope"}\n{"job_id": "job-7", "note": "tonight"}\n')
    answer = ask.ask(_contract_request(), stdin=answers, out=out, contract=flows.pick_job)
    assert answer == {"value": {"job_id": "job-7", "note": "tonight"}}
    text = out.getvalue()
    assert "Which job should run?" in text and "pick-job v2" in text
    assert '"team": "ops"' in text
    assert re.search(r"job_id\s+string, required\s+- the job to run", text), text
    assert "job-[0-9]+" in text
    assert re.search(r"note\s+string or null, optional", text) and "at most 200 characters" in text, text
    assert text.count("answer (a JSON object") == 3
    assert "not JSON" in text and "job_id" in text.split("not JSON")[1] and text.count("try again") == 2


def test_run_in_a_terminal_asks_a_contract_for_json_until_it_fits() -> None:
    """`parkway run` of a contract workflow in a terminal shows the schema, asks again after an answer
    that breaks the response model (not exiting), and completes with the one that fits."""
    rc, text = _in_a_terminal(
        ["run", "tests.flows:contracted", "--input", '{"team": "ops"}', "--timeout", "15"],
        [(b"answer (a JSON", b'{"job_id": "seven"}\n'), (b"answer (a JSON", b'{"job_id": "job-7"}\n')],
    )
    assert rc == 0, text
    assert "pick-job v2" in text and "job_id" in text and "try again" in text
    assert "resume: accepted" in text
    assert _completed_output(text) == {"team": "ops", "job": "job-7", "note": None}


@pytest.mark.slow
def test_resume_of_a_contract_takes_value_json_or_asks_at_a_terminal(pw: Parkway, redis_url: str) -> None:
    """`resume TOKEN --value JSON` answers a contract (one that breaks the model exits 1 and keeps the
    token); `resume TOKEN` with no answer asks at a terminal, and without one is a usage error."""
    url = ["--redis-url", redis_url]
    run_id = pw.start(flows.contracted, {"team": "ops"})
    assert in_process("worker", "--burst", *url).returncode == 0
    token = pw.list_interrupts(run_id=run_id, include_tokens=True).items[0].resume_token
    assert token is not None
    bad = in_process("resume", token, "--value", '{"job_id": "seven"}', *url)
    assert bad.returncode == 1 and "pick-job" in bad.stderr and "job_id" in bad.stderr, bad.stderr
    bare = in_process("resume", token, *url)
    assert bare.returncode == 2 and "--select, --text or --value" in bare.stderr, bare.stderr
    rc, text = _in_a_terminal(["resume", token, *url], [(b"answer (a JSON", CTRL_C)])
    assert rc == 130 and "still waiting and the token still works" in text, text
    rc, text = _in_a_terminal(
        ["resume", token, *url], [(b"answer (a JSON", b"{}\n"), (b"answer (a JSON", b'{"job_id": "job-9"}\n')]
    )
    assert rc == 0, text
    assert "pick-job v2" in text and '"team": "ops"' in text and "try again" in text
    assert json.loads(text[text.index('{"outcome"'):].splitlines()[0])["outcome"] == "accepted"
    again = in_process("resume", token, "--value", '{"job_id": "job-1"}', *url)
    assert again.returncode == 3


def test_demo_in_a_terminal_asks_again_after_a_typo() -> None:
    """In a terminal, `parkway demo` answers a typo with what was wrong and asks again, then completes."""
    rc, text = _in_a_terminal(["demo"], [(b"answer (", b"aprove\n"), (b"answer (", b"approve\n")])
    assert rc == 0, text
    assert "aprove" in text and "try again" in text
    assert "publish it now" in text  # the option's description
    assert "resume: accepted" in text


# --- Ctrl-C ------------------------------------------------------------------


def test_ctrl_c_while_a_run_waits_in_a_terminal_says_so_and_exits_130() -> None:
    """Ctrl-C at `parkway run`'s prompt prints one line with the run id and its state, and exits 130."""
    rc, text = _in_a_terminal(["run", "tests.flows:one_choice"], [(b"answer (", CTRL_C)])
    assert rc == 130, text
    assert re.search(r"run run_\w+ is waiting", text), text
    assert "Traceback" not in text


def test_ctrl_c_while_following_a_queued_run_on_redis_tells_how_to_pick_it_up(redis_client: redis.Redis,
                                                                              redis_url: str) -> None:
    """SIGINT while `parkway run` follows a queued run prints its id, state and the commands to pick it up; exit 130."""
    run_id = "cli_" + uuid.uuid4().hex
    command = [sys.executable, "-m", "parkway.cli", "run", "tests.flows:one_choice", "--run-id", run_id,
               "--redis-url", redis_url]
    with subprocess.Popen(command, cwd=ROOT, env=_env(), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True) as run:
        assert run.stdout is not None and run.stderr is not None
        assert json.loads(run.stdout.readline())["type"] == "run.started"
        time.sleep(0.5)
        run.send_signal(signal.SIGINT)
        err = run.stderr.read()
        run.wait(10)
    assert run.returncode == 130, err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert f"run {run_id} is still queued" in lines[0]
    assert f"parkway show {run_id}" in lines[0] and f"parkway interrupts --run-id {run_id} --tokens" in lines[0]


# --- one JSON shape: camelCase ---------------------------------------------


@pytest.mark.slow
def test_json_outputs_are_camel_case(pw: Parkway, redis_url: str) -> None:
    """interrupts --json, resume, show and cancel print camelCase keys; nextCursor is null on the last page."""
    url = ["--redis-url", redis_url]
    run_id, token = _waiting(pw, redis_url)
    page = json.loads(in_process("interrupts", "--tokens", "--json", *url).stdout)
    assert page["nextCursor"] is None
    item = page["items"][0]
    assert {"runId", "requestId", "resumeToken", "createdAt", "expiresAt"} <= set(item)
    assert "run_id" not in item
    resumed = json.loads(in_process("resume", token, "--select", "red", *url).stdout)
    assert resumed == {"outcome": "accepted", "runId": run_id, "requestId": item["requestId"]}
    shown = json.loads(in_process("show", run_id, *url).stdout)
    assert shown["runId"] == run_id and "createdAt" in shown and "run_id" not in shown
    cancelled = json.loads(in_process("cancel", run_id, *url).stdout)
    assert cancelled["runId"] == run_id


# --- readable times --------------------------------------------------------


def test_show_says_in_words_what_the_run_is_doing_and_when_its_interrupt_expires(pw: Parkway, redis_url: str) -> None:
    """`parkway show` prints the run as JSON on stdout and, on stderr, one line for people: its
    status and node, UTC times, and how soon its pending interrupt expires."""
    run_id, _ = _waiting(pw, redis_url)
    done = in_process("show", run_id, "--redis-url", redis_url)
    assert done.returncode == 0 and json.loads(done.stdout)["status"] == "waiting"
    line = done.stderr.strip()
    assert line.startswith(f"run {run_id} is waiting at node choose") and "\n" not in line, line
    assert re.search(r"expires in 1[45]m \(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ\)", line), line
    assert re.search(r"started \d+s ago \(\d{4}-", line), line


def test_interrupts_show_times_readably() -> None:
    """The human listing shows ISO times in UTC and 'waiting since' / 'expires in' durations."""
    request = InterruptRequest(kind="text", question="Name?")
    interrupt = Interrupt(
        request_id="r1", run_id="run_1", workflow="wf", node="n", step=0, request=request,
        created_at=1_700_000_000_000, expires_at=1_700_000_000_000 + 15 * 60_000,
    )
    out = io.StringIO()
    interrupts.describe(interrupt, out, now=1_700_000_000_000 + 3 * 60_000)
    text = out.getvalue()
    assert "2023-11-14T22:13:20Z" in text
    assert "waiting since 3m" in text and "expires in 12m" in text
    assert "1700000000000" not in text


# --- errors in CLI words ---------------------------------------------------


@pytest.mark.slow
def test_a_wrong_kind_of_answer_is_explained_in_cli_flags(pw: Parkway, redis_url: str) -> None:
    """--text on a choice says to use --select; --value 5 on a text request says to use --text; no Python API words."""
    url = ["--redis-url", redis_url]
    _, token = _waiting(pw, redis_url)
    done = in_process("resume", token, "--text", "red", *url)
    assert done.returncode == 1
    assert "takes --select ID, not --text or --value" in done.stderr and "selected=" not in done.stderr, done.stderr
    _, text_token = _waiting(pw, redis_url, flows.two_questions)
    done = in_process("resume", text_token, "--value", "5", *url)
    assert done.returncode == 1
    assert "needs text (--text TEXT)" in done.stderr and "value" not in done.stderr, done.stderr


# --- cancel ------------------------------------------------------------------


@pytest.mark.slow
def test_cancel_recognises_a_token_and_exits_like_resume(pw: Parkway, redis_url: str) -> None:
    """`parkway cancel TOKEN` cancels that interrupt; again it exits 3 (already resolved), as resume would."""
    url = ["--redis-url", redis_url]
    run_id, token = _waiting(pw, redis_url)
    first = in_process("cancel", token, "--reason", "no budget", *url)
    assert first.returncode == 0, first.stderr
    assert json.loads(first.stdout)["outcome"] == "accepted"
    again = in_process("cancel", token, "--token", *url)
    assert again.returncode == 3, again.stderr
    assert json.loads(again.stdout)["outcome"] == "already_resolved"
    assert in_process("resume", token, "--select", "red", *url).returncode == 3


@pytest.mark.slow
def test_show_of_a_cancelled_run_says_why_and_who(pw: Parkway, redis_url: str) -> None:
    """Cancelling a waiting run prints it cancelled (as show then reads it, no worker needed); show
    gives the reason and the responder."""
    url = ["--redis-url", redis_url]
    run_id, _ = _waiting(pw, redis_url)
    done = in_process("cancel", run_id, "--reason", "no budget", "--responder", "ana", *url)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"outcome": "cancelled", "runId": run_id, "status": "cancelled"}
    assert done.stderr == ""
    shown = json.loads(in_process("show", run_id, *url).stdout)
    assert shown["status"] == "cancelled"
    assert shown["cancellation"]["reason"] == "no budget" and shown["cancellation"]["responder"] == "ana"
    assert in_process("cancel", run_id, *url).returncode == 3  # already finished


# --- events ------------------------------------------------------------------


@pytest.mark.slow
def test_events_prints_what_is_there_and_exits(pw: Parkway, redis_url: str) -> None:
    """`parkway events RUN --json` prints the run's events so far, one JSON line each, and exits 0;
    --after skips to a position; the human form has one line per event."""
    url = ["--redis-url", redis_url]
    run_id, _ = _waiting(pw, redis_url)
    done = in_process("events", run_id, "--json", *url, timeout=15)
    assert done.returncode == 0, done.stderr
    events = _json_lines(done.stdout)
    assert [e["type"] for e in events] == ["run.started", "node.started", "interrupt"]
    assert events[-1]["resumeToken"].startswith(run_id + ".")
    later = _json_lines(in_process("events", run_id, "--json", "--after", events[0]["eventId"], *url).stdout)
    assert [e["type"] for e in later] == ["node.started", "interrupt"]
    human = in_process("events", run_id, *url).stdout.splitlines()
    assert len(human) == 3 and "interrupt" in human[-1] and re.match(r"\d{4}-\d\d-\d\dT", human[0])


@pytest.mark.slow
def test_events_go_past_a_delivered_done(pw: Parkway, redis_url: str) -> None:
    """A `done` that only says a response was delivered ends neither `events` nor `events --follow`:
    the first prints through the interrupt after it, the second through the run's final `done`."""
    url = ["--redis-url", redis_url]
    run_id, token = _waiting(pw, redis_url, flows.delivering)
    so_far = _json_lines(in_process("events", run_id, "--json", *url, timeout=15).stdout)
    assert [e["type"] for e in so_far][-2:] == ["done", "interrupt"]
    pw.resume(token, selected="red")
    assert in_process("worker", "--burst", *url).returncode == 0
    done = in_process("events", run_id, "--follow", "--json", *url, timeout=15)
    assert done.returncode == 0, done.stderr
    events = _json_lines(done.stdout)
    assert [e.get("status") for e in events if e["type"] == "done"] == ["delivered", "completed"]
    assert events[-1]["type"] == "done"


def test_events_of_an_unknown_run_is_one_error_line(redis_url: str) -> None:
    """`parkway events` of a run that does not exist says so in one line, exit 1."""
    done = in_process("events", "run_nope", "--redis-url", redis_url)
    assert done.returncode == 1 and "no run 'run_nope'" in done.stderr


# --- run --detach ------------------------------------------------------------


def test_run_detach_prints_the_run_id_and_exits(pw: Parkway, redis_url: str) -> None:
    """`parkway run --detach` prints only the run id and exits 0; the run is there, queued."""
    done = in_process("run", "tests.flows:one_choice", "--detach", "--redis-url", redis_url)
    assert done.returncode == 0, done.stderr
    run_id = done.stdout.strip()
    assert pw.get_run(run_id).status is RunStatus.QUEUED


@pytest.mark.slow
def test_node_started_is_printed_once_a_worker_begins_the_node(pw: Parkway, redis_url: str) -> None:
    """With no worker, a started run's events hold run.started only; node.started comes when a worker
    begins the node, before its interrupt; the replay after an answer starts the node again (replay)."""
    url = ["--redis-url", redis_url]
    run_id = in_process("run", "tests.flows:one_choice", "--detach", *url).stdout.strip()
    assert [e["type"] for e in _json_lines(in_process("events", run_id, "--json", *url).stdout)] == ["run.started"]
    assert in_process("worker", "--burst", *url).returncode == 0
    events = _json_lines(in_process("events", run_id, "--json", *url).stdout)
    assert [e["type"] for e in events] == ["run.started", "node.started", "interrupt"]
    assert (events[1]["node"], events[1]["replay"]) == ("choose", False)
    assert in_process("resume", events[-1]["resumeToken"], "--select", "red", *url).returncode == 0
    assert in_process("worker", "--burst", *url).returncode == 0
    later = _json_lines(in_process("events", run_id, "--json", "--after", events[-1]["eventId"], *url).stdout)
    assert [e["type"] for e in later][:3] == ["interrupt.resumed", "node.started", "node.completed"]
    assert (later[1]["node"], later[1]["replay"]) == ("choose", True)


def test_run_detach_embedded_is_refused() -> None:
    """--detach without a Redis is refused: an embedded run would end with the process."""
    done = in_process("run", "tests.flows:one_choice", "--detach")
    assert done.returncode == 1 and "--detach" in done.stderr


# --- worker ------------------------------------------------------------------


def test_worker_says_what_it_serves_when_it_starts(redis_client: redis.Redis, redis_url: str) -> None:
    """The worker's first stderr line names the queue, the Redis, the workflow modules, its pid and worker count."""
    done = in_process("worker", "--burst", "--redis-url", redis_url, "--workflows", "tests.flows")
    assert done.returncode == 0, done.stderr
    line = _stderr_lines(done)[0]
    assert "queue 'parkway'" in line and redis_url in line and "tests.flows" in line
    assert re.search(r"pid \d+", line) and "1 worker" in line


def test_worker_start_line_hides_the_redis_password(redis_url: str) -> None:
    """A password in --redis-url never reaches the worker's start line. (This Redis has no such
    user, so the worker goes on trying for its bound: the test reads the start line, then stops it.)"""
    url = redis_url.replace("redis://", "redis://user:hunter2@")
    command = [sys.executable, "-m", "parkway.cli", "worker", "--burst", "--redis-url", url]
    with subprocess.Popen(command, cwd=ROOT, env=_env(), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, text=True) as proc:
        assert proc.stderr is not None
        line = proc.stderr.readline()
        proc.kill()
    assert line.startswith("parkway worker:") and "hunter2" not in line, line
    assert redis_url.replace("redis://", "redis://user@") in line


@pytest.fixture
def live(redis_client: redis.Redis, redis_url: str) -> Iterator[Harness]:
    settings = Settings(redis_url=redis_url, secret=SECRET)
    with Parkway(settings) as client:
        yield Harness("redis", client, settings, redis_client)


def test_resume_select_on_a_text_question_is_refused_and_the_token_still_works(live: Harness, redis_url: str) -> None:
    """`parkway resume <text token> --select foo` exits 1 naming --text and records nothing (before
    the fix it recorded "foo" as the text); --text then answers it."""
    url = ["--redis-url", redis_url]
    pw = live.pw
    run_id = live.start_and_run(flows.two_questions)
    token = live.token(run_id)
    refused = in_process("resume", token, "--select", "foo", *url)
    _assert_one_error_line(refused, r"a text question takes --text TEXT, not --select")
    assert pw.get_run(run_id).status is RunStatus.WAITING
    assert in_process("resume", token, "--text", "Ada", *url).returncode == 0
