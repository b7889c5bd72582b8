"""RQ's job format, as parkway writes and reads its jobs: the job hash the store's scripts write
(``hand_off``, generated here), the key it lives under, the lists a job moves through, and the job
and queue classes the worker reads them with. See the package docstring for each RQ internal."""

from __future__ import annotations

import functools
from collections.abc import Callable
from importlib import resources
from string import Template
from typing import Any

import redis
from rq import Queue
from rq.job import Job
from rq.scripts import _build_hset_args
from rq.utils import now

from ...adapters.redis.connection.errors import translated
from ..serializer import MsgpackSerializer

JOB_KEY_PREFIX: str = Job.redis_job_namespace_prefix
"""what RQ puts before a job id to name its hash"""

HAND_OFF_ARGS = ("key_prefix", "id_head", "data_head", "description_head", "stamp")
"""``hand_off``'s named arguments, in ARGV order (``JobHash.args``); the job hash's fixed
field/value pairs follow them"""

DATA_TAIL: bytes = MsgpackSerializer.dumps({})
"""what follows the step and the fence in a job's data: its (empty) kwargs"""



def _lua_string(raw: bytes) -> str:
    """A Lua string literal of ``raw`` (decimal escapes)."""
    return "'" + "".join(f"\\{b}" for b in raw) + "'"


PER_JOB = {
    "data": f"data_head .. mp_uint(step) .. mp_uint(fence) .. {_lua_string(DATA_TAIL)}",
    "description": "description_head .. step",
    "created_at": "stamp",
    "enqueued_at": "stamp",
}
"""the job hash's fields written per job, each as the Lua expression ``hand_off`` writes: over its
named arguments (``HAND_OFF_ARGS``), the step and the fence (``mp_uint``: _common.lua's msgpack of
an integer); every other field is the same for every parkway job (``JobHash.fields``)"""

FILLED_IN = tuple(PER_JOB)


@functools.cache
def hand_off_lua() -> str:
    """The Lua function ``hand_off`` (``hand_off.lua`` with its names and fields filled in), which
    the store's scripts call to enqueue the job a transition calls for."""
    template = resources.files(__package__).joinpath("hand_off.lua").read_text()
    return Template(template).substitute(
        names=", ".join(HAND_OFF_ARGS),
        reads=", ".join("args[at]" if i == 0 else f"args[at + {i}]" for i in range(len(HAND_OFF_ARGS))),
        fields=", ".join(f"'{field}', {expression}" for field, expression in PER_JOB.items()),
        fixed_at=len(HAND_OFF_ARGS),
    )


class JobHash:
    """The job hash RQ's unique enqueue writes for a parkway job, as the store's ``NextJob``: the
    Lua that writes it (``lua``), and its keys and arguments per run.

    ``job`` is a parkway job as the queue creates it (any run, step 0, fence 0); its hash gives
    every field but ``FILLED_IN``. Per run, ``args`` adds the heads of the job id and of the
    description (what precedes the fence and the step: ``heads(run_id)``) and of the data (the
    call up to its step and fence)."""

    def __init__(self, queue: Queue, job: Job, heads: Callable[[str], tuple[str, str]]) -> None:
        with translated():
            queue._prepare_for_queue(job)  # reads the server version once per queue
        flat = _build_hset_args(job)  # type: ignore[no-untyped-call]
        self.fields: tuple[Any, ...] = tuple(
            item for i in range(0, len(flat), 2) if flat[i] not in FILLED_IN for item in flat[i : i + 2]
        )
        self.func_name = str(job.func_name)
        self.heads = heads
        self._keys = [queue.key, queue.redis_queues_keys]
        self._data_lead = data_lead(self.func_name)
        self.lua = hand_off_lua()

    def keys(self) -> list[str]:
        return list(self._keys)

    def args(self, run_id: str) -> list[str | bytes]:
        """``hand_off``'s arguments for a job of ``run_id``, in ``HAND_OFF_ARGS`` order (on the path
        of every start and resume: the data head is the function's lead, made once, and the run id)."""
        id_head, description_head = self.heads(run_id)
        data = self._data_lead + MsgpackSerializer.dumps(run_id)  # = data_head(self.func_name, run_id)
        return [JOB_KEY_PREFIX, id_head, data, description_head, stamp(), *self.fields]


assert HAND_OFF_ARGS == ("key_prefix", "id_head", "data_head", "description_head", "stamp"), "JobHash.args' order"


def data_head(func_name: str, run_id: str) -> bytes:
    """RQ's job data for ``func_name(run_id, step, fence)`` up to the step: the script appends the
    step, the fence (msgpack integers) and ``DATA_TAIL``."""
    whole = MsgpackSerializer.dumps((func_name, None, (run_id, 0, 0), {}))
    assert whole.endswith(b"\x00\x00" + DATA_TAIL), "the msgpack layout of a job's data changed"
    return whole[: -2 - len(DATA_TAIL)]


