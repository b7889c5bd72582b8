"""Every internal of RQ that parkway leans on, in one room (STYLE 16), for rq 3.0.x (pinned).

Other modules use RQ's public API only (``Queue``, ``Queue.create_job``/``enqueue_job``,
``Job.key_for``, ``JobStatus``, ``WorkerPool``, ``Worker.work``, ``Worker.all``, ``Queue.count``)
and come here for the rest: ``job_format`` (RQ's job hash, the key and lists a job moves through,
the job and queue classes) and ``worker`` (``TrimmedWorker``, RQ's SimpleWorker trimmed).
``tests/test_rq_internals.py`` names each one below and fails when an RQ upgrade changes it.

**The job format** (``job_format``). The store's scripts write parkway's jobs themselves, in the
call that commits the transition that calls for one: the Lua function ``hand_off`` is generated
here (``hand_off_lua``: ``hand_off.lua`` with its argument names ``HAND_OFF_ARGS`` and the fields
written per job ``PER_JOB`` filled in) and handed to the store with the arguments
(``JobHash``, the store's ``NextJob``); the store's own scripts know only that they call it.

- the job hash: ``Job.to_dict`` of a job ``Queue._prepare_for_queue`` prepared (origin, enqueue
  time, status, the server's version), flattened by ``rq.scripts._build_hset_args``: ``JobHash``
  takes its fixed fields from RQ itself, once per dispatcher, and passes them to ``hand_off``;
- the job data: ``Job.data`` is the serializer's dump of ``(func_name, instance, args, kwargs)``,
  stored zlib-compressed, and ``Job.restore`` reads it as it is when it does not decompress (a
  msgpack array never starts like a zlib stream): the script appends the step and the fence to
  the msgpack head ``data_head`` gives it, then ``DATA_TAIL`` (the empty kwargs);
- the job key: ``Job.redis_job_namespace_prefix`` + id (``JOB_KEY_PREFIX``), built inside the
  script, since the id holds the fence only the script knows; embedded drain scans it too;
- unique enqueue: ``Queue.enqueue_job(unique=True)`` runs ``rq.scripts.UNIQUE_ENQUEUE_SCRIPT``
  (the hash unless one exists, then RPUSH of the id) and registers the queue in
  ``Queue.redis_queues_keys``: ``hand_off`` does the same;
- the intermediate list ``Queue.intermediate_queue_key``, where a dequeue moves an id until its
  worker starts the job: a job listed there is taken (``is_taken``), and the worker clears it;
  one whose worker died before beginning it is dropped with the mark RQ's cleanup sets on it
  (``Queue.intermediate_queue``, ``IntermediateQueue.get_first_seen_key``) and its hash
  (``discard_taken``) when the reconciler redispatches its run: RQ's cleanup would fail it.

Why the script writes RQ's job rather than the client enqueueing it through RQ's public API
after the commit (``Queue.enqueue_job(unique=True)``, what a store without ``next_job`` leads the
client to do): measured by ``python -m bench.handoff`` (medians of 3 alternating rounds of 1,000
starts, then 1,000 pause/resume cycles with one worker, on 2 cores shared with other work, load
about 12), the Lua-written job is cheaper on every count:

=========================  =============  ==============
per start (commit + job)   script writes  public enqueue
=========================  =============  ==============
starts/s                   1,108          510
Redis CPU (INFO cpu)       131 us         190 us
Redis usec (commandstats)  146 us         176 us
Redis commands             16             19
client CPU                 220 us         580 us
=========================  =============  ==============

per cycle: 69.9 against 59.7 cycles/s, Redis CPU 1.43 against 1.59 ms (INFO cpu), client CPU
1.90 against 2.53 ms. So the job format stays here and the store's scripts write it.

**The job class** (``ParkwayJob``): the callbacks' names in ``JOB_CALLBACK_FIELDS`` (never
resolved: the ``success_callback``, ``failure_callback`` and ``stopped_callback`` properties are
overridden) and ``Job.webhooks``.

**The queue class** (``DeferredFetchQueue``, the worker's ``queue_class``): RQ's worker dequeues
with ``queue_class.dequeue_any``, which hands each id it pops to ``Queue._fetch_dequeued_job``;
the override returns the job unread (RQ's own attaches ``job_id`` and ``queue`` to the error of an
id it rejects, and so does this one), and the worker reads it with ``Job.refresh`` only when it
cannot run it by its id alone (``claim``: parkway's jobs). An element of stored format 3 (``<job
id> <the attempt its resume began>``: a space no RQ job id holds) is split there, the job given its
id and the rest (``ParkwayJob.carried``); RQ decodes the element as UTF-8 (``as_text``) before, so
the script writes each byte from 128 up as its Latin-1 character. Such an element has no job hash:
``hand_off_begun`` (in ``hand_off.lua``, beside ``hand_off``) pushes it, and the worker's
``_clear_intermediate`` drops one left in RQ's intermediate list, on which RQ's cleanup
(``IntermediateQueue.cleanup``: ``Job`` validates the id) would fail.

**The worker** (``TrimmedWorker``, which ``ParkwayWorker`` extends). What a job began with is
handed to the function that runs it as an argument (``Claim.run(began)``), never left on the job.
Each SimpleWorker method it overrides, and why:

- ``execute_job``: a job ``claim`` names (by its id alone), or one read from its hash that
  ``claim_read`` names and whose result is not kept (``result_ttl=0``), runs on parkway's lease
  without RQ's per-job records (``_run_claimed``: one round trip takes it off the intermediate
  list, deletes its hash, raises the worker key's expiry and begins it, with a ``WAIT`` for
  ``begin_acks``'s replicas; RQ's state ``_state`` is set busy in memory only, which RQ's stop
  signal handler ``_shutdown`` reads through ``get_state``, so a stop waits for the job; the job
  runs under ``death_penalty_class`` with ``JobTimeoutException`` as RQ's ``perform_job`` does);
  any other job (a benchmark's stand-in): RQ's ``prepare_execution`` and
  ``prepare_job_execution`` in one MULTI: ``Execution.create``, ``self.executions``,
  ``Job.prepare_for_execution``, the intermediate list; ``set_state(BUSY)`` and
  ``heartbeat(ttl)`` as ``_busy`` writes them: the fields ``state`` and ``last_heartbeat`` of
  ``self.key`` in one HSET, the expiry of ``self.key`` and ``self.executions_key``,
  ``self._state``, ``self.last_heartbeat``; then ``perform_job``. Also where Redis away is waited
  out (below);
- ``prepare_job_execution``: made a no-op, as ``execute_job`` wrote it all in its start MULTI;
- ``handle_execution_ended`` and ``handle_job_success``: a ``result_ttl=0`` job is deleted in the
  MULTI that records its success (``increment_successful_job_count``,
  ``increment_total_working_time``, ``cleanup_execution`` as its parts
  (``StartedJobRegistry.remove_execution``, ``Execution.key``, ``worker_executions_key`` and
  ``composite_key``, ``self.executions``) but for its ZREM from ``Job.execution_registry``, whose
  key the same MULTI deletes, ``Result.get_key``, ``Job.dependents_key``/``dependencies_key``,
  ``self._state``, ``Job._status``), instead of RQ's heartbeat, read-then-delete and registries;
- ``heartbeat``: sent at most every ``HEARTBEAT_EVERY``, via ``self.last_heartbeat`` (RQ sends up
  to three per job); raises ``StopRequested`` after ``stop()``, as RQ calls it whenever its wait
  for a job times out (the only way to end the loop from another thread);
- ``check_for_suspension``: at most once a second (RQ: before every job);
- ``set_state``: an unchanged state is not rewritten; ``WorkerStatus.SUSPENDED``, which RQ's
  ``check_for_suspension`` sets before it waits, first gives back a dequeue a job's last commit
  carried (below);
- ``request_stop`` (RQ's SIGTERM handler, which a pool's child also compares against): notes a
  stop asked for (``ended_as_asked``): RQ's idle ``_shutdown`` raises ``StopRequested`` without
  setting ``_stop_requested``, so nothing else tells it from RQ's loop quitting on an error; and a signal that
  lands inside a ``__del__`` (where that raise would be swallowed, losing the stop) is sent again
  a moment later instead;
- ``dequeue_job_and_maintain_ttl``: the dequeue a job's last commit carried is read first
  (``_ridden``, below); a job RQ cannot load is set aside, named by the error
  ``Queue._fetch_dequeued_job`` raises (its ``job_id`` and ``queue`` attributes) or by the
  ``UnicodeDecodeError`` of an id that is not UTF-8 (RQ's loop would quit on either);
- ``run_maintenance_tasks`` (and ``self.last_cleaned_at``): clears what RQ's cleanup would die on
  first, and survives a failed pass; setting aside and refusing a job write RQ's failed registry
  (``failed_job_registry.add``, ``Result.create_failure``, ``DEFAULT_FAILURE_TTL``,
  ``increment_failed_job_count``, ``validate_job_id``);
- ``register_birth``: tried again while Redis is away;
- ``unsubscribe`` (``self.pubsub``, ``self.pubsub_thread``, ``self.pubsub_channel_name``, redis-py's
  ``PubSubWorkerThread.stop``, RQ's ``handle_command`` ignoring an unknown command): lowers the listener
  thread's flag first (``stop(timeout=0)`` on redis-py 8.2+, whose ``stop`` also joins), then wakes it
  with a message on its channel sent on another connection, so it ends and closes its own pubsub: a
  stopping worker never waits out RQ's one-second join of a thread the reply put back to sleep, and
  never touches the pubsub's connection while the thread reads it;
- Redis away for now (``store_away``: a lost connection, or a ``NOREPLICAS``, ``READONLY``,
  ``UNBLOCKED``, ``MASTERDOWN`` or ``LOADING`` reply, as during a failover) is waited out (``_store_away``, with
  backoff) in ``register_birth``, ``check_for_suspension``, ``heartbeat``,
  ``dequeue_job_and_maintain_ttl`` and ``execute_job`` (the job is then left as a killed worker
  leaves it, to its lease), where RQ's ``Worker.work`` quits on any error it does not expect;
- ``validate_queues``: RQ checks every queue against ``queue_class``; any RQ Queue will do, since
  ``DeferredFetchQueue`` changes only the class method the dequeue calls;
- ``death_penalty_class`` (a class attribute): ``AlarmDeathPenalty``, RQ's ``UnixSignalDeathPenalty``
  (``setup_death_penalty``/``cancel_death_penalty``, ``_timeout``, ``handle_death_penalty``) with its
  handler set through ``_signal.signal``: ``signal.signal``'s enum conversions cost a job ~6 us;
- **the dequeue a job's last commit carries** (``NextDequeue``, which ``ParkwayWorker`` gives its
  jobs' store as ``RedisStore.followed_by``; ``work`` allows it unless ``burst``, ``max_jobs`` or
  ``max_idle_time`` may end RQ's loop between jobs, and it is never sent once ``_stop_requested``
  is set, nor by the embedded worker: ``rides``): RQ's loop sends its next dequeue in a round trip
  of its own after each job; parkway's job sends it after its last commit instead, on a
  connection of RQ's pool (``connection_pool``), preceded by ``CLIENT ID``, and reads the
  commit's reply at once (``connection.run_script_then``). The dequeue is the one RQ's loop would
  send (``Queue.dequeue_any``'s choice: ``Queue.lmove``'s ``BLMOVE`` from the queue to
  ``Queue.intermediate_queue_key``, ``LEFT`` to ``RIGHT``, for one queue on Redis 6.2+ by
  ``rq.utils.get_version``, else ``Queue.lpop``'s ``BLPOP`` of every queue in
  ``_ordered_queues``, for ``dequeue_timeout``); its reply is handed over as RQ's loop does
  (``as_text``, ``queue_class._fetch_dequeued_job``, ``reorder_queues``,
  ``get_redis_server_version``, ``procline``, ``heartbeat``; none popped is RQ's
  ``DequeueTimeout``: its own dequeue follows). One the loop will not read (a stop, a suspension,
  an error RQ's loop quits on: ``work``'s end) is given back (``_give_back``): ``CLIENT UNBLOCK``
  ends it, and a job it popped goes back to the head of its queue, off the intermediate list;
- ``work``, ``_install_signal_handlers``, ``procline``: off the main thread (embedded mode)
  ``death_penalty_class`` is ``TimerDeathPenalty`` (SIGALRM reaches only the main thread), and
  installing signal handlers and setting the process title do nothing; ``stop()`` sets RQ's
  ``_stop_requested``;
- ``__init__``: RQ's WorkerPool gives its children queues with RQ's default serializer and job
  class; the worker's own go to every queue it serves. RQ's worker records the serializer's
  name (``_serializer_arg``, which an instance lacks), so it is given the class, and the worker
  then keeps the instance ``MSGPACK`` (``self.serializer``), which RQ's Protocol check on every
  Job, Queue and registry it builds passes faster.
"""

