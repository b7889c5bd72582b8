"""``parkway demo``: the approval demo, embedded, its arguments beside its function."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from .ask import ask, contract_of
from .common import interactive, open_client, show_run
from .interrupts import describe
from .parsing import Subcommands, subcommand

if TYPE_CHECKING:
    from ..client import Parkway


DEMO_INPUT = {"title": "Quarterly report"}


def add_demo(sub: Subcommands) -> None:
    subcommand(
        sub,
        "demo",
        "run the approval demo embedded, on an in-process Redis (no server needed)",
        cmd_demo,
        "Starts an approval run, lists its interrupt, asks you (without a terminal: answers with the first\n"
        "option), resumes it, shows the same token is then already_resolved, and prints the run.\n"
        "Always embedded: it ignores PARKWAY_REDIS_URL, and nothing is kept after it.\n"
        "exit status: 0 the run completed, 1 otherwise",
        redis=None,
    )


def cmd_demo(args: argparse.Namespace) -> int:
    from ..logs import configure as configure_logs

    configure_logs("INFO" if args.verbose else "ERROR")  # the demo says itself that it runs embedded
    with open_client(args, embedded=True) as pw:
        return _demo(pw)


def _demo(pw: Parkway) -> int:
    from ..demo import approval

    out = sys.stdout
    run_id = pw.start(approval, DEMO_INPUT)
    out.write(f"started run {run_id} of workflow 'approval' (embedded: nothing is kept after this process)\n")
    run = pw.wait(run_id, timeout=30)
    out.write("\npending interrupts (list_interrupts):\n")
    page = pw.list_interrupts(include_tokens=True)
    for interrupt in page.items:
        describe(interrupt, out)
    target = page.items[0]
    if interactive():
        answer = ask(target.asked(), out=out, contract=contract_of(pw, target.asked()))
    else:
        first = target.asked().options[0].id
        out.write(f"\nno terminal to ask: answering with the first option {first!r}\n")
        answer = {"selected": first}
    assert target.resume_token is not None
    result = pw.resume(target.resume_token, responder="demo", **answer)
    out.write(f"resume: {result.outcome.value}\n")
    again = pw.resume(target.resume_token, responder="demo", **answer)
    out.write(f"the same token and answer again (a retry): {again.outcome.value}\n")
    others = [o.id for o in target.asked().options or () if {"selected": o.id} != answer]
    if others:
        other = pw.resume(target.resume_token, responder="demo", selected=others[0])
        out.write(f"the same token, another answer: {other.outcome.value}\n")
    run = pw.wait(run_id, timeout=30)
    out.write("\nthe run:\n")
    show_run(run, out)
    return 0 if run.status.value == "completed" else 1
