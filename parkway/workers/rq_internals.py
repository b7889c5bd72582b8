"""Every internal of RQ that parkway leans on, in one room (STYLE 16), for rq 3.0.x (pinned).

``tests/test_rq_internals.py`` names each one below and fails when an RQ upgrade changes it.

The job format (the store's scripts write parkway's jobs themselves, in the call that commits
the transition that calls for one; see ``hand_off`` in ``adapters/redis/_common.lua``):

- **the job hash**: ``Job.to_dict`` of a job ``Queue._prepare_for_queue`` prepared (origin,
  enqueue time, status, the server version), flattened by ``rq.scripts._build_hset_args``:
  ``job_hash`` takes its fixed fields from RQ itself, once per dispatcher;
- **the job data**: ``Job.data`` is the serializer's dump of ``(func_name, instance, args,
  kwargs)``, stored zlib-compressed, and ``Job.restore`` reads it as it is when it does not
  decompress (a msgpack array never starts like a zlib stream): the script appends the step and
  fence to the msgpack head ``job_hash`` gives it;
- **the job key**: ``Job.redis_job_namespace_prefix`` + id; built inside the script from the
  prefix, since the id holds the fence only the script knows;
- **unique enqueue**: ``Queue.enqueue_job(unique=True)`` runs ``rq.scripts.UNIQUE_ENQUEUE_SCRIPT``
  (the hash unless one exists, then RPUSH of the id) and registers the queue in
  ``Queue.redis_queues_keys``: ``hand_off`` does the same;
- **the intermediate list**: ``Queue.intermediate_queue_key``, where a dequeue moves an id until
  its worker starts the job: a job listed there is taken (``is_taken``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import redis
from rq import Queue
from rq.job import Job
from rq.scripts import _build_hset_args
from rq.utils import now, utcformat

from ..adapters.redis.errors import translated
from .serializer import MsgpackSerializer

JOB_KEY_PREFIX: str = Job.redis_job_namespace_prefix
"""what RQ puts before a job id to name its hash"""

FILLED_IN = ("data", "description", "created_at", "enqueued_at")
"""the job hash's fields the script writes per job; the others are the same for every parkway job"""


class JobHash:
    """The job hash RQ's unique enqueue writes for a parkway job, as the arguments of the store's
    ``hand_off`` (``adapters.redis.store.NextJob``).

    ``job`` is a parkway job as the queue creates it (any run, step 0, fence 0); its hash gives
    every field but ``FILLED_IN``. Per run, ``args`` adds the heads of the job id and of the
    description (what precedes the fence and the step: ``heads(run_id)``) and of the data (the
    call up to its step and fence)."""

    def __init__(self, queue: Queue, job: Job, heads: Callable[[str], tuple[str, str]]) -> None:
        with translated():
            queue._prepare_for_queue(job)  # reads the server's version once per queue
        flat = _build_hset_args(job)  # type: ignore[no-untyped-call]
        self.fields: tuple[Any, ...] = tuple(
            item for i in range(0, len(flat), 2) if flat[i] not in FILLED_IN for item in flat[i : i + 2]
        )
        self.func_name = str(job.func_name)
        self.heads = heads
        self._keys = [queue.key, queue.redis_queues_keys]

    def keys(self) -> list[str]:
        return list(self._keys)

    def args(self, run_id: str) -> list[str | bytes]:
        id_head, description_head = self.heads(run_id)
        return [JOB_KEY_PREFIX, id_head, data_head(self.func_name, run_id), description_head, stamp(), *self.fields]


def data_head(func_name: str, run_id: str) -> bytes:
    """RQ's job data for ``func_name(run_id, step, fence)`` up to the step: the script appends the
    step, the fence (msgpack integers) and the empty kwargs map."""
    whole = MsgpackSerializer.dumps((func_name, None, (run_id, 0, 0), {}))
    assert whole.endswith(b"\x00\x00\x80"), "the msgpack layout of a job's data changed"
    return whole[:-3]


def stamp() -> str:
    """Now, as RQ writes a job's ``created_at`` and ``enqueued_at``."""
    return utcformat(now())


def is_taken(pipe: redis.client.Pipeline, queue: Queue, job_id: str) -> None:
    """Queue on ``pipe`` the look at whether a worker took ``job_id`` from ``queue`` (its position in
    RQ's intermediate list, or None)."""
    pipe.lpos(queue.intermediate_queue_key, job_id)
