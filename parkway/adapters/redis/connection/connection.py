"""The connection to Redis, and the one room for redis-py's internals.

``connect`` builds the client every store and worker uses: each call ends within ``GIVE_UP_S``
when Redis does not answer (``_RetryUntil``), or sooner, inside ``until_first_answer`` (the
``parkway`` command's), while Redis has not answered yet. ``run_script`` is the path every transition takes
(FCALL on a pooled connection, a function the server lacks loaded, with ``WAIT`` for replica
acknowledgements);
``run_commands`` sends a few commands in one round trip (the worker's take-and-begin, the
listings' reads); ``run_script_then`` sends a script with commands whose replies its caller reads
later (a job's last commit with its worker's next dequeue); ``holding`` has both send a job's round
trips over one connection it holds;
``run_plan`` drives a sans-IO read (``layout.Plan``) on a sync client. What they borrow of
redis-py beyond its public calls, and where a test holds it:

- ``Retry._backoff`` and ``Retry._supported_errors``, and ``call_with_retry``'s signature
  (``_RetryUntil``): tests/test_frozen_redis.py;
- ``connection_pool``, ``Connection.send_command``/``read_response``, ``pack_commands``/
  ``send_packed_command``, ``Connection.retry``, ``Connection.encoder`` (``run_script``,
  ``run_commands``): tests/test_storage.py and tests/test_script_calls.py.

Commands are packed by hiredis's ``pack_command`` (``packed``; hiredis comes with
``redis[hiredis]``): a resume's 74 arguments in about 9 us, against about 100 us through
redis-py's packer, which checks and encodes each argument in Python first. What hiredis cannot pack
(an argument of another type) goes to redis-py's packer, which raises its ``DataError`` as before.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, TypeVar

import redis
import redis.exceptions as rex
from hiredis import pack_command
from redis.retry import Retry

from ....runtime.errors import ConfigError
from .. import keys, layout
from ..scripts.scripts import Function
from .backoff import Jitter
from .replicas import ReplicaAcks, ReplicaShortfall
from .sentinel import is_sentinel_url, parse_sentinel_url, pool_kwargs

T = TypeVar("T")


def text(value: Any) -> str:
    """A reply's bytes (or number) as a str."""
    return value.decode() if isinstance(value, bytes) else str(value)


SOCKET_TIMEOUT_S = 5.0
"""longest wait for one reply, or one send; above read_events' longest XREAD BLOCK (1 s) and a
waiting listing's (``parkway.client.listings.PAUSE_WAIT_SLICE_MS``, 4 s)"""


CONNECT_TIMEOUT_S = 2.0
"""longest wait for a TCP connection (at most SOCKET_TIMEOUT_S: no attempt waits longer than that)"""


GIVE_UP_S = 15.0
"""a call on ``connect()``'s client ends within this many seconds when Redis does not answer"""


_deadline: ContextVar[float | None] = ContextVar("parkway_redis_deadline", default=None)


class _FirstAnswer:
    """A bound for calls to a Redis that has not answered yet (``until_first_answer``)."""

    def __init__(self, give_up_s: float) -> None:
        self.give_up_s = give_up_s
        self.answered = False


_first_answer: ContextVar[_FirstAnswer | None] = ContextVar("parkway_redis_first_answer", default=None)


@contextmanager
def until_first_answer(give_up_s: float) -> Iterator[None]:
    """Inside this block, until some call gets Redis's answer, a call ends within ``give_up_s``
    instead of ``GIVE_UP_S`` (below ``SOCKET_TIMEOUT_S``: after its first failed attempt, not
    retried); once one call got an answer, calls retry as ever. The ``parkway`` command's way: a
    Redis that is down when a command starts is reported at once, while one that goes away in the
    middle of a long command (a worker, a follow) is waited for. Tasks and contexts copied inside
    the block share it; threads started inside keep the usual bound."""
    token = _first_answer.set(_FirstAnswer(give_up_s))
    try:
        yield
    finally:
        _first_answer.reset(token)


