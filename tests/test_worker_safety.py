"""No job on parkway's queue stops a worker or runs anything but parkway's entrypoint; a pool's
children read jobs with msgpack only and leave with their pool."""

from __future__ import annotations

import os
import pickle
import signal
import sys
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from rq import Queue
from rq.job import Job
from rq.utils import now, utcformat

from parkway import Parkway, RunStatus, Settings
from parkway.workers.jobs import EXECUTE_JOB
from parkway.workers.serializer import MsgpackSerializer
from parkway.workers.worker import ParkwayWorker, run_worker
from tests import flows
from tests.conftest import SECRET
from tests.procs import ROOT, Worker, wait_for

QUEUE = "parkway"
Stored = dict[str, Any] | bytes | None
"""a job's key as written by hand: a hash, a plain string (not a hash at all), or nothing"""


def _hash(func: Any, args: Any = (), kwargs: Any = None, instance: Any = None, **fields: Any) -> dict[str, Any]:
    """A job hash as RQ's enqueue writes it (msgpack then zlib in ``data``), with ``fields`` on top."""
    data = zlib.compress(MsgpackSerializer.dumps([func, instance, list(args), kwargs or {}]))
    stamp = utcformat(now())
    base = {"data": data, "status": "queued", "origin": QUEUE, "created_at": stamp, "enqueued_at": stamp}
    return {**base, "description": "written by hand", "timeout": 60, **fields}


def _bytes(job_id: str | bytes) -> bytes:
    return job_id if isinstance(job_id, bytes) else job_id.encode()


def _write(client: redis.Redis, jobs: dict[str | bytes, Stored], onto: str) -> None:
    """Write each job's key and push its id onto the list ``onto``, with raw commands."""
    pipe = client.pipeline()
    for job_id, stored in jobs.items():
        key = b"rq:job:" + _bytes(job_id)
        if isinstance(stored, bytes):
            pipe.set(key, stored)
        elif stored is not None:
            pipe.hset(key, mapping=stored)
        pipe.rpush(onto, job_id)
    pipe.sadd("rq:queues", f"rq:queue:{QUEUE}")
    pipe.execute()


INVALID_IDS: dict[str | bytes, Stored] = {
    "pw-evil\n-0": _hash(EXECUTE_JOB, ["run_evil", 0, 0]),
    b"pw-\xff-0": _hash(EXECUTE_JOB, ["run_evil", 0, 0]),
}
"""ids RQ rejects (not even its failed registry can name them): dropped"""

MISSING: dict[str | bytes, Stored] = {"pw-ghost-0": None, "pw-nodata-0": {"status": "queued", "origin": QUEUE}}
"""jobs RQ takes for gone: it skips them, and its cleanup drops them from the intermediate list"""

FAILED: dict[str | bytes, Stored] = {
    "job-garbage-0": {**_hash(EXECUTE_JOB), "data": b"\x00neither zlib nor msgpack\xff"},
    "job-shape-0": {**_hash(EXECUTE_JOB), "data": zlib.compress(MsgpackSerializer.dumps([1, 2]))},
    "job-status-0": _hash(EXECUTE_JOB, ["run_x", 0, 0], status="not-a-status"),
    "job-string-0": b"not a hash",
    "job-few-0": _hash(EXECUTE_JOB, ["x"]),
    "job-many-0": _hash(EXECUTE_JOB, [1, 2, 3, 4]),
    "job-types-0": _hash(EXECUTE_JOB, [1, "a", None]),
    "job-kwargs-0": _hash(EXECUTE_JOB, [], {"run_id": "run_x", "step": 0, "fence": 0}),
    "job-nofunc-0": _hash("parkway.workers.jobs.no_such_function", ["run_x", 0, 0]),
    "job-nomodule-0": _hash("no_such_module.anything", ["run_x", 0, 0]),
}
"""jobs RQ can name, each malformed in its own way: failed, into RQ's failed registry (their ids are
not parkway's: a parkway job id is judged by the run it names, see
``test_a_parkway_job_id_runs_only_the_activation_it_names``)"""

MALFORMED = {**INVALID_IDS, **MISSING, **FAILED}


