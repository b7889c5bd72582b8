"""Each RQ internal parkway leans on (listed in ``parkway/workers/rq_internals/__init__.py``) is
where and what parkway expects: an RQ upgrade that changes one fails here, by name."""

from __future__ import annotations

import hashlib
import inspect
import signal
import threading
import time
import zlib
from importlib import resources

import pytest
import redis
import rq.intermediate_queue
import rq.logutils
from hiredis import pack_command
from rq import Callback, Queue, SimpleWorker
from rq.executions import Execution
from rq.job import Job
from rq.results import Result
from rq.scripts import UNIQUE_ENQUEUE_SCRIPT, _build_hset_args
from rq.timeouts import JobTimeoutException, UnixSignalDeathPenalty
from rq.utils import now, utcformat, utcparse
from rq.worker import WorkerStatus

from parkway.workers import jobs, rq_internals
from parkway.workers.rq_internals import JOB_CALLBACK_FIELDS, ParkwayJob, TrimmedWorker
from parkway.workers.serializer import MSGPACK, MsgpackSerializer
from tests.procs import sent_commands

QUEUE = "parkway"

UNIQUE_ENQUEUE_SHA1 = "5cee5213d2ee93f19f93badbfc1c8abbccde5baf"
"""rq 3.0.0's UNIQUE_ENQUEUE_SCRIPT, which ``hand_off`` (rq_internals/hand_off.lua) mirrors: read it
again on a change"""

WORKER_OVERRIDES = {
    "__init__": [
        "self", "queues", "name", "default_result_ttl", "connection", "exception_handlers",
        "maintenance_interval", "default_worker_ttl", "worker_ttl", "job_class", "queue_class",
        "log_job_description", "job_monitoring_interval", "disable_default_exception_handler",
        "prepare_for_work", "serializer", "work_horse_killed_handler",
    ],
    "execute_job": ["self", "job", "queue"],
    "prepare_job_execution": ["self", "job", "remove_from_intermediate_queue"],
    "handle_execution_ended": ["self", "job", "queue", "heartbeat_ttl"],
    "handle_job_success": ["self", "job", "queue", "started_job_registry", "execution"],
    "heartbeat": ["self", "timeout", "pipeline"],
    "check_for_suspension": ["self", "burst"],
    "set_state": ["self", "state", "pipeline"],
    "request_stop": ["self", "signum", "frame"],
    "dequeue_job_and_maintain_ttl": ["self", "timeout", "max_idle_time"],
    "run_maintenance_tasks": ["self"],
    "register_birth": ["self"],
    "unsubscribe": ["self"],
    "validate_queues": ["self"],
    "_install_signal_handlers": ["self"],
    "procline": ["self", "message"],
    "work": [
        "self", "burst", "logging_level", "date_format", "log_format", "max_jobs", "max_idle_time",
        "with_scheduler", "dequeue_strategy",
    ],
}  # fmt: skip
"""SimpleWorker's methods TrimmedWorker overrides, with rq 3.0.0's parameters"""

WORKER_CALLS = {
    "perform_job": ["self", "job", "queue", "execution"],
    "get_heartbeat_ttl": ["self", "job", "working_time"],
    "increment_successful_job_count": ["self", "pipeline"],
    "increment_total_working_time": ["self", "job_execution_time", "pipeline"],
    "increment_failed_job_count": ["self", "pipeline"],
    "cleanup_execution": ["self", "job", "pipeline", "execution"],
    "reorder_queues": ["self", "reference_queue"],
    "get_redis_server_version": ["self"],
    "queue_names": ["self"],
}
"""SimpleWorker's methods the overrides call, with rq 3.0.0's parameters"""


def _params(func: object) -> list[str]:
    return list(inspect.signature(func).parameters)  # type: ignore[arg-type]


def _queue(client: redis.Redis) -> Queue:
    return Queue(QUEUE, connection=client, serializer=MsgpackSerializer)


