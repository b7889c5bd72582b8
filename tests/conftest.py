"""Fixtures: a real Redis (never flushed beyond its test database) and one harness per store."""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TypeVar
from urllib.parse import urlsplit, urlunsplit

import pytest
import redis
from rq import Queue

from parkway import Parkway, Settings
from parkway.adapters.redis.store.store import RedisStore
from parkway.workers import jobs
from parkway.workers.serializer import MsgpackSerializer
from parkway.workers.worker import ParkwayWorker
from tests.procs import RedisServer

T = TypeVar("T")
C = TypeVar("C", bound="SupportsClose")


class SupportsClose(Protocol):
    def close(self) -> None: ...


class Closing(Protocol):
    """What the ``closing`` fixture gives: returns what it is passed, closed after the test."""

    def __call__(self, thing: C, /) -> C: ...


def all_at_once(call: Callable[[int], T], n: int = 20) -> list[T]:
    """``call(i)`` for i in range(n) from n threads released together (a barrier); the results."""
    barrier = threading.Barrier(n)
    results: list[T] = []
    lock = threading.Lock()

    def run(i: int) -> None:
        barrier.wait()
        result = call(i)
        with lock:
            results.append(result)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results


BASE_REDIS_URL = os.environ.get("PARKWAY_TEST_REDIS_URL", "redis://127.0.0.1:6379/15")
SECRET = "test-secret-" + "x" * 32


def worker_redis_url(base: str, worker: str | None) -> str:
    """The Redis database a pytest-xdist worker owns: the base URL's database (15 by default)
    without xdist and for worker gw0, one less for each next worker (gw1 -> 14, gw2 -> 13...), so
    workers never empty or read each other's keys."""
    parts = urlsplit(base)
    db = int(parts.path.strip("/") or 0)
    index = int(worker.removeprefix("gw")) if worker and worker.startswith("gw") else 0
    if db - index < 0:
        raise pytest.UsageError(
            f"xdist worker {worker} would need database {db - index} below {base}: run fewer workers "
            f"(-n) or point PARKWAY_TEST_REDIS_URL at a higher database"
        )
    return urlunsplit(parts._replace(path=f"/{db - index}"))


WORKERS_PER_CORE = 2
"""most of the suite's time is spent waiting (on processes starting, servers answering, TTLs, the
bounded retries of an unreachable Redis), not computing: two workers per core keep the cores busy"""


@pytest.hookimpl(tryfirst=True)
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    """``-n auto`` (pyproject's addopts): two workers per core, at most one per database from the
    URL's down to 0 (``worker_redis_url``). A run naming only test files or test ids runs in this
    process: starting workers (each importing everything) would cost it more than it saves; ``-n 4``
    spreads them all the same. PYTEST_XDIST_AUTO_NUM_WORKERS still says how many, as in xdist."""
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return None  # xdist's own hook reads it
    named = config.args_source is pytest.Config.ArgsSource.ARGS
    if named and all(arg.split("::")[0].endswith(".py") for arg in config.args):
        return 0
    databases = int(urlsplit(BASE_REDIS_URL).path.strip("/") or 0) + 1
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return max(1, min(WORKERS_PER_CORE * cores, databases))


@pytest.fixture(scope="session")
def redis_url() -> str:
    """This test process's own database on the test Redis (see ``worker_redis_url``): every test
    that needs the shared Redis takes its URL from here, never from the environment."""
    url = worker_redis_url(BASE_REDIS_URL, os.environ.get("PYTEST_XDIST_WORKER"))
    client = redis.Redis.from_url(url)
    try:
        client.ping()
    except redis.ConnectionError as exc:  # pragma: no cover - CI starts one
        pytest.fail(f"tests need a Redis at {url} (set PARKWAY_TEST_REDIS_URL): {exc}")
    finally:
        client.close()
    return url


@pytest.fixture
def closing() -> Iterator[Closing]:
    """``closing(client)`` returns the client and closes it after the test: a Parkway, a Redis
    client, a store's connection... (pytest turns a socket left to the garbage collector into an error)."""
    with contextlib.ExitStack() as stack:
        def close_after(thing: C) -> C:
            return stack.enter_context(contextlib.closing(thing))

        yield close_after


@pytest.fixture
def redis_client(redis_url: str) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(redis_url)
    client.flushdb()
    yield client
    client.close()


@pytest.fixture
def pw(redis_client: redis.Redis, redis_url: str) -> Iterator[Parkway]:
    """A client on this test's emptied database (``redis_client`` empties it), closed after the test."""
    with Parkway(Settings(redis_url=redis_url, secret=SECRET)) as client:
        yield client