def _foreign(directory: Path) -> dict[str | bytes, Stored]:
    """Jobs that would each leave a file in ``directory`` if anything of them ran or was imported."""
    bait = "armour_bait.run"
    return {
        "job-system-0": _hash("os.system", [f"touch {directory / 'system'}"]),
        "job-subprocess-0": _hash("subprocess.call", [["touch", str(directory / "subprocess")]]),
        "job-exec-0": _hash("builtins.exec", [f"open({str(directory / 'exec')!r}, 'w').close()"]),
        "job-import-0": _hash(bait),
        "job-main-0": _hash("__main__.main", [["--version"]]),
        "job-instance-0": _hash(EXECUTE_JOB, ["run_x", 0, 0], instance={"a": 1}),
        "job-callbacks-0": _hash(
            EXECUTE_JOB,
            ["run_x", 0, 0],
            success_callback_name=bait,
            failure_callback_name=bait,
            stopped_callback_name=bait,
        ),
    }


REFUSED = _foreign(Path("/nonexistent"))
"""jobs naming something other than parkway's entrypoint, for tests that only count them"""


def _bait(directory: Path) -> dict[str, str]:
    """Write a module that leaves a file behind when imported and another when called; the
    environment in which a worker can import it."""
    (directory / "armour_bait.py").write_text(
        "from pathlib import Path\n"
        "HERE = Path(__file__).parent\n"
        "(HERE / 'imported').touch()\n"
        "def run(*args, **kwargs):\n"
        "    (HERE / 'called').touch()\n"
    )
    return {"PYTHONPATH": f"{ROOT}{os.pathsep}{directory}"}


@pytest.fixture
def client(redis_client: redis.Redis) -> redis.Redis:
    return redis_client


@pytest.fixture
def workers() -> Iterator[list[Worker]]:
    """`parkway worker` processes the test starts; each is stopped at the end."""
    started: list[Worker] = []
    yield started
    for proc in started:
        family = _descendants(proc.proc.pid) if proc.proc.poll() is None else set()
        if not proc.output.closed:  # not stopped by the test already
            proc.stop()
        # a pool's children must not outlive the test and take the next test's jobs
        try:
            wait_for(lambda family=family: not any(_alive(pid) for pid in family), 10, "the pool's children", 0.1)
        except AssertionError:
            pass
        for pid in family:
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)


def _start(workers: list[Worker], url: str, *extra: str, env: dict[str, str] | None = None) -> Worker:
    proc = Worker(url, SECRET, *extra, env=env)
    workers.append(proc)
    return proc


def _queue(client: redis.Redis) -> Queue:
    return Queue(QUEUE, connection=client, serializer=MsgpackSerializer)


def _failed(client: redis.Redis) -> set[bytes]:
    return set(client.zrange(_queue(client).failed_job_registry.key, 0, -1))


def _queued(client: redis.Redis) -> set[bytes]:
    return set(client.lrange(_queue(client).key, 0, -1))


def _taken(client: redis.Redis) -> set[bytes]:
    """The ids in RQ's intermediate list (taken off the queue by a worker, not started yet)."""
    return set(client.lrange(_queue(client).intermediate_queue_key, 0, -1))


def _ids(*jobs: dict[str | bytes, Stored]) -> set[bytes]:
    return {_bytes(job_id) for group in jobs for job_id in group}


def _registered(client: redis.Redis) -> dict[str, int]:
    """The RQ workers registered on the database: name -> pid."""
    pids = {}
    for key in client.smembers("rq:workers"):
        pid = client.hget(key, "pid")
        if pid is not None:
            pids[key.decode().removeprefix("rq:worker:")] = int(pid)
    return pids


def _completes(pw: Parkway) -> None:
    """A run started after the junk completes, and another parks."""
    done, parked = pw.start(flows.loop, {}), pw.start(flows.two_questions, {})
    assert pw.wait(done, timeout=20).status is RunStatus.COMPLETED
    assert pw.wait(parked, timeout=20).status is RunStatus.WAITING


@pytest.mark.slow
def test_malformed_jobs_are_failed_or_dropped_and_the_worker_goes_on(
    client: redis.Redis, pw: Parkway, redis_url: str, workers: list[Worker]
) -> None:
    """Invalid ids, missing or unreadable hashes, undecodable data, wrong arguments and unknown functions
    pushed onto a running worker's queue are failed or dropped with a log line naming each; the worker
    goes on and a normal run completes."""
    proc = _start(workers, redis_url)
    wait_for(lambda: len(_registered(client)) == 1, 20, "the worker to register")
    _write(client, MALFORMED, _queue(client).key)
    _completes(pw)
    wait_for(lambda: not _queued(client), 10, "the queue to empty")
    assert proc.proc.poll() is None
    assert not _taken(client) & _ids(INVALID_IDS, FAILED)
    assert _failed(client) == _ids(FAILED)
    output = proc.stop()
    assert "unhandled exception" not in output, output[-3000:]
    for shown in [*FAILED, "pw-evil\\n-0", "pw-\\\\xff-0"]:  # as JSON writes them
        assert f'"job_id": "{shown!s}"' in output, (shown, output[-3000:])