def test_the_job_hash_is_rqs_prepared_job_flattened(redis_client: redis.Redis) -> None:
    """``Queue._prepare_for_queue(job)`` and ``rq.scripts._build_hset_args(job)`` give the job hash,
    and the fields the script fills in are among its fields."""
    assert _params(Queue._prepare_for_queue) == ["self", "job"]
    assert _params(_build_hset_args) == ["job"]
    queue = _queue(redis_client)
    job = queue.create_job(jobs.EXECUTE_JOB, args=("run_x", 0, 0), job_id="pw-run_x-0", result_ttl=0)
    queue._prepare_for_queue(job)
    fields = _build_hset_args(job)  # type: ignore[no-untyped-call]
    assert set(rq_internals.FILLED_IN) <= set(fields[::2])
    assert zlib.decompress(dict(zip(fields[::2], fields[1::2], strict=True))["data"]) == job.data


def test_hand_off_is_generated_from_the_job_format_and_written_nowhere_else() -> None:
    """The Lua ``hand_off`` binds each of ``HAND_OFF_ARGS`` by name, writes each field of
    ``PER_JOB`` with its fixed fields after them, and is the only definition of it: the store's
    shared Lua only declares it."""
    lua = rq_internals.hand_off_lua()
    assert "$" not in lua
    assert f"local {', '.join(rq_internals.HAND_OFF_ARGS)} = args[at], args[at + 1]," in lua
    for field, expression in rq_internals.PER_JOB.items():
        assert f"'{field}', {expression}" in lua
    assert f"unpack(args, at + {len(rq_internals.HAND_OFF_ARGS)}, last)" in lua
    assert rq_internals.FILLED_IN == tuple(rq_internals.PER_JOB)
    common = resources.files("parkway.adapters.redis.scripts").joinpath("_common.lua").read_text()
    assert "\nlocal hand_off, hand_off_idle, hand_off_begun\n" in common and "function hand_off" not in common


def test_rq_reads_job_data_left_uncompressed_and_laid_out_as_data_head_says(redis_client: redis.Redis) -> None:
    """``Job.restore`` reads ``data`` that does not decompress as it is; ``Job.data`` is msgpack of
    (function, instance, args, kwargs), whose head up to the step ``data_head`` gives."""
    for step, fence in [(0, 0), (3, 200), (70_000, 5_000_000_000)]:
        data = MsgpackSerializer.dumps((jobs.EXECUTE_JOB, None, ("run_x", step, fence), {}))
        assert data.startswith(rq_internals.data_head(jobs.EXECUTE_JOB, "run_x"))
        assert data.endswith(rq_internals.DATA_TAIL)
        fields = {"data": data, "created_at": rq_internals.stamp()}
        redis_client.hset(f"{rq_internals.JOB_KEY_PREFIX}odd", mapping=fields)  # type: ignore[arg-type]
        job = Job.fetch("odd", connection=redis_client, serializer=MsgpackSerializer)
        assert (job.func_name, job.args, job.kwargs) == (jobs.EXECUTE_JOB, ["run_x", step, fence], {})


def test_job_hash_arguments_are_the_data_head_and_rqs_time_format(redis_client: redis.Redis) -> None:
    """``JobHash.args`` gives, for any run id, ``data_head``'s bytes and a stamp in RQ's own
    format (``utcformat``, which ``utcparse`` reads back to the same text)."""
    queue = _queue(redis_client)
    hashed = rq_internals.JobHash(queue, queue.create_job(jobs.EXECUTE_JOB, args=("r", 0, 0)), jobs._heads)
    for run_id in ["r", "run_" + "x" * 40, "t~" + "y" * 300]:
        named = dict(zip(rq_internals.HAND_OFF_ARGS, hashed.args(run_id), strict=False))
        assert named["data_head"] == rq_internals.data_head(jobs.EXECUTE_JOB, run_id)
        assert named["key_prefix"] == rq_internals.JOB_KEY_PREFIX
        assert (named["id_head"], named["description_head"]) == jobs._heads(run_id)
        assert utcformat(utcparse(str(named["stamp"]))) == named["stamp"]
        assert abs((utcparse(str(named["stamp"])) - now()).total_seconds()) < 60