@dataclass
class Harness:
    """A client plus a way to run every queued job to completion (with parkway's worker, as production)."""

    kind: str
    pw: Parkway
    settings: Settings
    connection: redis.Redis | None = None

    def run_jobs(self) -> None:
        if self.connection is None:
            self.pw.drain()
            return
        rt = jobs.install(self.settings)
        queue = Queue(self.settings.queue, connection=self.connection, serializer=MsgpackSerializer)
        worker = ParkwayWorker([queue], connection=self.connection, runtime=rt)
        # the reconciler is left out: tests that want it call it, so what a test sees is what its jobs did
        worker.work(burst=True, logging_level="WARNING", with_maintenance=False)

    @property
    def manual_store(self) -> RedisStore:
        """The client's store without the job hand-off: its starts and resumes enqueue no job, for
        tests that run jobs by hand (or check that the reconciler finds them)."""
        store = self.pw.store
        assert isinstance(store, RedisStore)
        return RedisStore(store.client, store.limits)

    def start_and_run(self, workflow: Any, data: dict[str, Any] | None = None, **kw: Any) -> str:
        run_id = self.pw.start(workflow, data or {}, **kw)
        self.run_jobs()
        return run_id

    def interrupt_event(self, run_id: str) -> dict[str, Any]:
        """The run's latest interrupt event (it carries the token even after the interrupt expired)."""
        events = [e for e in self.pw.stream(run_id, until="settled", timeout=10) if e.type == "interrupt"]
        return dict(events[-1].data)

    def token(self, run_id: str) -> str:
        page = self.pw.list_interrupts(run_id=run_id, include_tokens=True)
        assert len(page.items) == 1, f"run {run_id} has {len(page.items)} pending interrupts"
        token = page.items[0].resume_token
        assert token is not None
        return token


@pytest.fixture(params=["embedded", "redis"])
def harness(request: pytest.FixtureRequest) -> Iterator[Harness]:
    """The conformance suite runs once embedded (the same store and worker, on an in-process Redis)
    and once on real Redis."""
    if request.param == "embedded":
        settings = Settings(secret=SECRET)
        with Parkway(settings) as pw:
            yield Harness("embedded", pw, settings)
        return
    client = request.getfixturevalue("redis_client")
    settings = Settings(redis_url=request.getfixturevalue("redis_url"), secret=SECRET)
    with Parkway(settings) as pw:  # closed after the test: no socket left for the GC to warn about
        yield Harness("redis", pw, settings, client)


@pytest.fixture(autouse=True)
def _reset_effects() -> None:
    from tests import flows

    flows.effects.clear()
    flows.drift["kind"] = "choice"


@pytest.fixture(autouse=True, scope="session")
def _worker_runtime_closed() -> Iterator[None]:
    """The runtime the tests' burst workers install (jobs.install) is closed at the end, not left to
    the interpreter's exit (where its socket would be reported unclosed)."""
    yield
    jobs.uninstall()


@pytest.fixture(autouse=True, scope="session")
def _no_process_left_running() -> Iterator[None]:
    """A process a test started and never ended (a server whose start timed out, a worker) is ended
    with the session: left running, a worker would take the jobs of later runs' tests on its
    database. Linux lists a process's children in /proc; elsewhere this does nothing."""
    yield
    for listing in Path(f"/proc/{os.getpid()}/task").glob("*/children"):
        for pid in listing.read_text().split():
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pid), signal.SIGTERM)


@pytest.fixture(autouse=True, scope="session")
def _quiet_logs() -> Iterator[None]:
    """Every level is logged (so capture_logs sees it) into /dev/null (so test output stays clean)."""
    from parkway import logs

    with open(os.devnull, "w") as sink:
        logs.configure("DEBUG", json=True, file=sink)
        yield


@pytest.fixture(autouse=True)
def _logging_put_back(_quiet_logs: None) -> Iterator[None]:
    """Whatever a test does to structlog's configuration (a command's ``main`` run in this process
    configures it, maybe at its first line, to the stream of the moment: capsys' is closed after the
    test) is undone after it, so no later test of this worker logs into a closed stream."""
    import structlog

    from parkway.runtime.logger import configure_at_first_line

    kept = structlog.get_config()
    yield
    configure_at_first_line(None)
    structlog.configure(**kept)


@pytest.fixture
def api_server(redis_url: str, redis_client: redis.Redis) -> Iterator[Any]:
    """The HTTP API in a process of its own (``tests.test_api.Server``), with a worker process."""
    from tests.procs import Worker
    from tests.test_api import Server

    srv, worker = Server(redis_url), Worker(redis_url, SECRET)
    try:
        yield srv
    finally:
        worker.stop()
        srv.stop()


@pytest.fixture
def private_redis(tmp_path: Path) -> Iterator[RedisServer]:
    """A redis-server of the test's own (AOF on), for tests that kill, restart or persist it."""
    srv = RedisServer(tmp_path)
    srv.start()
    try:
        yield srv
    finally:
        srv.stop()


@pytest.fixture
def two(tmp_path: Path) -> Iterator[tuple[RedisServer, RedisServer]]:
    """Two redis-servers of the test's own (the shard tests' primaries), stopped after it."""
    servers = []
    for i in range(2):
        (tmp_path / f"s{i}").mkdir()
        srv = RedisServer(tmp_path / f"s{i}", appendonly=False)
        srv.start()
        servers.append(srv)
    try:
        yield servers[0], servers[1]
    finally:
        for srv in servers:
            srv.stop()


def format_2_reader(pw: Parkway, client: redis.Redis) -> None:
    """A live process that reads no format 3 (a worker of the version before it) announces itself, and
    ``pw``'s writers decide again: a resume then enqueues the job itself, never an attempt it began
    (format 3: tests/test_begun_resume.py)."""
    from parkway.adapters.redis import formats, keys
    from parkway.runtime.clock import now_ms

    client.hset(keys.readers(), "format-2-worker", formats.announcement((1, 2), "worker", now_ms() + 60_000))
    assert pw.store.formats.refresh().writes == 2  # type: ignore[attr-defined]