@pytest.mark.slow
def test_a_restarted_worker_clears_what_a_dead_one_left_in_the_intermediate_list(
    client: redis.Redis, pw: Parkway, redis_url: str, workers: list[Worker]
) -> None:
    """Malformed and foreign jobs left in RQ's intermediate list (as by a worker that died on them) are
    failed or dropped when the next worker starts, and it goes on to work."""
    _write(client, {**MALFORMED, **REFUSED}, _queue(client).intermediate_queue_key)
    proc = _start(workers, redis_url)
    _completes(pw)
    assert proc.proc.poll() is None
    assert _taken(client) == set()
    assert _failed(client) == _ids(FAILED, REFUSED)


@pytest.mark.slow
def test_a_pool_keeps_its_workers_through_malformed_jobs(
    client: redis.Redis, pw: Parkway, redis_url: str, workers: list[Worker]
) -> None:
    """With ``--workers 2``, malformed and foreign jobs kill no child: the same two work on."""
    proc = _start(workers, redis_url, "--workers", "2")
    wait_for(lambda: len(_registered(client)) == 2, 20, "both children to register")
    children = _registered(client)
    _write(client, {**MALFORMED, **REFUSED}, _queue(client).key)
    _completes(pw)
    wait_for(lambda: not _queued(client), 10, "the queue to empty")
    assert proc.proc.poll() is None
    assert _registered(client) == children
    assert all(_alive(pid) for pid in children.values())
    # a child takes a job off the queue before it fails it: the queue can be empty a moment earlier
    wait_for(lambda: _failed(client) == _ids(FAILED, REFUSED), 10, "every malformed job to be failed")


@pytest.mark.slow
def test_the_worker_runs_only_parkways_entrypoint(
    client: redis.Redis, pw: Parkway, redis_url: str, workers: list[Worker], tmp_path: Path
) -> None:
    """Jobs naming another function, an instance to call it on, or callbacks are failed with a log line
    naming each, and nothing of them is imported or called; the worker goes on."""
    foreign = _foreign(tmp_path)
    proc = _start(workers, redis_url, env=_bait(tmp_path))
    wait_for(lambda: len(_registered(client)) == 1, 20, "the worker to register")
    _write(client, foreign, _queue(client).key)
    _completes(pw)
    wait_for(lambda: not _queued(client), 10, "the queue to empty")
    assert proc.proc.poll() is None
    assert {p.name for p in tmp_path.iterdir()} - {"__pycache__"} == {"armour_bait.py"}
    assert _failed(client) == _ids(foreign)
    assert not _taken(client) & _ids(foreign)
    output = proc.stop()
    assert all(f'"job_id": "{job_id!s}"' in output for job_id in foreign), output[-3000:]


@pytest.mark.slow
def test_a_parkway_job_id_runs_only_the_activation_it_names(
    client: redis.Redis, pw: Parkway, redis_url: str, workers: list[Worker], tmp_path: Path
) -> None:
    """A job whose id is parkway's (``pw-<run>-<fence>``) is run by its id alone: its hash is never
    read, so nothing it names (another function, an instance, callbacks, junk data) is imported or
    called. Ids naming no run, or a fence the run is not at, are dropped and their hashes deleted;
    one naming a real run's current activation runs that activation, whatever its hash says."""
    junk = {
        **{f"pw-{str(k).split('-')[1]}-0": v for k, v in FAILED.items()},
        **{f"pw-{str(k).split('-')[1]}-0": v for k, v in _foreign(tmp_path).items()},
    }
    real = pw.start(flows.loop, {})  # no worker yet: its job waits, and its hash is rewritten
    client.hset(f"rq:job:pw-{real}-0", "data", _hash("os.system", [f"touch {tmp_path / 'real'}"])["data"])
    junk[f"pw-{real}-7"] = _hash("os.system", [f"touch {tmp_path / 'stale'}"])  # a fence it never reaches
    _write(client, junk, _queue(client).key)
    proc = _start(workers, redis_url, env=_bait(tmp_path))
    assert pw.wait(real, timeout=20).status is RunStatus.COMPLETED
    _completes(pw)
    wait_for(lambda: not _queued(client) and not _taken(client), 10, "the queue and the taken list to empty")
    assert proc.proc.poll() is None
    assert {p.name for p in tmp_path.iterdir()} - {"__pycache__"} == {"armour_bait.py"}
    assert not _failed(client)
    assert not any(client.exists(b"rq:job:" + _bytes(job_id)) for job_id in [*junk, f"pw-{real}-0"])
    output = proc.stop()
    assert "Traceback" not in output
    # each naming no run is dropped with a warning that names it (the stale fence quietly)
    assert output.count('"event": "job_for_no_run"') == len(junk) - 1, output[-3000:]


