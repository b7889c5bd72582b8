"""Check a deploy against parked runs: replay a run's journal against the code now, commit nothing.

(The *replay* is the re-run a resume makes; this module only checks in advance that it would
match. The check was called ``replay`` before: ``Parkway.replay`` and ``parkway replay`` remain
as deprecated aliases.)

A parked (or queued) run's current activation has a journal: what its hooks
recorded so far. :func:`check_deploy` runs that node of the given workflow against
the journal in a context where every hook must find its record: the first
hook with nothing recorded is the *frontier* (where the real replay would go
on doing new work) and the check stops there, before that hook acts — no
step function is called, no state or event written. A hook that asks for
something other than its record is the nondeterminism a resume would meet.

Plain code in the node before the frontier runs (as on any replay): keep
outside effects behind ``use_step`` or ``use_node_state``.
"""

from __future__ import annotations

import asyncio
import copy
import inspect
from dataclasses import dataclass
from typing import Any, Literal

from .agents import delivered
from .errors import NondeterminismError, RunNotFound, WorkflowError
from .hooks import NodeContext, Pause, SpawnChild, activate, deactivate
from .store import JournalEntry, Store
from .workflow import Workflow, as_result


class _Frontier(BaseException):
    """The first hook the journal has no record for: the check ends here."""

    def __init__(self, position: str, kind: str = "") -> None:
        super().__init__(position)
        self.position = position
        self.kind = kind
        """the kind of record the hook asked for ('' for a write)"""


class _DryContext(NodeContext):
    """A node context in which hooks only read the journal."""

    def replayed(self, field_name: str, kind: str, name: str, detail: str = "") -> JournalEntry | None:
        entry = super().replayed(field_name, kind, name, detail)
        if entry is None:
            raise _Frontier(field_name, kind)
        return entry

    def write(self, field_name: str, entry: JournalEntry, event: tuple[str, dict[str, Any]] | None = None) -> None:
        raise _Frontier(field_name)


class _ReadOnly:
    """Refuses every write a hook could make outside the context (``use_workflow_state``'s setter)."""

    def write_entry(self, *args: Any, **kwargs: Any) -> None:
        raise _Frontier("workflow state")


def _reached(
    ctx: NodeContext, store: Store, waiting_on: str | None, paused_at: str | None
) -> tuple[Literal["nondeterministic"], str] | None:
    """After a replay that ran to the node's end (``paused_at`` None) or to a pause (an interrupt
    it would ask): the answer this code left unconsumed, or the pending interrupt it no longer
    reaches, as the report says it (None: neither). A replay that stopped at other new work is not
    judged: the hooks after it were not asked."""
    error = ctx.unconsumed_error()
    if error is not None:
        return "nondeterministic", error.message
    pending = store.get_interrupt(ctx.run_id, waiting_on) if waiting_on and waiting_on.startswith("i") else None
    if pending is None or pending.journal_field == paused_at:
        return None
    name = f"interrupt {pending.hook_name!r}" if pending.hook_name else "its interrupt"
    where = f"asks at {paused_at} instead" if paused_at else "runs to its end without asking for it"
    return "nondeterministic", (
        f"run {ctx.run_id} waits on {name} ({pending.journal_field}, request {pending.request_id}), which this "
        f"code no longer reaches: it {where}; an answer would be taken and never reach the code"
    )


@dataclass(frozen=True)
class DeployCheck:
    """What checking a run's current activation against some code found."""

    run_id: str
    node: str
    step: int
    outcome: Literal["consistent", "nondeterministic", "error"]
    detail: str
    recorded: int
    """how many journal entries the activation holds"""


def check_deploy(store: Store, run_id: str, workflow: Workflow, now: int) -> DeployCheck:
    """Replay run ``run_id``'s current activation against ``workflow``; commit nothing."""
    record = store.get_run(run_id, now)
    if record is None:
        raise RunNotFound(f"no run {run_id!r}", run_id=run_id)
    if record.status.finished or record.node is None:
        raise WorkflowError(f"run {run_id} is {record.status.value}: nothing is left to replay")
    if record.node not in workflow.nodes:
        return DeployCheck(run_id, record.node, record.step, "nondeterministic",
                            f"workflow {workflow.name!r} has no node {record.node!r} any more", 0)
    journal, state = store.read_activation(run_id, record.step)
    ctx = _DryContext(_ReadOnly(), run_id, workflow.name, record.node, record.step,  # type: ignore[arg-type]
                      record.fence, journal, state, lambda: now)
    ctx.triggers = delivered(ctx, record.data)  # a branch run's triggers, as its replays read them
    token = activate(ctx)
    try:
        value: Any = workflow.nodes[record.node].fn(copy.deepcopy(record.data))
        if inspect.isawaitable(value):
            awaitable = value

            async def wait() -> Any:
                return await awaitable

            value = asyncio.run(wait())
        as_result(value, record.node)
        outcome, detail = "consistent", "the node ran to its end on recorded values only"
        outcome, detail = _reached(ctx, store, record.waiting_on, None) or (outcome, detail)
    except _Frontier as frontier:
        outcome, detail = "consistent", f"every recorded hook matched; new work starts at {frontier.position}"
        if frontier.kind == "interrupt":  # the node would pause there: it asks nothing after
            outcome, detail = _reached(ctx, store, record.waiting_on, frontier.position) or (outcome, detail)
    except (Pause, SpawnChild) as pause:
        field = pause.journal_field if isinstance(pause, Pause) else pause.child.journal_field
        outcome, detail = "consistent", f"every recorded hook matched; the node pauses again at {field}"
        outcome, detail = _reached(ctx, store, record.waiting_on, field) or (outcome, detail)
    except NondeterminismError as exc:
        outcome, detail = "nondeterministic", exc.message
    except Exception as exc:  # noqa: BLE001 - the node's own error is part of the report
        outcome, detail = "error", f"{type(exc).__name__}: {exc}"
    finally:
        deactivate(token)
    return DeployCheck(run_id, record.node, record.step, outcome, detail, len(journal))  # type: ignore[arg-type]


ReplayReport = DeployCheck
"""deprecated: the name ``DeployCheck`` had before"""