import importlib
from typing import TYPE_CHECKING, Any

from rq.worker import WorkerStatus

from .job_format import (
    DATA_TAIL,
    FILLED_IN,
    HAND_OFF_ARGS,
    JOB_CALLBACK_FIELDS,
    JOB_KEY_PREFIX,
    PER_JOB,
    DeferredFetchQueue,
    JobHash,
    ParkwayJob,
    data_head,
    discard_taken,
    hand_off_lua,
    intermediate_key,
    is_taken,
    names_callbacks,
    stamp,
)

if TYPE_CHECKING:
    from .worker import HEARTBEAT_EVERY, AlarmDeathPenalty, Claim, TrimmedWorker, store_away

_WORKER = ("HEARTBEAT_EVERY", "AlarmDeathPenalty", "Claim", "TrimmedWorker", "store_away")


def __getattr__(name: str) -> Any:
    """The worker's names, imported when first asked for: a client, which needs only the job
    format, then leaves the worker (and structlog, which it logs with) unimported."""
    if name not in _WORKER:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(".worker", __name__), name)


__all__ = [
    "DATA_TAIL",
    "FILLED_IN",
    "HAND_OFF_ARGS",
    "HEARTBEAT_EVERY",
    "JOB_CALLBACK_FIELDS",
    "JOB_KEY_PREFIX",
    "PER_JOB",
    "AlarmDeathPenalty",
    "Claim",
    "DeferredFetchQueue",
    "JobHash",
    "ParkwayJob",
    "TrimmedWorker",
    "WorkerStatus",
    "data_head",
    "discard_taken",
    "hand_off_lua",
    "intermediate_key",
    "is_taken",
    "names_callbacks",
    "stamp",
    "store_away",
]