def data_lead(func_name: str) -> bytes:
    """``data_head`` up to the run id: what precedes the run id's msgpack string in the data of any
    job of ``func_name`` (the run id is the first item of an array inside an array, so the bytes
    before it do not depend on it)."""
    head = data_head(func_name, "")
    assert head.endswith(MsgpackSerializer.dumps("")), "the msgpack layout of a job's data changed"
    return head[: -len(MsgpackSerializer.dumps(""))]


def stamp() -> str:
    """Now, as RQ writes a job's ``created_at`` and ``enqueued_at`` (``utcformat(now())``: its
    ``%Y-%m-%dT%H:%M:%S.%fZ``), formatted by ``isoformat``, which takes a third of strftime's time."""
    return now().isoformat(timespec="microseconds")[:-6] + "Z"  # less its "+00:00"


def intermediate_key(queue: Queue) -> str:
    """RQ's list of the ids a worker took from ``queue`` and has not started yet."""
    return str(queue.intermediate_queue_key)


def is_taken(pipe: redis.client.Pipeline, queue: Queue, job_id: str) -> None:
    """Queue on ``pipe`` the look at whether a worker took ``job_id`` from ``queue`` (its position in
    RQ's intermediate list, or None)."""
    pipe.lpos(intermediate_key(queue), job_id)


def discard_taken(pipe: redis.client.Pipeline, queue: Queue, job_id: str) -> None:
    """Queue on ``pipe`` the removal of all RQ keeps of a job a worker took from ``queue`` and never
    began (it died first): its id in the intermediate list, the mark RQ's cleanup sets on it there
    (``IntermediateQueue.get_first_seen_key``), and its hash. Left there, RQ's cleanup would fail it
    (a failed-registry entry and a result without expiry, the hash kept a year)."""
    pipe.lrem(intermediate_key(queue), 0, job_id)
    pipe.delete(Job.key_for(job_id), queue.intermediate_queue.get_first_seen_key(job_id))


# --- the job class and the queue class the worker reads jobs with ------------------------------

JOB_CALLBACK_FIELDS = ("_success_callback_name", "_failure_callback_name", "_stopped_callback_name")
"""where ``rq.job.Job`` keeps the callbacks a job hash names; RQ imports and calls them around the job"""


class ParkwayJob(Job):
    """RQ's Job, except that the callbacks its hash names are never imported or called (parkway
    sets none, and RQ would run those of a hash written by hand after the job, or when its
    cleanup fails the job as abandoned)."""

    fetched = True
    """False for a job the worker's queue handed over unread (``DeferredFetchQueue``)"""
    carried: str | None = None
    """what its queue element carries after the id (format 3: the attempt its resume began, see
    ``begun_element``); None for an element that is the id alone"""

    @property
    def element(self) -> str:
        """The queue element the job was popped as (what RQ's intermediate list holds of it)."""
        return self.id if self.carried is None else f"{self.id} {self.carried}"

    @property
    def success_callback(self) -> None:
        return None

    @property
    def failure_callback(self) -> None:
        return None

    @property
    def stopped_callback(self) -> None:
        return None


def names_callbacks(job: Job) -> bool:
    """Whether ``job``'s hash names callbacks or webhooks (read from its stored fields only)."""
    return any(getattr(job, name) for name in JOB_CALLBACK_FIELDS) or bool(job.webhooks)


def begun_element(element: str) -> bool:
    """Whether a queue element carries something after its job id (format 3: the attempt its resume
    began; a job id RQ accepts holds no space)."""
    return " " in element


class DeferredFetchQueue(Queue):
    """RQ's Queue, except that a job the worker dequeues is handed over unread (``fetched`` False):
    the worker reads its hash only if it cannot run it by its id alone (``TrimmedWorker.claim``).
    Overrides ``Queue._fetch_dequeued_job``, which ``Queue.dequeue_any`` calls with each element it
    pops: an element of format 3 (``<job id> <what it carries>``: the attempt its resume began) is
    split there, the job given its id and, in ``carried``, the rest."""

    @classmethod
    def _fetch_dequeued_job(
        cls,
        connection: redis.Redis,
        queue_key: str,
        job_id: str,
        job_class: type[Job] | None = None,
        serializer: Any = None,
        death_penalty_class: Any = None,
    ) -> tuple[Job, Queue] | None:
        job_cls = job_class if job_class is not None else cls.job_class
        # built without the serializer, given it after: RQ checks a serializer against a runtime
        # Protocol on every Job and Queue it builds (about 60 us for the two, per job)
        queue = cls.from_queue_key(
            queue_key, connection=connection, job_class=job_cls, death_penalty_class=death_penalty_class
        )
        queue.serializer = serializer if serializer is not None else queue.serializer
        job_id, _, carried = job_id.partition(" ")  # format 3: an element that carries its begun attempt
        try:
            job = job_cls(job_id, connection=connection)
        except Exception as exc:  # an id RQ rejects: named on the error, as RQ's own fetch does
            exc.job_id, exc.queue = job_id, queue  # type: ignore[attr-defined]
            raise
        job.serializer = queue.serializer
        job.description = job_id  # RQ's dequeue logs it, colored at a terminal (None would not concatenate)
        job.fetched = False  # type: ignore[attr-defined]
        if carried:
            job.carried = carried  # type: ignore[attr-defined]
        return job, queue
