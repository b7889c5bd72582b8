"""Redis under Sentinel: the ``redis+sentinel://`` form, and connections that follow the master.

A Sentinel deployment is named by one string, accepted wherever a Redis URL is::

    redis+sentinel://[user:password@]host1:port1,host2:port2/<master>[/<db>][?sentinel_password=...]

The user and password are the master's (the data's); ``sentinel_password`` (and
``sentinel_username``) are the sentinels' own, when they ask for one.

Every connection asks the sentinels where the master is each time it opens a socket, first or
again after any failure: :class:`MasterConnection` overrides the one method every (re)connect
goes through (``_connect``). It asks every sentinel and follows the newest configuration
(:func:`discover`): one that missed a failover would name the old master. redis-py's own
``SentinelManagedConnection`` asks only in ``connect()``, which a command's retry bypasses (it
reconnects through ``connect_check_health``), so after a failover its retry dials the old primary's address again
(redis-py issue #3874): a stall until its retries run out, or, if the old primary came back
empty on the same port, reads of an empty database. A connection refuses a server that says it
is not a master (``ROLE``), and turns a reply that says its server was demoted under it
(``READONLY``, or ``UNBLOCKED`` for a blocking read: :func:`demoted`) into a connection error, so
the call is retried on the new master: a worker waiting for jobs through ``parkway failover`` waits
on, there.

Everything a connection needs to find the master travels in its keyword arguments, so RQ's
WorkerPool, which rebuilds its children's connections from the parent pool's class and
keyword arguments (``rq.connections.parse_connection``), gives them connections that follow
the master too; the sentinels' own connections are kept per process, never shared across a fork.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

import redis
import redis.exceptions as rex
from redis.backoff import NoBackoff
from redis.retry import Retry
from redis.sentinel import MasterNotFoundError, Sentinel

SCHEME = "redis+sentinel://"
SENTINEL_TIMEOUT_S = 0.5
"""longest wait for one sentinel's answer (or connect): a frozen or unreachable one costs this once,
then is passed over (``SILENT_S``); a dead one (its port refuses) costs nothing"""
IDLE_RECHECK_S = 1.0
"""a connection that sent nothing for this long asks the sentinels again before its next command
(a failover takes longer than this: sentinels wait ``down-after-milliseconds`` first)"""
SILENT_S = 10.0
"""a sentinel that left a question unanswered within ``SENTINEL_TIMEOUT_S`` is passed over while
another answers, then, after this long, probed (``PING``) on a thread of its own, off every caller's
path, and asked again once it answers"""


class SentinelUrlError(ValueError):
    """A ``redis+sentinel://`` string that does not name sentinels and a master."""


@dataclass(frozen=True)
class SentinelSpec:
    """What a ``redis+sentinel://`` string names."""

    sentinels: tuple[tuple[str, int], ...]
    master: str
    db: int = 0
    username: str | None = None
    password: str | None = None
    sentinel_username: str | None = None
    sentinel_password: str | None = None

    def url(self) -> str:
        """This spec as one ``redis+sentinel://`` string (passwords percent-encoded)."""
        from urllib.parse import quote, urlencode

        auth = ""
        if self.password is not None or self.username is not None:
            auth = f"{quote(self.username or '', safe='')}:{quote(self.password or '', safe='')}@"
        hosts = ",".join(f"{h}:{p}" for h, p in self.sentinels)
        query = {k: v for k, v in (("sentinel_username", self.sentinel_username),
                                   ("sentinel_password", self.sentinel_password)) if v is not None}
        tail = f"?{urlencode(query)}" if query else ""
        return f"{SCHEME}{auth}{hosts}/{quote(self.master, safe='')}/{self.db}{tail}"


def is_sentinel_url(url: str) -> bool:
    return url.startswith(SCHEME)


def parse_sentinel_url(url: str) -> SentinelSpec:
    """The sentinels, master name, database and passwords of a ``redis+sentinel://`` string."""
    if not is_sentinel_url(url):
        raise SentinelUrlError(f"a Sentinel URL starts with {SCHEME}")
    parts = urlsplit(url)
    netloc = parts.netloc
    username = password = None
    if "@" in netloc:
        auth, netloc = netloc.rsplit("@", 1)
        user, _, pw = auth.partition(":")
        username, password = unquote(user) or None, unquote(pw) if pw else None
    sentinels = tuple(parse_sentinels(netloc))
    path = [unquote(p) for p in parts.path.split("/")[1:]]
    if not path or not path[0] or len(path) > 2:
        raise SentinelUrlError("a Sentinel URL names its master after the hosts: redis+sentinel://h:p,.../<master>[/<db>]")
    db = 0
    if len(path) == 2 and path[1] != "":
        if not path[1].isdigit():
            raise SentinelUrlError(f"the database must be a number, got {path[1]!r}")
        db = int(path[1])
    query = dict(parse_qsl(parts.query))
    unknown = set(query) - {"sentinel_password", "sentinel_username"}
    if unknown:
        raise SentinelUrlError(f"a Sentinel URL takes only sentinel_password and sentinel_username: {sorted(unknown)}")
    return SentinelSpec(sentinels, path[0], db, username, password,
                        query.get("sentinel_username"), query.get("sentinel_password"))