class _RetryUntil(Retry):
    """redis-py's Retry, bounded by time rather than by count.

    A failed attempt is retried, after a backoff (0.1 s doubling to 1 s, jittered), only while
    one more attempt can end within ``GIVE_UP_S`` of the call's start (or the bound
    ``until_first_answer`` sets, while Redis has not answered). redis-py nests retries
    (a command's retry reconnects, connecting retries the socket connect, a health check
    retries its PING): the nested ones share the outermost one's deadline, so they cannot
    multiply it. It overrides ``call_with_retry`` (redis-py 8's signature) and reads the base
    class's ``_backoff`` and ``_supported_errors``; tests/test_frozen_redis.py fails if they change.
    """

    def __init__(self) -> None:
        super().__init__(Jitter(cap=1.0, base=0.1), retries=-1)

    def call_with_retry(
        self,
        do: Callable[[], T],
        fail: Callable[..., Any],
        is_retryable: Callable[[Exception], bool] | None = None,
        with_failure_count: bool = False,
    ) -> T:
        outer = _deadline.get()
        first = _first_answer.get() if outer is None else None
        if first is not None and first.answered:
            first = None
        deadline = time.monotonic() + (GIVE_UP_S if first is None else first.give_up_s) if outer is None else outer
        token = _deadline.set(deadline) if outer is None else None
        try:
            self._backoff.reset()  # type: ignore[no-untyped-call]
            failures = 0
            while True:
                try:
                    reply = do()
                    if first is not None:
                        first.answered = True
                    return reply
                except self._supported_errors as error:
                    if is_retryable is not None and not is_retryable(error):
                        raise
                    failures += 1
                    if with_failure_count:
                        fail(error, failures)
                    else:
                        fail(error)
                    pause = self._backoff.compute(failures)
                    if time.monotonic() + pause + SOCKET_TIMEOUT_S > deadline:
                        raise
                    time.sleep(pause)
        finally:
            if token is not None:
                _deadline.reset(token)


@contextmanager
def one_bound(seconds: float = GIVE_UP_S) -> Iterator[None]:
    """Inside this block, the calls made share one bound of ``seconds`` from its start, as the
    attempts of one call do (``_RetryUntil``): a call sent again on another path after a first
    try (``RedisStore._run_then``) ends within the bound the first alone would have had. With
    ``seconds=0`` a call is tried once (no attempt after a failure could end within it)."""
    if _deadline.get() is not None:
        yield
        return
    token = _deadline.set(time.monotonic() + seconds)
    try:
        yield
    finally:
        _deadline.reset(token)


class _Held:
    """The pool, the connection of it that ``holding`` holds, the thread that holds it (a context
    copied into another thread, as ``asyncio.to_thread`` copies it, never shares the connection), and
    the commands waiting to ride its next round trip (``ride``)."""

    __slots__ = ("pool", "conn", "thread", "rides")

    def __init__(self, pool: Any, conn: Any) -> None:
        self.pool, self.conn, self.thread = pool, conn, threading.get_ident()
        self.rides: list[tuple[Any, ...]] = []


_held: ContextVar[_Held | None] = ContextVar("parkway_redis_held", default=None)
"""what ``holding`` holds in this context, if anything"""


@contextmanager
def holding(client: redis.Redis) -> Iterator[None]:
    """Inside this block, ``run_script`` and ``run_commands`` on ``client`` (in this thread or task)
    go over one connection of its pool, taken when the block starts and given back when it ends:
    the pool's hand-out and return (its check of the socket, its bookkeeping: about 20 us a round
    trip) run once for a job's round trips. A connection dropped on a failed attempt reconnects at
    its next command, as one the pool hands out would. Any other thread takes its own from the pool.
    Commands left to ``ride`` that no round trip took are sent when the block ends."""
    pool = client.connection_pool
    held = _Held(pool, pool.get_connection())
    token = _held.set(held)
    try:
        yield
    finally:
        try:
            if held.rides:
                run_commands(client, [])  # their own round trip: nothing else went
        except (rex.ConnectionError, rex.TimeoutError):
            pass  # Redis away: what they clean up is recovered without them (a worker's lease lapses)
        finally:
            _held.reset(token)
            pool.release(held.conn)


