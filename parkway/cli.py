"""The ``parkway`` command."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Sequence
from typing import Any, TextIO

from . import logs
from .client import Parkway
from .config import Settings
from .runtime.errors import ConfigError, InvalidAnswer, ParkwayError, WaitTimeout
from .runtime.protocol import Interrupt, InterruptRequest, ResumeOutcome, Run, RunStatus

DEMO_INPUT = {"title": "Quarterly report"}


def _json(value: Any) -> str:
    return json.dumps(value, default=str, sort_keys=False)


NEEDS_REDIS = (
    "needs a Redis: set PARKWAY_REDIS_URL or pass --redis-url "
    "(embedded runs live only inside the process that started them)"
)


def _settings(args: argparse.Namespace, **overrides: Any) -> Settings:
    return Settings.from_env(
        redis_url=getattr(args, "redis_url", None), workflows=getattr(args, "workflows", None), **overrides
    )


def _client(args: argparse.Namespace, *, embedded: bool = False, redis_only: bool = True) -> Parkway:
    settings = _settings(args)
    if embedded:
        settings = settings.with_(redis_url=None)
    elif redis_only and settings.embedded:
        raise ConfigError(f"parkway {args.command} {NEEDS_REDIS}")
    return Parkway(settings)


def _show_run(run: Run, out: TextIO) -> None:
    out.write(_json(run.model_dump(mode="json", exclude_none=True)) + "\n")


def _describe(interrupt: Interrupt, out: TextIO) -> None:
    req = interrupt.request
    out.write(f"- {interrupt.request_id}  run {interrupt.run_id}  {interrupt.workflow}/{interrupt.node}\n")
    out.write(f"  {req.kind}: {req.question}\n")
    for option in req.options:
        out.write(
            f"    [{option.id}] {option.label}" + (f" - {option.description}" if option.description else "") + "\n"
        )
    if interrupt.resume_token:
        out.write(f"  token: {interrupt.resume_token}\n")


def ask(request: InterruptRequest, stdin: TextIO = sys.stdin, out: TextIO = sys.stderr) -> dict[str, Any]:
    """Ask a person at the terminal; return resume() keyword arguments."""
    out.write(f"\n{request.question}\n")
    if request.kind == "text":
        out.write("> ")
        out.flush()
        return {"value": _line(stdin)}
    for i, option in enumerate(request.options, 1):
        out.write(f"  {i}. {option.label} [{option.id}]\n")
    hint = "numbers or ids, comma-separated" if request.multiple else "a number or an id"
    out.write(f"answer ({hint}): ")
    out.flush()
    picks = [p.strip() for p in _line(stdin).split(",") if p.strip()]
    ids = []
    for p in picks:
        ids.append(request.options[int(p) - 1].id if p.isdigit() and 0 < int(p) <= len(request.options) else p)
    return {"selected": ids if request.multiple else (ids[0] if ids else "")}


def _interactive() -> bool:
    """Whether a person can answer at this terminal (stdin may be a file, /dev/null, or closed)."""
    return sys.stdin is not None and not sys.stdin.closed and sys.stdin.isatty()


def _parse_json(text: str, option: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ParkwayError(f"{option} is not valid JSON: {exc}") from exc
    except RecursionError:
        raise ParkwayError(f"{option} nests too deeply") from None


def _line(stdin: TextIO) -> str:
    line = stdin.readline()
    if not line:
        raise ParkwayError("no answer: the input ended")
    return line.rstrip("\n")


def cmd_worker(args: argparse.Namespace) -> int:
    from .adapters.redis.errors import translated
    from .workers.worker import run_worker

    settings = _settings(args, queue=args.queue)
    if settings.redis_url is None:
        raise ParkwayError("parkway worker needs a Redis: set PARKWAY_REDIS_URL or pass --redis-url")
    if args.workers < 1:
        raise ConfigError(f"--workers must be at least 1, got {args.workers}")
    with translated():
        return run_worker(settings, burst=args.burst, workers=args.workers)


def cmd_run(args: argparse.Namespace) -> int:
    with _client(args, redis_only=False) as pw:
        data = _parse_json(args.input, "--input")
        return _follow(pw, args, pw.start(args.workflow, data, run_id=args.run_id, ttl_ms=args.ttl_ms))


def _follow(pw: Parkway, args: argparse.Namespace, run_id: str) -> int:
    """Print the run's events; answer its interrupts at a terminal; return the exit status."""
    deadline = None if args.timeout is None else time.monotonic() + args.timeout
    after, hinted = "0", False
    while True:
        remaining = None if deadline is None else deadline - time.monotonic()
        try:
            for event in pw.stream(run_id, after=after, until="settled", timeout=min(remaining or 5.0, 5.0)):
                after = event.id
                print(_json({"type": event.type, **event.data}), flush=True)
        except WaitTimeout:
            if remaining is not None and remaining <= 5.0:
                raise ParkwayError(f"run {run_id} did not pause or finish within {args.timeout}s") from None
            if not hinted and pw.get_run(run_id).status is RunStatus.QUEUED:
                print(f"run {run_id} is queued and no worker has begun it: is `parkway worker` running?",
                      file=sys.stderr)
                hinted = True
            continue
        run = pw.get_run(run_id)
        if run.status.finished:
            return 0 if run.status is RunStatus.COMPLETED else 1
        if run.interrupt is None:
            continue  # answered meanwhile by someone else: keep following
        if not _interactive():
            print(_waiting_hint(run_id, pw.settings.embedded), file=sys.stderr)
            return 0
        _answer_at_terminal(pw, run_id, run.interrupt.request)