def parse_sentinels(text: str) -> list[tuple[str, int]]:
    """``host:port,host:port`` as pairs; at least one."""
    out: list[tuple[str, int]] = []
    for item in text.split(","):
        host, sep, port = item.strip().rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise SentinelUrlError(f"sentinels are host:port pairs separated by commas, got {item.strip()!r}")
        out.append((host.strip("[]"), int(port)))
    return out


_managers: dict[tuple[Any, ...], Sentinel] = {}
_managers_lock = threading.Lock()


def _manager(sentinels: tuple[tuple[str, int], ...], username: str | None, password: str | None) -> Sentinel:
    """This process's clients of these sentinels (one set per process: a forked child makes its own)."""
    key = (os.getpid(), sentinels, username, password)
    with _managers_lock:
        found = _managers.get(key)
        if found is None:
            kwargs: dict[str, Any] = {
                "socket_timeout": SENTINEL_TIMEOUT_S,
                "socket_connect_timeout": SENTINEL_TIMEOUT_S,
                "retry": Retry(NoBackoff(), 0),  # the data connection's retry asks again, with its deadline
                "health_check_interval": 0,
            }
            if password is not None:
                kwargs.update(username=username, password=password)
            found = _managers[key] = Sentinel(list(sentinels), sentinel_kwargs=kwargs)  # type: ignore[no-untyped-call,unused-ignore]  # typed from redis-py 8.2
        return found


class _Silence:
    """This process's sentinels that left a question unanswered (by address), and when each is to
    be probed: a frozen sentinel (its kernel still takes connections, nothing answers) would
    otherwise cost every discovery its timeout, where a dead one costs nothing. The sync and
    asyncio clients share it; a forked child starts knowing none (``forget``)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.until: dict[tuple[str, int], float] = {}
        """a silent sentinel's address: when to probe it (``inf`` while a probe is under way)"""

    def forget(self) -> None:
        self.lock = threading.Lock()  # a fresh one: one held at a fork stays held in the child
        self.until = {}  # the parent's probes do not run here

    def to_ask(self, sentinels: list[Any]) -> list[Any]:
        """The ``sentinels`` (redis-py clients) to ask now: those not silent, or, when all are, all of
        them (nothing else to go on). A silent one whose time is up is probed meanwhile."""
        now = time.monotonic()
        heard = []
        with self.lock:
            for sentinel in sentinels:
                address = _address(sentinel)
                due = self.until.get(address)
                if due is None:
                    heard.append(sentinel)
                elif due <= now:
                    self.until[address] = float("inf")
                    threading.Thread(target=self._probe, args=(sentinel,), daemon=True,
                                     name=f"parkway-sentinel-probe-{address[1]}").start()
        return heard or sentinels

    def timed_out(self, sentinel: Any) -> None:
        with self.lock:
            self.until[_address(sentinel)] = time.monotonic() + SILENT_S

    def _probe(self, sentinel: Any) -> None:
        """``PING`` the silent ``sentinel`` on a connection of its own: heard again if it answers
        anything, else silent for another ``SILENT_S``."""
        kwargs = sentinel.connection_pool.connection_kwargs
        try:
            with redis.Redis(host=kwargs.get("host", "localhost"), port=kwargs.get("port", 26379),
                             username=kwargs.get("username"), password=kwargs.get("password"),
                             socket_timeout=SENTINEL_TIMEOUT_S, socket_connect_timeout=SENTINEL_TIMEOUT_S,
                             retry=Retry(NoBackoff(), 0)) as probe:
                probe.ping()
            answered = True
        except rex.ResponseError:  # refused, but it answers
            answered = True
        except rex.RedisError:
            answered = False
        with self.lock:
            if answered:
                self.until.pop(_address(sentinel), None)
            else:
                self.until[_address(sentinel)] = time.monotonic() + SILENT_S


def _address(sentinel: Any) -> tuple[str, int]:
    kwargs = sentinel.connection_pool.connection_kwargs
    return str(kwargs.get("host")), int(kwargs.get("port") or 0)