def test_unique_enqueue_and_its_keys_are_the_ones_hand_off_mirrors(redis_client: redis.Redis) -> None:
    """RQ's unique enqueue script is the one read when ``hand_off`` was written; job keys are
    ``Job.redis_job_namespace_prefix`` + id; an enqueue registers the queue in
    ``Queue.redis_queues_keys``; a dequeue moves the id to ``Queue.intermediate_queue_key``."""
    assert hashlib.sha1(UNIQUE_ENQUEUE_SCRIPT.encode()).hexdigest() == UNIQUE_ENQUEUE_SHA1
    assert rq_internals.JOB_KEY_PREFIX == Job.redis_job_namespace_prefix == "rq:job:"
    assert Job.key_for("pw-run_x-1") == "rq:job:pw-run_x-1"
    queue = _queue(redis_client)
    queue.enqueue_job(queue.create_job(jobs.EXECUTE_JOB, args=("run_x", 0, 1), job_id="pw-run_x-1"), unique=True)
    assert redis_client.smembers(Queue.redis_queues_keys) == {queue.key.encode()}
    assert rq_internals.JobHash(queue, queue.create_job(jobs.EXECUTE_JOB, args=("r", 0, 0)), jobs._heads).keys() == [
        queue.key,
        Queue.redis_queues_keys,
    ]
    worker = SimpleWorker([queue], connection=redis_client, serializer=MsgpackSerializer)
    worker.dequeue_job_and_maintain_ttl(None)
    assert redis_client.lrange(queue.intermediate_queue_key, 0, -1) == [b"pw-run_x-1"]


def test_the_job_class_overrides_what_rq_resolves(redis_client: redis.Redis) -> None:
    """RQ keeps a job's callbacks' names in ``JOB_CALLBACK_FIELDS`` and resolves them in the
    ``*_callback`` properties ``ParkwayJob`` overrides, and nothing else of RQ's Job (what a job
    began with is an argument of the function that runs it, never left on the job);
    ``Job.webhooks`` exists."""
    named = Callback("time.time")
    job = Job.create("time.time", connection=redis_client, on_success=named, on_failure=named, on_stopped=named)
    assert [getattr(job, name) for name in JOB_CALLBACK_FIELDS] == ["time.time"] * 3
    assert [job.success_callback, job.failure_callback, job.stopped_callback] == [time.time] * 3
    assert rq_internals.names_callbacks(job)
    job.__class__ = ParkwayJob
    assert [job.success_callback, job.failure_callback, job.stopped_callback] == [None] * 3
    overridden = {name for name in vars(ParkwayJob) if hasattr(Job, name) and not name.startswith("__")}
    assert overridden == {"success_callback", "failure_callback", "stopped_callback"}
    assert job.webhooks is None or isinstance(job.webhooks, list)


def test_discard_taken_removes_what_rqs_intermediate_cleanup_would_fail(redis_client: redis.Redis) -> None:
    """RQ's intermediate-list cleanup fails a job it has seen there before (its first-seen mark,
    ``IntermediateQueue.get_first_seen_key``, under ``Queue.intermediate_queue``), read from its hash:
    ``discard_taken`` deletes the id from the list, that mark and the hash, so RQ finds nothing."""
    assert "self.set_first_seen(job_id)" in inspect.getsource(rq.intermediate_queue.IntermediateQueue.cleanup)
    assert "worker.handle_job_failure(" in inspect.getsource(rq.intermediate_queue.IntermediateQueue.cleanup)
    queue = _queue(redis_client)
    job = queue.enqueue_call("time.time", job_id="pw-run_x-0", result_ttl=0)
    redis_client.lmove(queue.key, queue.intermediate_queue_key, "RIGHT", "LEFT")  # what a dequeue does
    worker = TrimmedWorker([queue], connection=redis_client)
    queue.intermediate_queue.cleanup(worker, queue)  # the first sight: RQ marks the job
    assert redis_client.exists(queue.intermediate_queue.get_first_seen_key(job.id))
    with redis_client.pipeline() as pipe:
        rq_internals.discard_taken(pipe, queue, job.id)
        pipe.execute()
    assert redis_client.keys("rq:*job*") == [] and redis_client.keys("rq:queue:*") == []