def ride(commands: Sequence[tuple[Any, ...]]) -> None:
    """Send ``commands`` ahead of the next round trip (``run_script``, ``run_commands``) on the
    connection ``holding`` holds in this thread, their replies read and dropped (an error reply
    too: they are writes that change nothing when they find nothing, as a worker's LREM and EXPIRE
    after a job it took); at the latest when the block ends. Outside such a block: sent now."""
    held = _held.get()
    if held is None or held.thread != threading.get_ident():
        raise RuntimeError("ride() needs a connection held by holding() in this thread")
    held.rides.extend(commands)


def take_rides(client: redis.Redis) -> list[tuple[Any, ...]]:
    """The commands left to ``ride`` on the connection this thread holds of ``client``'s pool (none
    if it holds none), taken: for a caller that sends them ahead of its own command on another
    connection to the same server (``run_script_then``)."""
    held = _held.get()
    if held is None or held.pool is not client.connection_pool or held.thread != threading.get_ident():
        return []
    rides, held.rides = held.rides, []
    return rides


class _Borrowed:
    """A connection for one call on ``client`` (``with _Borrowed(client) as conn``): the one ``holding``
    holds in this thread, else one its pool hands out and takes back when the call ends. A call that
    raises anything but Redis's own error reply drops the connection (its reply may be half read);
    a held one reconnects at its next command, as one the pool hands out would. A class, not a
    generator: it runs on every round trip."""

    __slots__ = ("pool", "conn", "handed", "rides")

    def __init__(self, client: redis.Redis) -> None:
        self.pool = client.connection_pool
        held = _held.get()
        self.handed = held is None or held.pool is not self.pool or held.thread != threading.get_ident()
        self.rides: list[tuple[Any, ...]] = []
        if self.handed:
            self.conn: Any = self.pool.get_connection()
        else:
            assert held is not None
            self.conn, self.rides, held.rides = held.conn, held.rides, self.rides

    def __enter__(self) -> Any:
        return self.conn

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: Any) -> None:
        try:
            if kind is not None and not issubclass(kind, rex.ResponseError):
                self.conn.disconnect()
        finally:
            if self.handed:
                self.pool.release(self.conn)


def run_plan(client: redis.Redis, plan: layout.Plan[T]) -> T:
    """What ``plan`` returns, each of its round trips sent as one pipeline on ``client``."""
    try:
        commands = next(plan)
        while True:
            pipe: Any = client.pipeline(transaction=False)
            for command in commands:
                pipe.execute_command(*command)
            commands = plan.send(pipe.execute())
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]


def run_script(
    client: redis.Redis, function: Function, keys_: Sequence[Any], args: Sequence[Any], acks: ReplicaAcks | None = None
) -> Any:
    """``function`` (a script as a library of one function: :class:`.scripts.Function`) run on
    ``keys_`` and ``args``: its FCALL sent on a connection of the client's pool (the one
    ``holding`` holds, if any) and its reply read, on the one path every transition takes.

    What redis-py's own call (``execute_command``) does around a command, this does too: the
    connection's retry (``_RetryUntil`` from ``connect``) retries a failed attempt after dropping the
    connection, and a function the server does not know (a new server, one restarted without its
    data, or FUNCTION FLUSH) is loaded (``_load``) and called again. What it leaves out (event
    dispatch, metrics hooks, response callbacks: FCALL has none) is Python that every transition
    paid for nothing. A connection whose reply may be half read (anything raised but Redis's own
    error reply) is dropped, never reused. Reads the public ``connection_pool``,
    ``Connection.send_command``/``read_response``, ``Connection.pack_commands``/
    ``send_packed_command`` and ``Connection.retry``: tests/test_storage.py holds them.

    With ``acks``, the FCALL is followed in the same round trip by ``WAIT`` (see :mod:`.replicas`):
    fewer replicas than asked acknowledging it drops the connection and raises ``ReplicaShortfall``
    (``translated`` makes it ``StoreUnavailable``), never retried here: the script may have run."""
    fcall = ("FCALL", function.name, len(keys_), *keys_, *args)
    with (borrowed := _Borrowed(client)) as conn:
        rides = borrowed.rides

        def attempt() -> Any:
            try:
                return _send(conn, fcall, acks, rides)
            except rex.ResponseError as exc:
                if not function_missing(exc):
                    needs = _needs_functions(exc)
                    if needs is not None:
                        raise needs from exc
                    raise
                _load(conn, function)
                return _send(conn, fcall, acks)

        return conn.retry.call_with_retry(attempt, lambda error: conn.disconnect())


