"""What a client needs from Settings: the store, the dispatcher, the token key, and, embedded,
the in-process Redis with its worker thread."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import wait
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any, cast

from .adapters.redis.connection.connection import connect
from .adapters.redis.connection.errors import translated
from .adapters.redis.connection.shard_table import check_alone, check_table
from .adapters.redis.connection.token_key import token_key
from .adapters.redis.formats import gates_of
from .adapters.redis.store.store import RedisStore
from .config import Settings
from .runtime import executor, features
from .runtime.errors import ConfigError, StoreUnavailable
from .runtime.logger import get_logger
from .runtime.store import Store
from .workers.jobs import Dispatcher, RQDispatcher

if TYPE_CHECKING:
    from .workers.embedded import Workflows

log = get_logger()


@dataclass
class Backend:
    settings: Settings
    store: Store
    dispatcher: Dispatcher
    options: executor.Options
    workflows: Workflows | None = None
    """embedded only: the workflows this process started runs of, found by reference"""
    stop: Callable[[], None] | None = None
    """embedded only: stops the in-process worker"""

    def close(self) -> None:
        """Stop the in-process worker (embedded), or close this process's connections (Redis)."""
        for gate in gates_of(self.store):
            gate.stop()
        if self.stop is not None:
            self.stop()
        elif hasattr(self.store, "stores"):  # sharded: each shard's connections
            self.store.close()  # type: ignore[attr-defined]
        else:
            with translated():
                self.store.client.close()  # type: ignore[attr-defined]


def build_backend(settings: Settings) -> Backend:
    """The backend ``settings`` ask for: the Redis store and RQ on the server at ``redis_url``, or,
    without one, the same store and RQ's queue on an in-process Redis (embedded mode, DESIGN "One
    path"), worked by parkway's worker on a thread of this process."""
    if settings.redis_url is None:
        return _embedded(settings)
    if settings.shards is not None and len(settings.shards) > 1:
        return _sharded(settings)
    client = connect(settings.redis_url, max_connections=settings.max_connections)
    try:
        dispatcher = RQDispatcher(client, settings)
        # it enqueues what a start or resume calls for, and waits for the replicas settings ask for
        store = RedisStore(client, settings.limits, dispatcher.next_job, settings.acks, settings.lease_ms)
        store.formats.seen = _worker_names(dispatcher)
        secret = token_key(settings.secret, client)
        check_alone(client, settings.shard)
    except BaseException:
        client.close()  # refused (another key, no Redis): the connection goes with the handle that never was
        raise
    options = executor.Options(
        secret=secret, loader=settings.modules.load, lease_ms=settings.lease_ms, extensions=features.extensions()
    )
    return Backend(settings, store, dispatcher, options)


def _sharded(settings: Settings) -> Backend:
    """The backend over ``settings.shards``: one Redis store and RQ dispatcher per shard, each shard
    checked to hold this bucket -> shard table, behind a router (``ShardedStore``)."""
    from .adapters.redis.connection.shards import DeferredShard, ShardedDispatcher, ShardedStore, default_table

    assert settings.shards is not None
    if settings.secret is None:
        raise ConfigError("PARKWAY_SHARDS needs PARKWAY_SECRET: every shard must check tokens with one key")
    table = default_table(len(settings.shards))
    urls = settings.shards
    clients = [connect(url, max_connections=settings.max_connections) for url in urls]

    def build(index: int) -> tuple[Any, Any]:
        """Shard ``index``'s store and dispatcher, once it passed the checks a process makes of
        every shard at connect (its place in the shard table, the token key's fingerprint)."""
        client, shard = clients[index], settings.with_(redis_url=urls[index])
        check_table(client, index, table)
        token_key(settings.secret, client)
        dispatcher = RQDispatcher(client, shard)
        store = RedisStore(client, settings.limits, dispatcher.next_job, shard.acks, shard.lease_ms)
        store.formats.seen = _worker_names(dispatcher)
        return store, dispatcher

    try:
        built = _built(build, len(clients))
    except BaseException:
        for client in clients:
            client.close()
        raise
    # a shard down at start: checked and built by the first call that reaches it
    stores = [pair[0] if pair else DeferredShard(i, clients[i], settings.limits, partial(build, i))
              for i, pair in enumerate(built)]
    dispatchers = [pair[1] if pair else stores[i].dispatcher_view() for i, pair in enumerate(built)]
    secret = settings.secret.encode()  # token_key's, with PARKWAY_SECRET set
    store = ShardedStore(stores, table)
    options = executor.Options(
        secret=secret, loader=settings.modules.load, lease_ms=settings.lease_ms, extensions=features.extensions()
    )
    # its per-run methods are set by rule (shards.py's _ROUTED ...), checked complete at import
    return Backend(settings, cast(Store, store), ShardedDispatcher(store, dispatchers), options)


SHARD_CHECK_S = 1.0
"""how long a process starting over shards waits for each shard's checks before it starts without
the shards that have not answered (each is checked by the first call that reaches it)"""


def _built(build: Callable[[int], tuple[Any, Any]], shards: int) -> list[tuple[Any, Any] | None]:
    """``build(i)`` for every shard at once (daemon threads: one stuck on a shard that is down never
    delays the process's exit), each awaited up to ``SHARD_CHECK_S``: what each built, None for a
    shard that did not answer in time (or raised StoreUnavailable). A check that refuses
    (ConfigError: another shard table or token key) raises; so does StoreUnavailable when no
    shard answered."""
    from .adapters.redis.connection.shards import in_thread

    futures = [in_thread(build, i) for i in range(shards)]
    wait(futures, timeout=SHARD_CHECK_S)
    out: list[tuple[Any, Any] | None] = []
    failure = None
    for future in futures:
        error = future.exception() if future.done() else None
        if error is not None and not isinstance(error, StoreUnavailable):
            raise error
        out.append(future.result() if future.done() and error is None else None)
        failure = error or failure
    if not any(out):
        raise failure or StoreUnavailable(f"no shard of PARKWAY_SHARDS answered within {SHARD_CHECK_S} s")
    return out


def _worker_names(dispatcher: Any) -> Callable[[], list[str]]:
    """The names of the workers RQ registered on ``dispatcher``'s queue: the writers count one that has
    not announced the formats it reads (a version before formats) as a reader of format 1 only."""
    return lambda: [w.name for w in dispatcher.workers()]


def _embedded(settings: Settings) -> Backend:
    from .adapters.redis.connection import embedded as inproc
    from .workers.embedded import EmbeddedDispatcher, WorkerThread, Workflows

    log.warning("embedded_mode", hint="no PARKWAY_REDIS_URL: runs live in this process and nothing survives it")
    server = inproc.server()
    client = inproc.client(server)
    workflows = Workflows(settings.modules)
    options = executor.Options(
        secret=token_key(settings.secret, None),
        loader=workflows.load,
        lease_ms=settings.lease_ms,
        refer=workflows.register,  # a child workflow defined anywhere, even in __main__, as start() allows
        extensions=features.extensions(),
    )
    worker = WorkerThread(server, settings, options)
    dispatcher = EmbeddedDispatcher(client, settings, worker.activity)
    store = RedisStore(client, settings.limits, dispatcher.next_job, None, settings.lease_ms)
    backend = Backend(settings, store, dispatcher, options, workflows, worker.stop)
    worker.start(owner=backend)
    return backend