def test_a_job_rq_cannot_load_is_named_on_the_dequeue_error(redis_client: redis.Redis) -> None:
    """``Queue._fetch_dequeued_job`` attaches the id and the queue to the error of a job it cannot load."""
    with pytest.raises(ValueError) as caught:
        Queue._fetch_dequeued_job(redis_client, _queue(redis_client).key, "pw-evil\n-0", serializer=MsgpackSerializer)
    assert caught.value.job_id == "pw-evil\n-0"  # type: ignore[attr-defined]
    assert caught.value.queue.name == QUEUE  # type: ignore[attr-defined]


def test_the_dequeue_hands_over_each_popped_id_through_the_queue_class_it_is_given(
    redis_client: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """RQ's worker dequeues with ``self.queue_class.dequeue_any``, which calls the class's
    ``_fetch_dequeued_job`` (rq 3.0.0's parameters) with each id it pops; ``validate_queues``
    checks the worker's queues against ``queue_class``; ``Job.refresh`` reads a job's hash. So
    ``DeferredFetchQueue`` hands a parkway worker each job unread, and the worker reads it later."""
    assert _params(Queue._fetch_dequeued_job) == [
        "connection", "queue_key", "job_id", "job_class", "serializer", "death_penalty_class",
    ]  # fmt: skip
    assert "self.queue_class.dequeue_any(" in inspect.getsource(SimpleWorker.dequeue_job_and_maintain_ttl)
    assert "cls._fetch_dequeued_job(" in inspect.getsource(Queue.dequeue_any)
    assert "self.queue_class" in inspect.getsource(SimpleWorker.validate_queues)
    queue = _queue(redis_client)
    queue.enqueue_call("time.time", job_id="plain", result_ttl=0)
    worker = TrimmedWorker([queue], connection=redis_client)
    assert worker.queue_class is rq_internals.DeferredFetchQueue
    # RQ's dequeue logs the job's description, colored when stdout is a terminal: an unread job has one
    monkeypatch.setattr(rq.logutils.colorizer, "notty", False)
    dequeued = worker.dequeue_job_and_maintain_ttl(None)
    assert dequeued is not None
    job, handed = dequeued
    assert job.id == "plain" and job.fetched is False  # type: ignore[attr-defined]
    assert job.serializer is handed.serializer is worker.serializer is MSGPACK
    job.refresh()  # type: ignore[no-untyped-call]
    assert job.func_name == "time.time"


def test_the_worker_methods_trimmed_worker_overrides_and_calls_keep_their_parameters() -> None:
    """Each SimpleWorker method TrimmedWorker overrides or calls has rq 3.0.0's parameters, and
    TrimmedWorker overrides exactly the ones named."""
    for name, params in {**WORKER_OVERRIDES, **WORKER_CALLS}.items():
        assert _params(getattr(SimpleWorker, name)) == params, name
    overridden = {
        name
        for name, value in vars(TrimmedWorker).items()
        if inspect.isfunction(value) and hasattr(SimpleWorker, name) and name != "__init__"
    }
    assert overridden == set(WORKER_OVERRIDES) - {"__init__"}


def test_the_death_penalty_is_rqs_alarm_with_its_handler_set_directly() -> None:
    """``AlarmDeathPenalty`` is RQ's ``UnixSignalDeathPenalty`` (its ``_timeout`` and
    ``handle_death_penalty``, the setup and cancel it replaces): inside it SIGALRM has the penalty's
    handler and an alarm is set; after it the alarm is off and the handler is the default again;
    the worker uses it on the main thread."""
    assert issubclass(rq_internals.AlarmDeathPenalty, UnixSignalDeathPenalty)
    for name in ("setup_death_penalty", "cancel_death_penalty", "handle_death_penalty"):
        assert name in vars(UnixSignalDeathPenalty), name
    assert TrimmedWorker.death_penalty_class is rq_internals.AlarmDeathPenalty
    before = signal.getsignal(signal.SIGALRM)
    penalty = rq_internals.AlarmDeathPenalty(30, JobTimeoutException, job_id="j")
    with penalty:
        assert signal.getsignal(signal.SIGALRM) == penalty.handle_death_penalty
        assert 0 < signal.getitimer(signal.ITIMER_REAL)[0] <= 30
    assert signal.getitimer(signal.ITIMER_REAL)[0] == 0
    assert signal.getsignal(signal.SIGALRM) == signal.SIG_DFL
    signal.signal(signal.SIGALRM, before)
    with pytest.raises(JobTimeoutException):  # (its message: RQ's TimerDeathPenalty rewrites it process-wide)
        penalty.handle_death_penalty(signal.SIGALRM, None)


def test_the_room_says_why_for_each_worker_override() -> None:
    """The room's docstring names each SimpleWorker method TrimmedWorker overrides."""
    listed = rq_internals.__doc__ or ""
    for name in WORKER_OVERRIDES:
        assert f"``{name}``" in listed, name


def test_the_worker_state_and_records_the_overrides_touch_are_where_they_are_read(redis_client: redis.Redis) -> None:
    """A SimpleWorker has ``_stop_requested``, ``_state``, ``last_heartbeat``, ``last_cleaned_at``,
    ``executions`` and ``death_penalty_class``; ``Execution.create``, ``Result.get_key``,
    ``Result.create_failure`` and ``Job.prepare_for_execution`` take what the start and end
    transactions pass; a job names its execution registry and dependency keys."""
    worker = SimpleWorker([_queue(redis_client)], connection=redis_client)
    for attribute in ("_stop_requested", "_state", "last_heartbeat", "last_cleaned_at", "executions"):
        assert hasattr(worker, attribute), attribute
    assert worker.death_penalty_class is not None
    assert _params(Execution.create) == ["job", "ttl", "pipeline", "worker_name"]
    assert _params(Result.get_key) == ["job_id"]
    assert _params(Result.create_failure)[:5] == ["job", "ttl", "exc_string", "worker_name", "pipeline"]
    assert _params(Job.prepare_for_execution) == ["self", "worker_name", "pipeline"]
    job = Job.create("time.time", connection=redis_client)
    assert job.execution_registry.key and job.dependents_key and job.dependencies_key


def _worker_records(client: redis.Redis, worker: SimpleWorker) -> dict[str, object]:
    """The worker key's field names and the TTLs of the worker key and its executions index."""
    return {
        "fields": sorted(client.hkeys(worker.key)),
        "ttl": client.ttl(worker.key),
        "executions ttl": client.ttl(worker.executions_key),
    }


def test_the_start_transaction_writes_the_worker_key_as_set_state_and_heartbeat_do(
    redis_client: redis.Redis,
) -> None:
    """RQ's ``set_state(BUSY)`` then ``heartbeat(ttl)`` write the fields ``state`` and
    ``last_heartbeat`` of ``self.key`` and expire it and ``self.executions_key`` after ``ttl``:
    what ``TrimmedWorker._busy`` writes in one HSET and two EXPIREs."""
    stock = SimpleWorker([_queue(redis_client)], connection=redis_client, name="stock")
    ours = TrimmedWorker([_queue(redis_client)], connection=redis_client, name="ours")
    for worker in (stock, ours):
        redis_client.sadd(worker.executions_key, "x")
    with redis_client.pipeline() as pipe:
        stock.set_state(rq_internals.WorkerStatus.BUSY, pipeline=pipe)
        stock.heartbeat(500, pipeline=pipe)
        pipe.execute()
    with redis_client.pipeline() as pipe:
        ours._busy(500, pipe)
        pipe.execute()
    assert _worker_records(redis_client, stock) == _worker_records(redis_client, ours)
    assert redis_client.hget(ours.key, "state") == b"busy" and ours.get_state() == "busy"
    assert ours.last_heartbeat is not None


def test_the_success_transaction_leaves_what_rqs_cleanup_and_delete_leave(redis_client: redis.Redis) -> None:
    """RQ's ``cleanup_execution`` removes the execution (``Execution.key``), its member
    ``composite_key`` of the started registry (``StartedJobRegistry.remove_execution``) and of the
    worker's index (``worker_executions_key``), and its entry in the job's execution registry,
    whose key the success transaction deletes outright."""
    left: list[list[bytes]] = []
    for name in ("stock", "ours"):
        queue = _queue(redis_client)
        job = queue.enqueue_call("time.time", job_id=f"job-{name}", result_ttl=0)
        worker = TrimmedWorker([queue], connection=redis_client, name=name)
        with redis_client.pipeline() as pipe:
            execution = Execution.create(job, 500, pipeline=pipe, worker_name=worker.name)
            pipe.execute()
        assert execution.worker_executions_key == worker.executions_key
        with redis_client.pipeline() as pipe:
            if name == "stock":
                SimpleWorker.cleanup_execution(worker, job, pipeline=pipe, execution=execution)
                pipe.delete(job.execution_registry.key)
            else:
                queue.started_job_registry.remove_execution(execution, pipeline=pipe)
                pipe.srem(execution.worker_executions_key, execution.composite_key)
                pipe.delete(execution.key, job.execution_registry.key)
            pipe.execute()
        mine = [k for k in redis_client.keys("rq:*") if name.encode() in k]
        left.append(sorted(k.replace(name.encode(), b"*") for k in mine))
        assert redis_client.zcard(queue.started_job_registry.key) == 0
    assert left[0] == left[1]


@pytest.mark.parametrize("served", [["parkway"], ["parkway", "other"]])
def test_the_dequeue_a_jobs_last_commit_carries_is_the_one_rqs_loop_sends(
    redis_client: redis.Redis, served: list[str]
) -> None:
    """The dequeue ``NextDequeue`` gives a job's last commit to carry is, byte for byte, what RQ's
    worker loop sends for it: ``Queue.dequeue_any`` over ``_ordered_queues`` with
    ``dequeue_timeout`` (``work``: ``None if burst else``), ``Queue.lmove``'s BLMOVE to the
    intermediate list for one queue on Redis 6.2+ (``rq.utils.get_version``), ``Queue.lpop``'s
    BLPOP for several; after the pop, RQ's loop reorders the queues and stamps the server's version
    as ``_ridden`` does; ``work`` ends between jobs on ``max_jobs`` (so no dequeue rides then)."""
    queues = [Queue(name, connection=redis_client, serializer=MsgpackSerializer) for name in served]
    worker = TrimmedWorker(queues, connection=redis_client)
    worker._rides_now, worker._loop_thread = True, threading.get_ident()  # as work() sets them
    taken = worker.next_dequeue.take()
    assert taken is not None
    _, (client_id, carried) = taken
    assert client_id == ("CLIENT", "ID")
    worker._give_back()  # never sent: its connection goes back to the pool
    assert worker._ride is None and worker.next_dequeue.take() is not None  # one at a time
    worker._give_back()
    redis_client.rpush(queues[-1].key, "some-job")
    with sent_commands() as sent:
        popped = worker.queue_class.dequeue_any(
            worker._ordered_queues, worker.dequeue_timeout, connection=redis_client, job_class=worker.job_class,
            serializer=worker.serializer,
        )
    assert popped is not None and popped[0].id == "some-job"
    assert sent == [pack_command(carried)]
    assert rq_internals.intermediate_key(queues[0]) == queues[0].intermediate_queue_key
    assert "timeout = None if burst else self.dequeue_timeout" in inspect.getsource(SimpleWorker.work)
    assert "completed_jobs >= max_jobs" in inspect.getsource(SimpleWorker.work)
    loop = inspect.getsource(SimpleWorker.dequeue_job_and_maintain_ttl)
    assert "self.reorder_queues(reference_queue=queue)" in loop
    assert "job.redis_server_version = self.get_redis_server_version()" in loop


def test_rqs_suspension_check_says_suspended_through_set_state_before_it_waits() -> None:
    """RQ's ``check_for_suspension`` calls ``set_state(WorkerStatus.SUSPENDED)`` before its wait,
    where ``TrimmedWorker.set_state`` gives back a dequeue a job's last commit carried."""
    source = inspect.getsource(SimpleWorker.check_for_suspension)
    assert source.index("self.set_state(WorkerStatus.SUSPENDED)") < source.index("time.sleep(1)")
    assert WorkerStatus.SUSPENDED == "suspended"