def function_missing(reply: Any) -> bool:
    """Whether ``reply`` is Redis's refusal of an FCALL of a function it does not hold (nothing ran)."""
    return isinstance(reply, rex.ResponseError) and str(reply).removeprefix("ERR ").startswith("Function not found")


def _needs_functions(refused: rex.ResponseError) -> rex.ResponseError | None:
    """For a server that knows no FCALL or FUNCTION (Redis before 7.0), an error that says what
    parkway needs; else None."""
    if "unknown command" not in str(refused).lower():
        return None
    return rex.ResponseError(f"parkway needs Redis 7.0 or newer (its scripts are Redis functions): {refused}")


def require_functions(client: redis.Redis) -> None:
    """Raise ConfigError unless ``client``'s server runs functions (Redis 7.0+: FUNCTION, FCALL),
    which every transition is: for a process that serves a queue (``parkway worker``), which would
    otherwise take jobs it cannot begin and fail each one. One round trip."""
    (reply,) = run_commands(client, [("FUNCTION", "LIST", "LIBRARYNAME", "pw_")])
    if isinstance(reply, rex.ResponseError):
        needs = _needs_functions(reply)
        if needs is None:
            raise reply
        raise ConfigError(str(needs)) from reply


def load_function(client: redis.Redis, function: Function) -> None:
    """``function``'s library loaded on ``client``'s server, for calls a caller queues itself (a
    pipeline's); ``run_script`` loads what it calls when Redis lacks it."""
    with _Borrowed(client) as conn:
        conn.retry.call_with_retry(lambda: _load(conn, function), lambda error: conn.disconnect())


def _load(conn: Any, function: Function) -> None:
    """``function``'s library loaded on ``conn``'s server (``FUNCTION LOAD``), and when, in
    ``keys.functions``; one another process loaded first (the same name: the same text) is left as
    it is. A server without functions (Redis before 7.0) is refused in words that say so."""
    conn.send_command("FUNCTION", "LOAD", function.text)
    try:
        conn.read_response()
    except rex.ResponseError as exc:
        needs = _needs_functions(exc)
        if needs is not None:
            raise needs from exc
        if "already exists" not in str(exc):
            raise
    # when it was last loaded: the reconciler deletes another version's library none loaded for a day
    conn.send_command("HSET", keys.functions(), function.name, int(time.time() * 1000))
    conn.read_response()


def packed(conn: Any, commands: Sequence[tuple[Any, ...]]) -> list[bytes]:
    """``commands`` in Redis's protocol, as one buffer for ``conn.send_packed_command``: by hiredis
    (in C) when it can, else by the connection's own packer (redis-py's ``DataError`` for an
    argument neither packs). hiredis encodes text as UTF-8, strictly: only for a connection whose
    encoder does the same (redis-py's default)."""
    encoder = conn.encoder
    if encoder.encoding == "utf-8" and encoder.encoding_errors == "strict":
        try:
            return [b"".join([pack_command(command) for command in commands])]
        except TypeError:
            pass  # an argument it does not pack (None, a bool...): redis-py's packer says which
    return conn.pack_commands(commands)  # type: ignore[no-any-return]


