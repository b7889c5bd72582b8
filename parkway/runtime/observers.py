"""The executor's extension point: observers of a run's activation, given by features (sessions).

A feature registers an :class:`Extension` in the executor's ``Options.extensions``; for each job the
executor asks every extension for a :class:`RunObserver` of the run it carries (None: the feature
has nothing to do with that run). The executor and the hooks call the observers at five points::

    before_attempt(ctx, data) -> data   each attempt of a node, before its code runs, with the
                                        attempt's context active: the data the node receives
                                        (returned), and what must happen first (may pause or hold)
    before_call(ctx)                    a hook is about to call out (a model, a tool): the last
                                        moment to hold the run before anything is called
    on_settle(ctx, field, ...)     a hook's call settled (``use_model``, ``use_tool``,
                                        ``add_message``): True when the observer committed the entry
                                        to the journal itself (else the hook writes it)
    on_park(ctx, pause)                 the node asked a question: the observer may add to the
                                        request (its ``meta``) before the park is committed
    after_attempt(ctx, outcome)         the attempt ended (after its commit, or before its retry):
                                        how (``completed``, ``parked``, ``failed``...)

The ``before_`` hooks are called in registration order, ``on_settle``, ``on_park`` and
``after_attempt`` (after the node or the call) in reverse. Each is a no-op in :class:`RunObserver`
(defined with the node's context in ``hooks``, which carries a job's observers; exported here). An
observer that holds the run raises :class:`Held`: the job ends, the run waits (the observer's store
call committed the hold).
Core code never asks which feature a run belongs to: the extension decides, from the run's record.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .hooks import Held, NodeContext, Pause, RunObserver
from .store import JournalEntry, RunRecord, Store

__all__ = [
    "Extension", "Held", "RunObserver", "after_attempt", "before_attempt", "before_call", "on_park", "on_settle",
]


class Extension:
    """A feature's entry in the executor (``Options.extensions``)."""

    def observe(self, store: Store, run: RunRecord) -> RunObserver | None:
        """The observer of this job of ``run`` (None: nothing to observe)."""
        return None


def before_attempt(ctx: NodeContext, data: dict[str, Any]) -> dict[str, Any]:
    for observer in ctx.observers:
        data = observer.before_attempt(ctx, data)
    return data


def before_call(ctx: NodeContext) -> None:
    for observer in ctx.observers:
        observer.before_call(ctx)


def on_settle(
    ctx: NodeContext, field_name: str, entry: JournalEntry, mode: str, message: Mapping[str, Any] | None
) -> None:
    """Let the observers commit a settled call (the last registered first); write it to the journal
    when none did."""
    for observer in reversed(ctx.observers):
        if observer.on_settle(ctx, field_name, entry, mode, message):
            ctx.journal[field_name] = entry
            return
    ctx.write(field_name, entry)


def on_park(ctx: NodeContext, pause: Pause) -> None:
    for observer in reversed(ctx.observers):
        observer.on_park(ctx, pause)


def after_attempt(ctx: NodeContext, outcome: str) -> None:
    for observer in reversed(ctx.observers):
        observer.after_attempt(ctx, outcome)
