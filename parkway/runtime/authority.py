"""Who may do what to a run: the role table, read from the run's own records.

A run's tenant, owner and origin are written on the run and on its summary when it is created
(``create_run`` in ``_common.lua``; a child run and a fork copy their run's, a session's branch
run its session's) and never change. Every door to a run (read, events, cancel, fork, restart,
an answer, a listing, a cursor) checks them there: nothing is derived from an id a caller chose,
from a session that may have expired, or from a check made once when a stream opened. A run
whose records and summary are both gone reaches no one but an unbound system caller.

=============================  ===========================  ==================================
door                           user (owner O in tenant T)   machine, system (bound to T: only
                                                            T's runs; unbound: every run)
=============================  ===========================  ==================================
start                          a run of T owned by O        a run of T (or any, unbound), no owner
read, events, cancel, fork,    runs owned by O in T         the runs it reaches
run listings
answer, interrupt listings     runs owned by O in T, and    the runs it reaches (tokens in
                               T's runs no user owns (the   listings and events: not to users)
                               tenant's inbox); no tokens
restart (resume-or-start)      as answer                    as answer
=============================  ===========================  ==================================

A fork re-opens a step with the data it started with: past an activation that recorded an answer
it would run what that answer let through without asking. A fork by any caller but system re-opens
the last gate before the step asked instead (its question is asked again): an activation whose
interrupt ended, or one in which a run below it paused (a child, a fan-out's or a ``use_first``
race's child, a grandchild...: ``Parkway.gated_step``). Laying something over what a run's starter
gave, a fork's input or a restart's (``resume-or-start``'s input or workflow), needs a caller of
at least the run's origin (``check_overlay``, the one rule both doors call).

A refusal reads as "no such run" (RunNotFound): a different answer for another tenant's or owner's
run would tell that it exists. A tenant's run and session ids are in its scope (``<tenant>~<name>``,
``protocol.scoped_id``), so no other tenant can take, block or probe them by choosing an id.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from .errors import RunNotFound, SessionDenied, ValidationError
from .protocol import check_name

Role = Literal["system", "machine", "user"]
Origin = Literal["system", "machine", "frontend"]
RANK: dict[str, int] = {"frontend": 1, "machine": 2, "system": 3}
"""the origins' privilege: a caller may do what needs at most its own origin's rank"""
ROLES = ("system", "machine", "user")


@dataclass(frozen=True)
class Caller:
    """Who calls: a role, and for a user the owner and tenant it acts as. Authenticated by the
    surface (an HTTP key, the CLI's Redis, Python code in the deployment), never read from a payload."""

    role: Role
    owner: str | None = None
    tenant: str | None = None

    def __post_init__(self) -> None:
        if self.role not in ROLES:
            raise ValidationError(f"a caller's role is one of {ROLES}, not {self.role!r}")
        if self.owner is not None:
            check_name(self.owner, "caller owner")
        if self.tenant is not None:
            check_name(self.tenant, "caller tenant")
        if self.role == "user" and (self.owner is None or self.tenant is None):
            raise ValidationError("a user caller needs an owner and a tenant")

    @property
    def name(self) -> str:
        return f"{self.role}:{self.owner}" if self.owner else self.role

    @property
    def origin(self) -> Origin:
        """The origin what this caller starts or raises records: ``frontend`` for a user."""
        return "frontend" if self.role == "user" else self.role

    def public(self) -> dict[str, Any]:
        return {"role": self.role, "owner": self.owner, "tenant": self.tenant}


SYSTEM = Caller("system")
"""the caller Python code in the deployment acts as by default"""

Door = Literal["read", "events", "cancel", "fork", "answer", "restart", "list"]
OWNED_DOORS: tuple[Door, ...] = ("read", "events", "cancel", "fork")
"""the doors a user passes only to runs it owns (the others also to its tenant's unowned runs)"""


def reaches(caller: Caller, tenant: str | None, owner: str | None, door: Door) -> bool:
    """Whether ``caller`` may pass ``door`` of a run of ``tenant`` owned by ``owner``."""
    if caller.tenant is not None and tenant != caller.tenant:
        return False
    if caller.role != "user":
        return True
    return owner == caller.owner or (owner is None and door not in OWNED_DOORS)


def check_reaches(caller: Caller, run_id: str, tenant: str | None, owner: str | None, door: Door) -> None:
    """Raise RunNotFound (as for no run) unless ``caller`` may pass ``door`` of the run."""
    if not reaches(caller, tenant, owner, door):
        raise RunNotFound(f"no run {run_id!r}", run_id=run_id)


def check_overlay(caller: Caller, run_id: str, origin: str | None) -> None:
    """Raise SessionDenied unless ``caller`` ranks at least the run's origin (a run written before
    origins were kept counts as a system caller's): what it lays over the run, a fork's input or a
    restart's input or workflow, replaces what its starter gave, and the new run keeps the origin."""
    if RANK[caller.origin] < RANK.get(origin or "system", RANK["system"]):
        raise SessionDenied(
            f"run {run_id} was started by a {origin or 'system'} caller: input or a workflow laid over it "
            "(a fork's, a restart's) needs that rank or higher",
            reason="privilege",
        )