def _waiting_hint(run_id: str, embedded: bool) -> str:
    if embedded:
        return (f"run {run_id} is waiting, but it runs embedded and ends with this process; set PARKWAY_REDIS_URL "
                "and start `parkway worker` to keep runs across processes")
    return f"run {run_id} is waiting; answer it with `parkway resume TOKEN ...` (see `parkway interrupts --tokens`)"


def _answer_at_terminal(pw: Parkway, run_id: str, request: InterruptRequest) -> None:
    """Ask until the answer fits the request, then resume with the open interrupt's token."""
    page = pw.list_interrupts(run_id=run_id, include_tokens=True)
    if not page.items or page.items[0].resume_token is None:
        return
    token = page.items[0].resume_token
    while True:
        try:
            result = pw.resume(token, responder="cli", **ask(request))
        except InvalidAnswer as exc:
            print(f"{exc.message}; try again", file=sys.stderr)
            continue
        print(f"resume: {result.outcome.value}", file=sys.stderr)
        return


def cmd_interrupts(args: argparse.Namespace) -> int:
    pw = _client(args)
    page = pw.list_interrupts(
        workflow=args.workflow,
        run_id=args.run_id,
        order=args.order,
        limit=args.limit,
        cursor=args.cursor,
        include_tokens=args.tokens,
    )
    if args.json:
        print(_json(page.model_dump(mode="json", exclude_none=True)))
        return 0
    if not page.items:
        print("no pending interrupts")
    for interrupt in page.items:
        _describe(interrupt, sys.stdout)
    if page.next_cursor:
        print(f"more: --cursor {page.next_cursor}")
    return 0


def cmd_resume(args: argparse.Namespace) -> int:
    pw = _client(args)
    kwargs: dict[str, Any] = {}
    if args.select:
        kwargs["selected"] = args.select if len(args.select) > 1 or args.multi else args.select[0]
    elif args.value is not None:
        kwargs["value"] = _parse_json(args.value, "--value")
    elif args.text is not None:
        kwargs["value"] = args.text
    result = pw.resume(args.token, request_id=args.request_id, responder=args.responder, **kwargs)
    print(_json(result.model_dump(mode="json")))
    return RESUME_EXIT[result.outcome]


RESUME_EXIT = {
    ResumeOutcome.ACCEPTED: 0,
    ResumeOutcome.ALREADY_RESOLVED: 3,
    ResumeOutcome.EXPIRED: 4,
    ResumeOutcome.UNKNOWN: 5,
}


def cmd_show(args: argparse.Namespace) -> int:
    _show_run(_client(args).get_run(args.run_id), sys.stdout)
    return 0


def cmd_reconcile(args: argparse.Namespace) -> int:
    from dataclasses import asdict

    from .workers.reconciler import reconcile_once

    pw = _client(args)
    report = reconcile_once(pw.store, pw.backend.dispatcher, max_lost=pw.settings.max_lost_attempts)
    print(_json(asdict(report)))
    return 0


def cmd_cancel(args: argparse.Namespace) -> int:
    pw = _client(args)
    if args.token:
        print(
            _json(
                pw.cancel_interrupt(args.target, reason=args.reason, responder=args.responder).model_dump(mode="json")
            )
        )
    else:
        print(_json(pw.cancel(args.target, reason=args.reason, responder=args.responder).model_dump(mode="json")))
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    logs.configure("ERROR")  # the demo says itself that it runs embedded
    with _client(args, embedded=True) as pw:
        return _demo(pw)