def run_commands(client: redis.Redis, commands: Sequence[tuple[Any, ...]]) -> list[Any]:
    """The replies of ``commands``, sent in one round trip on a connection of ``client``'s pool (the
    one ``holding`` holds, if any): what a non-transactional pipeline's
    ``execute(raise_on_error=False)`` returns (an error reply is its ``ResponseError``, in its
    place), without the pipeline's Python around each command (its
    command stack, response callbacks: replies come as Redis sends them, an integer for
    ``EXPIRE``). A failed attempt is retried on a new connection, as the pipeline's is (the
    connection's ``retry``); a connection whose replies may be half read is dropped."""
    with (borrowed := _Borrowed(client)) as conn:
        sent = [*borrowed.rides, *commands]

        def attempt() -> list[Any]:
            conn.send_packed_command(packed(conn, sent))
            replies: list[Any] = []
            for _ in sent:
                try:
                    replies.append(conn.read_response())
                except rex.ResponseError as exc:  # the replies after it follow on the wire all the same
                    replies.append(exc)
            return replies[len(sent) - len(commands) :]

        return conn.retry.call_with_retry(attempt, lambda error: conn.disconnect())  # type: ignore[no-any-return]


def _send(conn: Any, command: tuple[Any, ...], acks: ReplicaAcks | None, rides: Sequence[tuple[Any, ...]] = ()) -> Any:
    """``command``'s reply; with ``acks``, sent with its ``WAIT`` and checked against it; ``rides``
    (``ride``) sent ahead of it, their replies dropped."""
    if acks is None:
        conn.send_packed_command(packed(conn, (*rides, command)))
        _drop_replies(conn, len(rides))
        return conn.read_response()
    sent = time.monotonic()
    conn.send_packed_command(packed(conn, (*rides, command, ("WAIT", acks.replicas, acks.timeout_ms))))
    _drop_replies(conn, len(rides))
    refused: rex.ResponseError | None = None
    try:
        reply = conn.read_response()
    except rex.ResponseError as exc:  # WAIT's reply follows it on the wire all the same
        refused = exc
    acknowledged = conn.read_response()
    if refused is not None:
        raise refused
    shortfall = acks.shortfall(int(acknowledged), (time.monotonic() - sent) * 1000)
    if shortfall is not None:
        raise ReplicaShortfall(shortfall)
    return reply


def run_script_then(
    conn: Any,
    function: Function,
    keys_: Sequence[Any],
    args: Sequence[Any],
    acks: ReplicaAcks | None,
    then: Sequence[tuple[Any, ...]],
    sent: Callable[[], None],
    before: Sequence[tuple[Any, ...]] = (),
) -> Any:
    """``function``'s reply, its FCALL (and ``WAIT``, with ``acks``) sent on ``conn`` in one write
    with the commands ``then`` after it, whose replies the caller reads later (a worker's blocking
    dequeue, which Redis answers when a job comes; the script's reply it sends at once); ``sent``
    is called once that write is made, and not if it is not. The
    script's reply is read here within ``SOCKET_TIMEOUT_S`` (``conn``'s own timeout may be the
    dequeue's), and checked as ``run_script`` checks it: Redis's error reply raised as it is
    (``function_missing`` among them: nothing ran, and the caller calls again on its own path),
    a shortfall of ``acks`` as ``ReplicaShortfall``; after either, ``then``'s reply still follows on
    ``conn``. Anything else raised (a lost or silent connection) leaves ``conn`` dropped by
    redis-py, ``then`` with it. Not retried here: the caller's own path retries. Reads
    ``Connection.read_response``'s ``timeout`` (tests/test_storage.py). ``before``: commands left to
    ``ride`` (``take_rides``), sent ahead of the FCALL, their replies read and dropped."""
    fcall = ("FCALL", function.name, len(keys_), *keys_, *args)
    waits = () if acks is None else (("WAIT", acks.replicas, acks.timeout_ms),)
    began = time.monotonic()
    conn.send_packed_command(packed(conn, (*before, fcall, *waits, *then)))
    sent()
    refused: rex.ResponseError | None = None
    try:
        _drop_replies(conn, len(before))
        try:
            reply = conn.read_response(timeout=SOCKET_TIMEOUT_S)
        except rex.ResponseError as exc:  # the replies after it follow on the wire all the same
            refused = exc
        acknowledged = None if acks is None else conn.read_response(timeout=SOCKET_TIMEOUT_S)
    except BaseException:
        conn.disconnect()  # (redis-py's own read does too) a reply may be left unread: ``then`` goes with it
        raise
    if refused is not None:
        raise refused
    if acks is not None:
        shortfall = acks.shortfall(int(acknowledged), (time.monotonic() - began) * 1000)  # type: ignore[arg-type]
        if shortfall is not None:
            raise ReplicaShortfall(shortfall)
    return reply
