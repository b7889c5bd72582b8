"""``parkway session ...``: show a session's tree with its parked branches, its events, and act on it.

The CLI has the deployment's Redis, so it acts as the system caller (see
:mod:`parkway.sessions.rules` for what other callers may do). The command comes in through the CLI's
extension point for features (``parkway.cli.program.FEATURES``): :func:`add` is given the CLI's own
subcommand builder and client, so this module imports nothing of the CLI.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, Protocol

from ..runtime.errors import ParkwayError

if TYPE_CHECKING:
    from .client import Sessions


class Client(Protocol):
    """What the commands need of the CLI's client: its sessions."""

    @property
    def sessions(self) -> Sessions: ...


Connect = Callable[[argparse.Namespace], AbstractContextManager[Client]]
"""how the CLI opens its client for a command's arguments (``parkway.cli.common.open_client``)"""

USAGE = {
    "open": ("SESSION --agent MODULE:ATTR --owner ID --tenant ID", 0),
    "show": ("SESSION [--json]", 0),
    "events": ("SESSION", 0),
    "send": ("SESSION TEXT", 1),
    "edit": ("SESSION MESSAGE TEXT", 2),
    "switch": ("SESSION MESSAGE", 1),
    "resume": ("SESSION INTERRUPT_ID [--payload JSON]", 1),
}
"""each action's usage and how many words it takes after SESSION"""


def add(sub: Any, subcommand: Any, connect: Connect) -> None:
    """Register ``session`` and its actions, its arguments beside its function; ``subcommand`` is the
    CLI's subcommand builder (``parkway.cli.parsing.subcommand``), ``connect`` opens its client."""

    def cmd_session(args: argparse.Namespace) -> int:
        usage, words = USAGE[args.action]
        if len(args.rest) != words:
            raise ParkwayError(f"usage: parkway session {args.action} {usage}")
        with connect(args) as pw:
            return _act(pw.sessions, args)

    s = subcommand(
        sub,
        "session",
        "show a session (its tree of messages and parked branches), its events, or act on it",
        cmd_session,
        "Actions:\n"
        "  open SESSION --agent MODULE:ATTR --owner ID --tenant ID [--ttl-ms MS]\n"
        "                            open a session whose messages the agent workflow answers\n"
        "  show SESSION              the tree: one line per message, * the head, ⏸ where an interrupt parks\n"
        "                            (--json: the session as JSON)\n"
        "  events SESSION            the session's events, one JSON line each (messages, runs, interrupts)\n"
        "  send SESSION TEXT         add a user message at the head and dispatch the agent\n"
        "  edit SESSION MESSAGE TEXT a new version of user message MESSAGE, on a branch of its own\n"
        "  switch SESSION MESSAGE    make MESSAGE the head (the branch a next send continues)\n"
        "  resume SESSION ID [--payload JSON]   clear interrupt ID with a payload\n"
        "The CLI acts as the system caller. exit status: 0; 1 error (no such session, the branch is\n"
        "parked or busy, Redis unreachable); 3 resume changed nothing (unknown or already cleared)",
    )
    s.add_argument("action", choices=list(USAGE), help="what to do (see below)")
    s.add_argument("session_id", metavar="SESSION", help="the session's id")
    s.add_argument("rest", nargs="*", metavar="ARG",
                   help="send: the TEXT; edit: the MESSAGE id and the TEXT; switch: the MESSAGE id; resume: the ID")
    s.add_argument("--agent", metavar="MODULE:ATTR", help="open: the agent workflow that answers the messages")
    s.add_argument("--owner", metavar="ID", help="open: the user the session belongs to")
    s.add_argument("--tenant", metavar="ID", help="open: the tenant the session belongs to")
    s.add_argument("--ttl-ms", type=int, default=None, metavar="MS",
                   help="open: how long the session lives after its last change (default $PARKWAY_TTL_MS)")
    s.add_argument("--payload", default="null", metavar="JSON", help="resume: the payload, a JSON value (default null)")
    s.add_argument("--json", action="store_true", help="show: print the session as JSON")


def _act(sessions: Sessions, args: argparse.Namespace) -> int:
    sid, rest = args.session_id, args.rest
    if args.action == "open":
        missing = [flag for flag, value in (("--agent", args.agent), ("--owner", args.owner),
                                            ("--tenant", args.tenant)) if not value]
        if missing:
            raise ParkwayError(f"parkway session open needs {', '.join(missing)}")
        opened = sessions.open(args.agent, owner=args.owner, tenant=args.tenant, session_id=sid, ttl_ms=args.ttl_ms)
        print(json.dumps({"sessionId": opened}))
        return 0
    if args.action == "show":
        view = sessions.get(sid)
        print(json.dumps(view.public(), default=str, indent=2) if args.json else view.tree())
        return 0
    if args.action == "events":
        for event in sessions.events(sid):
            print(json.dumps({"type": event.type, "eventId": event.id, "ts": event.ts, **event.data}, default=str))
        return 0
    if args.action in ("send", "edit"):
        sent = sessions.send(sid, rest[0]) if args.action == "send" else sessions.edit(sid, rest[0], rest[1])
        print(json.dumps({"messageId": sent.message_id, "runId": sent.run_id}))
        return 0
    if args.action == "switch":
        print(sessions.switch(sid, rest[0]).tree())
        return 0
    try:
        payload = json.loads(args.payload)
    except ValueError as exc:
        raise ParkwayError(f"--payload must be JSON: {exc}") from exc
    cleared = sessions.resume_interrupt(sid, rest[0], payload)
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