_silence = _Silence()
os.register_at_fork(after_in_child=_silence.forget)


def _newest(answers: list[tuple[int, str, int]], master: str, errors: list[str]) -> tuple[str, int]:
    if not answers:
        said = f": {'; '.join(errors)}" if errors else ""
        raise MasterNotFoundError(f"no sentinel names a master for {master!r}{said}")
    _, host, port = max(answers, key=lambda answer: answer[0])
    return host, port


def _answer(address: Any, state: Any) -> tuple[int, str, int] | None:
    if not address or not state:
        return None
    host = address[0].decode() if isinstance(address[0], bytes) else str(address[0])
    return int(state.get("config-epoch") or 0), host, int(address[1])


def discover(manager: Sentinel, master: str) -> tuple[str, int]:
    """The master's address as the sentinel with the newest configuration names it: every
    sentinel is asked (``GET-MASTER-ADDR-BY-NAME``, which names a promoted replica as soon as the
    switch is made, and ``SENTINEL MASTER`` for its ``config-epoch``) and the highest epoch wins.
    redis-py takes the first sentinel's word, and one that has not heard of a failover names the
    old master, which, back on its port (restarted empty), calls itself a master: its clients
    would read and write there. (The connection then checks the server's ROLE.) One that left a
    question unanswered is passed over while others answer (``SILENT_S``), as a dead one is."""
    answers, errors = [], []
    for sentinel in _silence.to_ask(manager.sentinels):
        try:
            address = sentinel.sentinel_get_master_addr_by_name(master)
            state = sentinel.sentinel_master(master)
        except (rex.ConnectionError, rex.TimeoutError, rex.ResponseError) as exc:
            if isinstance(exc, rex.TimeoutError):
                _silence.timed_out(sentinel)
            errors.append(f"{sentinel}: {exc!r}")
            continue
        if (answer := _answer(address, state)) is not None:
            answers.append(answer)
    return _newest(answers, master, errors)


async def discover_async(manager: Any, master: str) -> tuple[str, int]:
    """As :func:`discover`, with asyncio clients of the sentinels (``async_sentinels``)."""
    answers, errors = [], []
    for sentinel in _silence.to_ask(manager.sentinels):
        try:
            address = await sentinel.sentinel_get_master_addr_by_name(master)
            state = await sentinel.sentinel_master(master)
        except (rex.ConnectionError, rex.TimeoutError, rex.ResponseError) as exc:
            if isinstance(exc, rex.TimeoutError):
                _silence.timed_out(sentinel)
            errors.append(f"{sentinel}: {exc!r}")
            continue
        if (answer := _answer(address, state)) is not None:
            answers.append(answer)
    return _newest(answers, master, errors)


def demoted(reply: rex.ResponseError) -> bool:
    """Whether ``reply`` says its server is no longer a master (the sentinels name another now): a
    write refused ``READONLY``, or a blocking read (a worker's dequeue, an ``XREAD BLOCK``, a
    ``WAIT``) ended ``UNBLOCKED`` by the demotion (``parkway failover``'s ``REPLICAOF``), after which
    the server closes the connection."""
    return isinstance(reply, rex.ReadOnlyError) or str(reply).startswith("UNBLOCKED")