def _drop_replies(conn: Any, n: int) -> None:
    """Read and drop ``n`` replies (an error reply too) from ``conn``."""
    for _ in range(n):
        try:
            conn.read_response()
        except rex.ResponseError:
            pass


def connect(url: str, *, max_connections: int | None = None) -> redis.Redis:
    """A client each of whose calls ends within ``GIVE_UP_S`` (15 s) when Redis does not answer.
    ``url`` is a Redis URL, or a ``redis+sentinel://`` string: the client then follows the master
    the sentinels name, asking them again at every (re)connect (:mod:`.sentinel`).

    That holds whether Redis is down (connection refused), unreachable (no route, or no answer
    to the connect) or frozen (the kernel accepts the connection, nothing ever replies): an
    attempt waits at most 5 s for a reply (2 s to connect), and a failed one is retried with
    backoff only while another can still end within 15 s of the first (``_RetryUntil``). So a
    refused connection is retried for about 10 s (a Redis restart that takes less goes
    unnoticed) and a frozen Redis raises after about 10 s (two attempts of 5 s); the error is
    redis-py's ConnectionError or TimeoutError, which ``translated`` turns into
    ``StoreUnavailable``. A parkway call that makes several round trips raises at the first
    one left unanswered, so it too ends within 15 s of Redis going silent.

    No health-check PING (``health_check_interval``): the pool already notices a connection the
    server closed when it hands it out, and one that died silently fails its command and is
    retried like any failed attempt; the PING would only add a round trip and a third nested
    retry.

    RQ's worker raises its own connection's socket timeout above its blocking dequeue (BLMOVE,
    up to ``worker_ttl`` - 15 s), so the worker's job loop waits longer than this bound; the
    worker's store, and with it the maintenance thread, has a client of its own.

    ``max_connections`` makes the pool a fixed one of at most that many connections, which a
    thread waits for (up to ``SOCKET_TIMEOUT_S``) when all are busy: a server's burst of requests
    then leaves no more connections open than that (None: as many as threads use at once, kept).
    """
    options: dict[str, Any] = dict(
        socket_timeout=SOCKET_TIMEOUT_S,
        socket_connect_timeout=CONNECT_TIMEOUT_S,
        health_check_interval=0,
        retry=_RetryUntil(),
    )
    if is_sentinel_url(url):
        options.update(pool_kwargs(parse_sentinel_url(url)))
        if max_connections is None:
            return redis.Redis(connection_pool=redis.ConnectionPool(**options))
        blocking = redis.BlockingConnectionPool(max_connections=max_connections, timeout=SOCKET_TIMEOUT_S, **options)  # type: ignore[no-untyped-call]
        return redis.Redis(connection_pool=blocking)
    if max_connections is None:
        return redis.Redis.from_url(url, **options)
    pool = redis.BlockingConnectionPool.from_url(url, max_connections=max_connections, timeout=SOCKET_TIMEOUT_S,
                                                 **options)
    return redis.Redis(connection_pool=pool)
