"""``parkway session ...``: show a session's tree with its parked branches, its events, and act on it.

The CLI has the deployment's Redis, so it acts as the system caller (see
:mod:`parkway.runtime.sessions` for what other callers may do).
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from .runtime.errors import ParkwayError


def add(sub: Any, command: Any) -> None:
    """Register ``session`` and its actions; ``command`` is the CLI's subcommand builder."""
    s = command(
        sub,
        "session",
        "show a session (its tree of messages and parked branches), its events, or act on it",
        cmd_session,
        "Actions:\n"
        "  show SESSION              the tree: one line per message, * the head, ⏸ where an interrupt parks\n"
        "                            (--json: the session as JSON)\n"
        "  events SESSION            the session's events, one JSON line each (messages, runs, interrupts)\n"
        "  send SESSION TEXT         add a user message at the head and dispatch the agent\n"
        "  resume SESSION ID [--payload JSON]   clear interrupt ID with a payload\n"
        "The CLI acts as the system caller. exit status: 0; 1 error (no such session, the branch is\n"
        "parked or busy, Redis unreachable); 3 resume changed nothing (unknown or already cleared)",
    )
    s.add_argument("action", choices=["show", "events", "send", "resume"], help="what to do (see below)")
    s.add_argument("session_id", metavar="SESSION", help="the session's id")
    s.add_argument("rest", nargs="*", metavar="ARG", help="send: the TEXT; resume: the interrupt ID")
    s.add_argument("--payload", default="null", metavar="JSON", help="resume: the payload, a JSON value (default null)")
    s.add_argument("--json", action="store_true", help="show: print the session as JSON")


def cmd_session(args: argparse.Namespace) -> int:
    from .cli import _client

    pw = _client(args)
    sessions = pw.sessions
    if args.action == "show":
        view = sessions.get(args.session_id)
        if args.json:
            print(json.dumps(view.public(), default=str, indent=2))
        else:
            print(view.tree())
        return 0
    if args.action == "events":
        for event in sessions.events(args.session_id):
            print(json.dumps({"type": event.type, "eventId": event.id, "ts": event.ts, **event.data}, default=str))
        return 0
    if args.action == "send":
        if len(args.rest) != 1:
            raise ParkwayError("usage: parkway session send SESSION TEXT")
        sent = sessions.send(args.session_id, args.rest[0])
        print(json.dumps({"messageId": sent.message_id, "runId": sent.run_id}))
        return 0
    if len(args.rest) != 1:
        raise ParkwayError("usage: parkway session resume SESSION INTERRUPT_ID [--payload JSON]")
    try:
        payload = json.loads(args.payload)
    except ValueError as exc:
        raise ParkwayError(f"--payload must be JSON: {exc}") from exc
    cleared = sessions.resume_interrupt(args.session_id, args.rest[0], payload)
    print(
        json.dumps(
            {
                "outcome": cleared.outcome,
                "interruptId": cleared.interrupt_id,
                "runId": cleared.run_id,
                "parkedBy": list(cleared.parked_by),
            }
        )
    )
    return 3 if cleared.outcome in ("unknown", "already_cleared", "expired") else 0
