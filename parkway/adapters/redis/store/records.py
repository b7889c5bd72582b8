"""A run's records read: its record, whose it is, an activation's journal and state, where a fork
starts, the runs below it that may still run, its events (``layout.read_events``). Part of ``RedisStore``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ....runtime.store import JournalEntry, RunRecord, StoredEvent
from ... import codec
from .. import keys, layout
from ..connection.connection import run_plan
from ..connection.connection import text as _text
from ..connection.errors import translated


def read_folded(pipe: Any, run_id: str) -> None:
    """Add to ``pipe`` the read of ``run_id``'s folded summary (``keys.ended_summaries``), if it
    can have one (a run of a tree: a session's branch run); ``folded_reply`` takes its reply."""
    field = keys.ended_field(run_id)
    if field is not None:
        pipe.hget(keys.ended_summaries(run_id), field)


def folded_reply(replies: Any, run_id: str) -> bytes | None:
    """The reply of ``read_folded``'s read (an iterator over a pipeline's replies), None when it added none."""
    return next(replies) if keys.ended_field(run_id) is not None else None


def _one(replies: list[Any]) -> bytes | None:
    return replies[0] if replies else None


class RunRecords:
    """The reads of one run's records (``RedisStore``'s; no transition)."""

    client: Any

    def get_run(self, run_id: str, now: int) -> RunRecord | None:
        with translated(run_id):
            pipe = self.client.pipeline(transaction=False)
            pipe.hgetall(keys.run(run_id))
            pipe.hgetall(keys.summary(run_id))
            read_folded(pipe, run_id)
            run, summary, *folded = pipe.execute()
        return layout.run_or_summary(run_id, run, layout.summary_or_folded(run_id, summary, _one(folded)))

    def authorities(self, run_ids: Sequence[str]) -> dict[str, tuple[str | None, str | None]]:
        """Whose each run is: ``run id -> (tenant, owner)`` as its summary was created with (it
        outlives the run's records); a run without a summary is left out. One round trip."""
        if not run_ids:
            return {}
        with translated():
            pipe = self.client.pipeline(transaction=False)
            for r in run_ids:
                pipe.hmget(keys.summary(r), *layout.AUTHORITY_FIELDS)
                read_folded(pipe, r)
            replies = iter(pipe.execute())
            found = {}
            for r in run_ids:
                values, folded = next(replies), folded_reply(replies, r)
                found[r] = layout.authority(layout.summary_values(r, values, folded, layout.AUTHORITY_FIELDS))
        return {r: whose for r, whose in found.items() if whose is not None}

    def births(self, run_ids: Sequence[str]) -> dict[str, str]:
        """When each run was created, as its summary keeps it (``run id -> created``, the ms as
        stored): which run holds an id now (an id whose run is gone can be taken again); a run
        without a summary is left out. One round trip."""
        if not run_ids:
            return {}
        with translated():
            pipe = self.client.pipeline(transaction=False)
            for r in run_ids:
                pipe.hget(keys.summary(r), "created")
                read_folded(pipe, r)
            replies = iter(pipe.execute())
            found = [(r, layout.summary_values(r, [next(replies)], folded_reply(replies, r), ["created"])[0])
                     for r in run_ids]
        return {r: _text(created) for r, created in found if created is not None}

    def gate_steps(self, run_id: str, below: int) -> list[int]:
        """The activations before ``below`` that are gates, oldest first: whose interrupt ended
        (answered, cancelled, or expired into its policy), or in which a run below this one (a
        child, grandchild...) paused. What a fork past them would skip. Read from the run's summary
        (``layout.gate_steps``: an activation's journal is gone once it completed)."""
        if below <= 0:
            return []
        with translated(run_id):
            summary = self.client.hgetall(keys.summary(run_id))
        return sorted(step for step in layout.gate_steps(summary, run_id) if step < below)

    def read_activation(self, run_id: str, step: int) -> tuple[dict[str, JournalEntry], dict[str, Any]]:
        """The journal of activation ``step`` and the run's workflow state, read only."""
        with translated(run_id):
            pipe = self.client.pipeline(transaction=False)
            pipe.hgetall(keys.journal(run_id, step))
            pipe.hgetall(keys.workflow_state(run_id))
            journal, state = pipe.execute()
        return (
            {_text(k): layout.entry_from_blob(v) for k, v in journal.items()},
            {_text(k): codec.decode(v, what="workflow state") for k, v in state.items()},
        )

    def fork_point(self, run_id: str, step: int) -> Any:
        """The data activation ``step`` of ``run_id`` started with (its input for step 0, else its
        snapshot; None when there is none), read only: a snapshot never changes once written."""
        with translated(run_id):
            if step == 0:
                blob = self.client.hget(keys.run(run_id), layout.INPUT)
            else:
                blob = self.client.hget(keys.snapshots(run_id), str(step))
        return None if blob is None else codec.decode(blob, what="run data")

    def runs_below(self, run_id: str) -> list[tuple[str, str]]:
        """The runs below a run that may still run, parents first (see ``Store.runs_below``): one
        round trip per level of its tree."""
        out: list[tuple[str, str]] = []
        level, seen = [run_id], {run_id}
        while level:
            with translated(run_id):
                pipe = self.client.pipeline(transaction=False)
                for r in level:
                    pipe.hmget(keys.run(r), *layout.BELOW_FIELDS)
                    pipe.smembers(keys.fanout(r))
                replies = iter(pipe.execute())
            found = [(c, r) for r in level
                     for c in layout.runs_below(r, next(replies), sorted(_text(m) for m in next(replies)))]
            level = [c for c, _ in found if c not in seen]
            seen.update(level)
            out += [(c, r) for c, r in found if c in level]
        return out

    def read_events(self, run_id: str, after: str, block_ms: int | None, count: int) -> list[StoredEvent]:
        """The run's events after ``after`` (``layout.read_events``: the run's hash and stream in one
        round trip; when there are none, a blocking read of the stream)."""
        with translated(run_id):
            return run_plan(self.client, layout.read_events(run_id, after, block_ms, count))