class MasterConnection(redis.Connection):
    """A connection to whichever server the sentinels name as the master, asked at every (re)connect."""

    def __init__(
        self,
        *,
        sentinels: tuple[tuple[str, int], ...],
        master: str,
        sentinel_username: str | None = None,
        sentinel_password: str | None = None,
        **kwargs: Any,
    ) -> None:
        self.sentinels, self.master = tuple((h, int(p)) for h, p in sentinels), master
        self.sentinel_username, self.sentinel_password = sentinel_username, sentinel_password
        kwargs.pop("host", None)
        kwargs.pop("port", None)
        super().__init__(**kwargs)  # type: ignore[no-untyped-call]
        self.sent = time.monotonic()
        """when this connection last sent a command (its answer may have come much later: a
        blocking read, or a server frozen with the command on its way)"""

    def _connect(self) -> Any:
        self.host, self.port = self._discover()
        self.sent = time.monotonic()  # just asked: the ROLE check that follows need not ask again
        return super()._connect()  # type: ignore[no-untyped-call]

    def _discover(self) -> tuple[str, int]:
        return discover(_manager(self.sentinels, self.sentinel_username, self.sentinel_password), self.master)

    def send_packed_command(self, command: Any, check_health: bool = True) -> None:
        """When the last command went out more than ``IDLE_RECHECK_S`` ago, ask the sentinels again
        and move if they name another master: a primary frozen past a failover thaws still calling
        itself a master (until they demote it), and a socket open through the freeze (idle, or
        waiting on an answer that came after the thaw) would write there, acknowledged by a replica
        still attached to it, and lost at the demotion."""
        now = time.monotonic()
        idle, self.sent = now - self.sent, now
        if self._sock is not None and idle > IDLE_RECHECK_S:
            try:
                moved = self._discover() != (self.host, self.port)
            except MasterNotFoundError:
                moved = True  # none names a master now: reconnecting asks again, within the call's retry
            if moved:
                self.disconnect()
        super().send_packed_command(command, check_health=check_health)  # type: ignore[no-untyped-call]

    def on_connect_check_health(self, check_health: bool = True) -> None:
        super().on_connect_check_health(check_health=check_health)
        self.send_command("ROLE", check_health=False)  # type: ignore[no-untyped-call]
        role = self.read_response()
        if not role or role[0] not in (b"master", "master"):
            raise rex.ConnectionError(f"{self.host}:{self.port}, named master {self.master!r}, is not a master yet")

    def read_response(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return super().read_response(*args, **kwargs)
        except rex.ResponseError as exc:
            if not demoted(exc):
                raise
            self.disconnect()  # type: ignore[no-untyped-call]
            raise rex.ConnectionError(f"{self.host}:{self.port} is no longer the master: {exc}") from exc

    def _host_error(self) -> str:
        return f"master {self.master!r} at {self.host}:{self.port}"


def pool_kwargs(spec: SentinelSpec) -> dict[str, Any]:
    """The connection pool's keyword arguments for ``spec`` (its connection class is ``MasterConnection``)."""
    return {
        "connection_class": MasterConnection,
        "sentinels": spec.sentinels,
        "master": spec.master,
        "sentinel_username": spec.sentinel_username,
        "sentinel_password": spec.sentinel_password,
        "db": spec.db,
        "username": spec.username,
        "password": spec.password,
    }


def async_sentinels(url: str) -> Any:
    """asyncio clients of the sentinels a ``redis+sentinel://`` string names (for ``async_client``)."""
    from redis.asyncio.sentinel import Sentinel as AsyncSentinel

    spec = parse_sentinel_url(url)
    sentinel_kwargs: dict[str, Any] = {"socket_timeout": SENTINEL_TIMEOUT_S,
                                       "socket_connect_timeout": SENTINEL_TIMEOUT_S}
    if spec.sentinel_password is not None:
        sentinel_kwargs.update(username=spec.sentinel_username, password=spec.sentinel_password)
    return AsyncSentinel(list(spec.sentinels), sentinel_kwargs=sentinel_kwargs)  # type: ignore[no-untyped-call,unused-ignore]  # typed from redis-py 8.2


def async_client(url: str, manager: Any, **kwargs: Any) -> Any:
    """An asyncio client of the master ``url`` names (a ``redis+sentinel://`` string), found through
    ``manager`` (``async_sentinels``): its connections ask at every (re)connect, and a command
    whose connection is lost or finds its server demoted is sent again (three times at most), as
    ``MasterConnection``'s are."""
    from redis import asyncio as aioredis
    from redis.asyncio.retry import Retry as AsyncRetry

    from .backoff import Jitter

    spec = parse_sentinel_url(url)

    class AsyncMasterConnection(aioredis.Connection):
        async def _connect(self) -> None:
            self.host, self.port = await discover_async(manager, spec.master)
            await super()._connect()  # type: ignore[no-untyped-call]

        async def read_response(self, *args: Any, **kwargs: Any) -> Any:
            try:
                return await super().read_response(*args, **kwargs)
            except rex.ResponseError as exc:  # as MasterConnection's: retried on the new master
                if not demoted(exc):
                    raise
                await self.disconnect()
                raise rex.ConnectionError(f"{self.host}:{self.port} is no longer the master: {exc}") from exc

    max_connections = kwargs.pop("max_connections", None)
    # a connection lost or found demoted (a failover) is retried, reconnecting where the sentinels
    # say; a timeout is not: the caller's bound (a frozen master) stays its own
    retry = AsyncRetry(Jitter(cap=1.0, base=0.1), 3, supported_errors=(rex.ConnectionError,))
    pool = aioredis.ConnectionPool(
        connection_class=AsyncMasterConnection, max_connections=max_connections,
        db=spec.db, username=spec.username, password=spec.password, retry=retry, **kwargs,
    )
    return aioredis.Redis(connection_pool=pool)