@pytest.mark.slow
def test_pool_children_read_jobs_with_msgpack_never_pickle(
    client: redis.Redis, redis_url: str, workers: list[Worker], tmp_path: Path
) -> None:
    """Pickled payloads in job hashes that RQ's cleanups read (an abandoned job in the started registry,
    a leftover in the intermediate list) are never unpickled by a pool's children (RQ's WorkerPool gives
    them queues with RQ's default serializer, pickle)."""

    class Bait:
        def __reduce__(self) -> tuple[Any, ...]:
            return (os.system, (f"touch {tmp_path / 'unpickled'}",))

    queue = _queue(client)
    bait = {"meta": pickle.dumps(Bait()), "result": pickle.dumps(Bait())}
    _write(client, {"pw-pickle-0": _hash("time.time", **bait)}, queue.intermediate_queue_key)
    client.hset("rq:job:pw-pickle-1", mapping=_hash(EXECUTE_JOB, ["run_x", 0, 0], status="started", **bait))
    client.zadd(queue.started_job_registry.key, {"pw-pickle-1:abandoned": 1})
    _start(workers, redis_url, "--workers", "2")
    unpickled = tmp_path / "unpickled"
    wait_for(lambda: unpickled.exists() or len(_failed(client)) == 2, 10, "both jobs to be failed")
    assert not unpickled.exists()
    assert _failed(client) == {b"pw-pickle-0", b"pw-pickle-1"}


@pytest.mark.slow
@pytest.mark.parametrize("extra", [(), ("--workers", "2")], ids=["single", "pool"])
def test_rqs_cleanups_never_import_the_callbacks_a_job_hash_names(
    client: redis.Redis, redis_url: str, workers: list[Worker], tmp_path: Path, extra: tuple[str, ...]
) -> None:
    """A job hash written by hand into the started registry as abandoned, naming callbacks, is failed by
    RQ's cleanup without its callbacks being imported or called."""
    bait = "armour_bait.run"
    names = {"success_callback_name": bait, "failure_callback_name": bait, "stopped_callback_name": bait}
    client.hset("rq:job:pw-abandoned-0", mapping=_hash(EXECUTE_JOB, ["run_x", 0, 0], status="started", **names))
    client.zadd(_queue(client).started_job_registry.key, {"pw-abandoned-0:execution": 1})
    _start(workers, redis_url, *extra, env=_bait(tmp_path))
    wait_for(lambda: _failed(client) == {b"pw-abandoned-0"}, 10, "the abandoned job to be failed")
    assert {p.name for p in tmp_path.iterdir()} - {"__pycache__"} == {"armour_bait.py"}


def _alive(pid: int) -> bool:
    """Whether the process runs (a zombie waiting for its reaper does not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


def _descendants(pid: int) -> set[int]:
    """Every process below ``pid`` (its children, theirs...), from /proc."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parents[int(entry.name)] = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (FileNotFoundError, ProcessLookupError):
                continue
    found: set[int] = set()
    frontier = {pid}
    while frontier:
        frontier = {child for child, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads process parents from /proc")
def test_pool_children_leave_when_the_pool_process_is_killed(
    client: redis.Redis, redis_url: str, workers: list[Worker]
) -> None:
    """After SIGKILL of ``parkway worker --workers 2``, its children (and theirs) exit within seconds
    instead of working on as orphans beside the pool a supervisor restarts."""
    proc = _start(workers, redis_url, "--workers", "2")
    wait_for(lambda: len(_registered(client)) == 2, 20, "both children to register")
    children = _descendants(proc.proc.pid)
    assert set(_registered(client).values()) <= children
    proc.kill()
    try:
        wait_for(lambda: not any(_alive(pid) for pid in children), 10, "the orphaned children to exit", 0.1)
    finally:
        for pid in children:
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)