def _demo(pw: Parkway) -> int:
    from .demo import approval

    out = sys.stdout
    run_id = pw.start(approval, DEMO_INPUT)
    out.write(f"started run {run_id} of workflow 'approval' (embedded: nothing is kept after this process)\n")
    run = pw.wait(run_id, timeout=30)
    out.write("\npending interrupts (list_interrupts):\n")
    page = pw.list_interrupts(include_tokens=True)
    for interrupt in page.items:
        _describe(interrupt, out)
    target = page.items[0]
    if _interactive():
        answer = ask(target.request, out=out)
    else:
        first = target.request.options[0].id
        out.write(f"\nno terminal to ask: answering with the first option {first!r}\n")
        answer = {"selected": first}
    assert target.resume_token is not None
    result = pw.resume(target.resume_token, responder="demo", **answer)
    out.write(f"resume: {result.outcome.value}\n")
    again = pw.resume(target.resume_token, responder="demo", **answer)
    out.write(f"the same token again: {again.outcome.value}\n")
    run = pw.wait(run_id, timeout=30)
    out.write("\nthe run:\n")
    _show_run(run, out)
    return 0 if run.status.value == "completed" else 1


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="parkway", description="Durable human-in-the-loop workflows on Redis.")
    p.add_argument("-v", "--verbose", action="store_true", help="log at INFO (default WARNING)")
    sub = p.add_subparsers(dest="command", required=True)

    def command(name: str, help_: str, fn: Any) -> argparse.ArgumentParser:
        c = sub.add_parser(name, help=help_, description=help_)
        c.set_defaults(fn=fn)
        c.add_argument("--redis-url", help="Redis URL (default $PARKWAY_REDIS_URL; unset means embedded)")
        c.add_argument(
            "--path",
            action="append",
            metavar="DIR",
            help="where to import workflow modules from, before the rest of the Python path "
            "(repeatable; default: the working directory)",
        )
        c.add_argument(
            "--workflows",
            metavar="MODULES",
            help="comma-separated modules workflows may be imported from (default $PARKWAY_WORKFLOWS; "
            "unset: the application's own code, never the standard library or installed packages)",
        )
        return c

    w = command("worker", "run an RQ worker on parkway's queue", cmd_worker)
    w.add_argument("--burst", action="store_true", help="exit when the queue is empty")
    w.add_argument("--workers", type=int, default=1, help="number of worker processes (default 1)")
    w.add_argument("--queue", default=None, help="queue name (default $PARKWAY_QUEUE or 'parkway')")

    r = command("run", "start a run and print its events; in a terminal, answer its interrupts", cmd_run)
    r.add_argument("workflow", help="MODULE:ATTRIBUTE of a parkway Workflow")
    r.add_argument("--input", default="{}", help="run input as a JSON object")
    r.add_argument("--run-id", default=None)
    r.add_argument("--ttl-ms", type=int, default=None)
    r.add_argument("--timeout", type=float, default=None, help="give up after this many seconds")

    i = command("interrupts", "list pending interrupts", cmd_interrupts)
    i.add_argument("--workflow")
    i.add_argument("--run-id")
    i.add_argument("--order", choices=["newest", "expiring"], default="newest")
    i.add_argument("--limit", type=int, default=50)
    i.add_argument("--cursor")
    i.add_argument("--tokens", action="store_true", help="include resume tokens")
    i.add_argument("--json", action="store_true")

    s = command("resume", "answer an interrupt by its resume token", cmd_resume)
    s.epilog = "exit status: 0 accepted, 3 already_resolved, 4 expired, 5 unknown, 1 error (invalid answer...)"
    s.add_argument("token")
    group = s.add_mutually_exclusive_group(required=True)
    group.add_argument("--select", nargs="+", metavar="ID", help="option id(s) for a choice or multi-choice")
    group.add_argument("--value", help="the answer as JSON")
    group.add_argument("--text", help="the answer to a text request")
    s.add_argument("--multi", action="store_true", help="send --select as a list even with one id")
    s.add_argument("--request-id")
    s.add_argument("--responder")

    sh = command("show", "print a run", cmd_show)
    sh.add_argument("run_id")

    c = command("cancel", "cancel a run (or, with --token, one interrupt)", cmd_cancel)
    c.add_argument("target", help="RUN_ID, or a resume token with --token")
    c.add_argument("--token", action="store_true", help="TARGET is a resume token: cancel that interrupt")
    c.add_argument("--reason")
    c.add_argument("--responder")

    command("reconcile", "run one reconciler pass (workers run it every second by themselves)", cmd_reconcile)

    command("demo", "run the approval demo embedded, on an in-process Redis (no server needed)", cmd_demo)
    return p


def _extend_path(dirs: Sequence[str] | None) -> None:
    """Put the workflow directories first on the import path, as ``rq worker --path`` does
    (the ``parkway`` script, unlike ``python -m``, does not have the working directory there)."""
    for directory in reversed([os.path.abspath(d) for d in (dirs or ["."])]):
        if directory in sys.path:
            sys.path.remove(directory)
        sys.path.insert(0, directory)


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    logs.configure("INFO" if args.verbose else "WARNING")
    _extend_path(args.path)
    try:
        return int(args.fn(args))
    except ParkwayError as exc:
        print(f"parkway: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