@pytest.fixture
def _own_signal_handlers() -> Iterator[None]:
    """An in-process RQ worker installs its stop handlers for good: put pytest's back after."""
    saved = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    yield
    for sig, handler in saved.items():
        signal.signal(sig, handler)


@pytest.mark.usefixtures("_own_signal_handlers")
def test_run_worker_returns_1_when_rqs_loop_quit_on_an_error(
    client: redis.Redis, pw: Parkway, redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``run_worker`` returns 0 when a burst empties the queue and 1 when RQ's loop quit on an
    unexpected exception (RQ logs it and returns normally), for ``parkway worker``'s exit status;
    its settings reach the worker as arguments, not through the environment."""
    monkeypatch.delenv("PARKWAY_REDIS_URL", raising=False)
    environment = dict(os.environ)
    settings = Settings(redis_url=redis_url, secret=SECRET)
    pw.start(flows.loop, {})
    assert run_worker(settings, burst=True) == 0
    assert dict(os.environ) == environment

    def broken(self: ParkwayWorker, job: Job, queue: Queue) -> None:
        raise RuntimeError("a bug in the worker, not in the job")

    pw.start(flows.loop, {})
    monkeypatch.setattr(ParkwayWorker, "execute_job", broken)
    assert run_worker(settings, burst=True) == 1


def test_a_stop_signal_that_lands_in_a_finalizer_is_delivered_again(redis_client: redis.Redis) -> None:
    """A stop signal that interrupts a ``__del__`` (where RQ's StopRequested would be swallowed and the
    stop lost) is not acted on there: the same signal comes again a moment later, outside it."""
    from parkway.workers.rq_internals.worker import TrimmedWorker

    worker = TrimmedWorker([Queue(QUEUE, connection=redis_client)], connection=redis_client)
    came: list[int] = []
    previous = signal.signal(signal.SIGUSR1, lambda signum, frame: came.append(signum))
    raised: list[BaseException] = []

    class Finalized:
        def __del__(self) -> None:
            try:
                worker.request_stop(signal.SIGUSR1, sys._getframe())
            except BaseException as exc:  # noqa: BLE001 - what the handler let out, which __del__ would swallow
                raised.append(exc)

    try:
        Finalized()  # dropped at once: its __del__ runs here
        wait_for(lambda: came, 5, "the signal delivered again")
        assert raised == [] and not worker.ended_as_asked
    finally:
        signal.signal(signal.SIGUSR1, previous)


def test_a_burst_worker_leaves_as_soon_as_its_queue_is_empty(client: redis.Redis, pw: Parkway, redis_url: str) -> None:
    """Leaving does not wait out RQ's listener thread: RQ unsubscribed before stopping it, so the
    reply could wake the thread while it was still told to run, and it slept on in a 60 s read
    until RQ's join gave up a second later (about one stop in seven paid it; five stops here)."""
    import time

    settings = Settings(redis_url=redis_url, secret=SECRET)
    pw.start(flows.loop, {})
    run_worker(settings, burst=True)  # the first run pays for imports and script loading
    took = []
    for _ in range(5):
        pw.start(flows.loop, {})
        began = time.monotonic()
        assert run_worker(settings, burst=True) == 0
        took.append(time.monotonic() - began)
    assert max(took) < 0.8, took


def test_rqs_listener_thread_ends_by_itself_with_no_error(pw: Parkway, redis_url: str) -> None:
    """A stopping worker wakes RQ's listener thread with a message on its channel and leaves the
    pubsub to it: an UNSUBSCRIBE sent on the pubsub's own connection raced the thread's close of it
    (on the in-process Redis: "generator already executing", raised in the thread). Ten embedded
    handles and ten burst workers on Redis: no thread raises, no listener is left behind."""
    import threading

    raised: list[Any] = []
    previous = threading.excepthook
    threading.excepthook = raised.append
    switching = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # threads switch as often as they can: the race shows on a quiet machine too
    try:
        for _ in range(10):
            with Parkway(Settings(secret=SECRET)) as embedded:
                embedded.wait(embedded.start(flows.loop, {}), timeout=10)
        settings = Settings(redis_url=redis_url, secret=SECRET)
        for _ in range(10):
            pw.start(flows.loop, {})
            assert run_worker(settings, burst=True) == 0
    finally:
        threading.excepthook = previous
        sys.setswitchinterval(switching)
    assert [f"{r.thread}: {r.exc_value!r}" for r in raised] == []
    listeners = [t for t in threading.enumerate() if type(t).__name__ == "PubSubWorkerThread" and t.is_alive()]
    assert listeners == []
