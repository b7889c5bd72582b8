"""Settings: where the store is, how long pauses live, what bounds apply.

Precedence for the TTL: an argument (``Settings(ttl_ms=...)`` or
``start(..., ttl_ms=...)``) over ``PARKWAY_TTL_MS`` over the 15-minute
default; a single ``use_interrupt(ttl_ms=...)`` overrides all of them for
its own pause.

=====================  ========================================================
variable               meaning
=====================  ========================================================
``PARKWAY_REDIS_URL``  Redis to use; unset means embedded (an in-process Redis and worker). A
                       ``redis+sentinel://[user:pw@]h1:p1,h2:p2/<master>[/<db>]`` string names a
                       master under Sentinel (see ``parkway.adapters.redis.connection.sentinel``)
``PARKWAY_REDIS_SENTINELS`` instead of a URL: the sentinels, ``host:port,...``, with
                       ``PARKWAY_REDIS_MASTER`` (the master's name), ``PARKWAY_REDIS_PASSWORD`` (the
                       master's, if it asks for one) and ``PARKWAY_REDIS_SENTINEL_PASSWORD`` (the sentinels')
``PARKWAY_REPLICA_ACKS`` replicas that must acknowledge each committed transition (``WAIT``) before
                       parkway says it happened; default 1 under Sentinel, else 0 (off)
``PARKWAY_REPLICA_ACK_MS`` how long a commit waits for them (default 100); a shortfall raises
                       ``StoreUnavailable`` (the outcome is unknown)
``PARKWAY_TTL_MS``     default TTL of a run's records and pauses (ms)
``PARKWAY_SECRET``     key that derives resume tokens (>= 32 characters)
``PARKWAY_QUEUE``      RQ queue name (default ``parkway``, or ``<prefix>-parkway`` with a key prefix)
``PARKWAY_KEY_PREFIX`` first part of every Redis key (default ``pw``): applications that share a Redis
                       each set their own (read once per process, when parkway is imported)
``PARKWAY_JOB_TIMEOUT`` seconds one job (node attempts until a pause) may run
``PARKWAY_LEASE_MS``   a worker silent this long has lost its attempt (default 5000)
``PARKWAY_MAX_LOST_ATTEMPTS`` attempts lost with their worker before the run fails (3)
``PARKWAY_RETENTION_MS`` how long a run's summary outlives its records (7 days)
``PARKWAY_EXPIRY_GRACE_MS`` how long a waiting run's records outlive its interrupt's expiry (60000);
                       a reconciler behind on its expiries keeps them longer, until it records each
``PARKWAY_WORKFLOWS``  modules workflows may be imported from (comma-separated);
                       unset means the application's own code only
``PARKWAY_PUBLIC_URL`` where people reach ``parkway serve``: the base of notifications' links
``PARKWAY_WEBHOOK_URL`` a URL every notification is POSTed to (Standard Webhooks), with
                       ``PARKWAY_WEBHOOK_SECRET`` (``whsec_...``); ``PARKWAY_WEBHOOK_ROUTES``: more, by
                       workflow, audience or tenant (see docs/guides/notifications.md)
``PARKWAY_SMTP_HOST``  an SMTP server notifications are mailed through, with ``PARKWAY_SMTP_PORT`` (25),
                       ``PARKWAY_SMTP_FROM`` and ``PARKWAY_SMTP_TO`` (addresses, or by workflow, audience, tenant)
``PARKWAY_SLACK_TOKEN`` a Slack bot token messages are posted with, to ``PARKWAY_SLACK_CHANNELS`` (channel
                       ids, or by workflow, audience, tenant); ``PARKWAY_SLACK_SIGNING_SECRET`` and
                       ``PARKWAY_SLACK_USERS`` (``<Slack user id>=<role>[:owner[:tenant]]``) let people
                       answer from Slack; ``PARKWAY_SLACK_API_URL`` another Web API base (tests)
``PARKWAY_NOTIFY_RETRY_S`` how long a notification is retried before it is dead-lettered (3600);
                       ``PARKWAY_NOTIFY_BACKOFF_S`` the first retry's wait (1, doubling up to 60),
                       ``PARKWAY_NOTIFY_RATE`` sends a second per channel per worker (50),
                       ``PARKWAY_NOTIFY_CLAIM_S`` when another worker takes over a silent one's (30)
=====================  ========================================================
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from .adapters.limits import DEFAULT_TTL_MS, Limits
from .adapters.redis import keys
from .adapters.redis.connection.replicas import ReplicaAcks
from .adapters.redis.connection.sentinel import (
    SentinelSpec,
    SentinelUrlError,
    is_sentinel_url,
    parse_sentinel_url,
    parse_sentinels,
)
from .runtime.authority import Caller
from .runtime.errors import ConfigError, ParkwayError, ValidationError, WorkflowError
from .runtime.loading import WorkflowModules, parse_modules
from .runtime.protocol import MAX_TTL_MS, check_id

MIN_TTL_MS = 1000
MIN_GRACE_MS = 100
MIN_SECRET_LENGTH = 32


def default_queue() -> str:
    """``parkway``, or ``<prefix>-parkway`` under a key prefix of its own (its jobs stay apart too)."""
    return "parkway" if keys.PREFIX == "pw" else f"{keys.PREFIX}-parkway"


def check_ttl(value: Any, what: str = "ttl_ms", error: type[ParkwayError] = ConfigError) -> int:
    """``value`` if it is a TTL from MIN_TTL_MS to MAX_TTL_MS, else raise ``error`` (ConfigError for a
    setting, ValidationError for a call's argument)."""
    if isinstance(value, bool) or not isinstance(value, int) or not MIN_TTL_MS <= value <= MAX_TTL_MS:
        shown = repr(value) if len(repr(value)) <= 40 else repr(value)[:37] + "..."
        raise error(f"{what} must be an integer number of milliseconds from {MIN_TTL_MS} to {MAX_TTL_MS}, "
                    f"got {shown}")
    return value


@dataclass(frozen=True)
class Settings:
    redis_url: str | None = None
    ttl_ms: int = DEFAULT_TTL_MS
    secret: str | None = field(default=None, repr=False)
    queue: str = field(default_factory=default_queue)
    job_timeout: int = 3600
    lease_ms: int = 5000
    """a worker silent this long has lost its attempt; the reconciler replays it elsewhere"""
    max_lost_attempts: int = 3
    """attempts of one activation lost with their worker before the run fails"""
    limits: Limits = field(default_factory=Limits)
    workflows: tuple[str, ...] | None = None
    """modules that workflows may be imported from; None: the application's own code (see runtime.loading)"""
    max_connections: int | None = None
    """Redis connections this process's client keeps at most (a thread waits for a free one); None:
    as many as its threads use at once. ``parkway serve`` uses 16 unless set"""
    replica_acks: int | None = None
    """replicas that must acknowledge each commit; None: 1 under Sentinel, else 0 (see ``acks``)"""
    replica_ack_ms: int = 100
    """how long a commit waits for its replicas' acknowledgement"""
    shards: tuple[str, ...] | None = None
    """``PARKWAY_SHARDS``: the Redis servers runs are placed on by run id, in order (see
    ``adapters.redis.shards``); ``redis_url`` is then the first, or, for a worker, its shard's"""
    shard: int | None = None
    """set by ``parkway worker --shard K``: this process serves shard K of the deployment's shards
    alone, on ``redis_url`` (a process with one Redis URL refuses a Redis that is one of several
    shards, unless it is this one)"""

    public_url: str | None = None
    """``PARKWAY_PUBLIC_URL``: where people reach ``parkway serve`` (``https://parkway.example.com``):
    the base of the answer links and form links notifications carry"""
    webhook_url: str | None = None
    """``PARKWAY_WEBHOOK_URL``: a URL every notification is POSTed to, signed as Standard Webhooks say
    (see docs/guides/notifications.md)"""
    webhook_secret: str | None = field(default=None, repr=False)
    """``PARKWAY_WEBHOOK_SECRET``: the webhooks' signing secret (``whsec_<base64>``)"""
    webhook_routes: tuple[str, ...] = ()
    """``PARKWAY_WEBHOOK_ROUTES``: more webhooks, each for one workflow, audience or tenant:
    ``workflow:<name>=<url>``, ``audience:<name>=<url>``, ``tenant:<name>=<url>``, separated by spaces"""
    smtp_host: str | None = None
    """``PARKWAY_SMTP_HOST``: an SMTP server notifications are mailed through (with ``smtp_to``)"""
    smtp_port: int = 25
    """``PARKWAY_SMTP_PORT``"""
    smtp_from: str = "parkway@localhost"
    """``PARKWAY_SMTP_FROM``: the mails' sender"""
    smtp_to: tuple[str, ...] = ()
    """``PARKWAY_SMTP_TO``: who is mailed: addresses for every notification (``ops@example.com``) or
    for one workflow, audience or tenant (``audience:finance=fin@example.com``), separated by spaces"""
    slack_token: str | None = field(default=None, repr=False)
    """``PARKWAY_SLACK_TOKEN``: the Slack bot token (``xoxb-...``) messages are posted and updated with"""
    slack_channels: tuple[str, ...] = ()
    """``PARKWAY_SLACK_CHANNELS``: where messages go: channel ids for every notification (``C0123``) or
    for one workflow, audience or tenant (``audience:team:ops=C0456``), separated by spaces"""
    slack_signing_secret: str | None = field(default=None, repr=False)
    """``PARKWAY_SLACK_SIGNING_SECRET``: what Slack signs its interactivity requests with (``parkway
    serve`` verifies each one; without it the endpoint is off)"""
    slack_users: tuple[str, ...] = ()
    """``PARKWAY_SLACK_USERS``: who a Slack user answers as, ``<Slack user id>=<role>[:owner[:tenant]]``
    as an API key's caller (``U0123=user:ana:acme``), separated by spaces; anyone else is refused"""
    slack_api_url: str | None = None
    """``PARKWAY_SLACK_API_URL``: the Slack Web API's base URL (default Slack's own; tests point it
    at a stand-in)"""
    notify_retry_s: float = 3600.0
    """``PARKWAY_NOTIFY_RETRY_S``: how long a notification is retried (from when it was written)
    before it is dead-lettered"""
    notify_backoff_s: float = 1.0
    """``PARKWAY_NOTIFY_BACKOFF_S``: the first retry's wait; each next one waits twice as long, up to
    a minute"""
    notify_rate: float = 50.0
    """``PARKWAY_NOTIFY_RATE``: notifications per second one worker sends to one channel at most"""
    notify_claim_s: float = 30.0
    """``PARKWAY_NOTIFY_CLAIM_S``: how long a notification a worker took stays its own without a
    sign of life before another worker takes it over (a worker killed mid-delivery)"""

    def __post_init__(self) -> None:
        check_ttl(self.ttl_ms)
        for name in ("webhook_routes", "smtp_to", "slack_channels", "slack_users"):
            value = getattr(self, name)
            if isinstance(value, str):
                object.__setattr__(self, name, tuple(value.split()))
        if self.webhook_url is not None and not self.webhook_secret:
            raise ConfigError("PARKWAY_WEBHOOK_URL needs PARKWAY_WEBHOOK_SECRET (whsec_...) to sign with")
        if self.slack_channels and not self.slack_token:
            raise ConfigError("PARKWAY_SLACK_CHANNELS needs PARKWAY_SLACK_TOKEN (a bot token) to post with")
        self.slack_callers  # noqa: B018 - refuses a mapping that does not read, at start
        if min(self.notify_retry_s, self.notify_backoff_s, self.notify_rate, self.notify_claim_s) <= 0:
            raise ConfigError("PARKWAY_NOTIFY_RETRY_S, _BACKOFF_S, _RATE and _CLAIM_S must be above 0")
        check_id(self.queue, "queue name")
        if self.secret is not None and len(self.secret) < MIN_SECRET_LENGTH:
            raise ConfigError(f"PARKWAY_SECRET must be at least {MIN_SECRET_LENGTH} characters")
        if self.shards is not None:
            from .adapters.redis.connection.shards import split_shards

            shards = split_shards(self.shards) if isinstance(self.shards, str) else tuple(self.shards)
            servers: dict[tuple[Any, ...], str] = {}
            for url in shards:
                _check_redis_url(url)
                server = _server_of(url)
                if server in servers:
                    raise ConfigError(f"PARKWAY_SHARDS names one server twice ({_redacted(servers[server])!r} and "
                                      f"{_redacted(url)!r}): each shard is a Redis (or a database) of its own")
                servers[server] = url
            object.__setattr__(self, "shards", shards)
            if self.redis_url is None:
                object.__setattr__(self, "redis_url", shards[0])
        if self.redis_url is not None:
            _check_redis_url(self.redis_url)
        if self.shard is not None and (type(self.shard) is not int or self.shard < 0):
            raise ConfigError(f"shard must be an integer of at least 0, got {self.shard!r}")
        if self.replica_acks is not None and (isinstance(self.replica_acks, bool) or not 0 <= self.replica_acks <= 16):
            raise ConfigError(f"PARKWAY_REPLICA_ACKS must be an integer from 0 to 16, got {self.replica_acks!r}")
        if isinstance(self.replica_ack_ms, bool) or not 1 <= self.replica_ack_ms <= 5000:
            raise ConfigError(f"PARKWAY_REPLICA_ACK_MS must be an integer from 1 to 5000, got {self.replica_ack_ms!r}")
        if self.job_timeout < 1:
            raise ConfigError("job_timeout must be >= 1 second")
        if self.lease_ms < 500 or self.max_lost_attempts < 1:
            raise ConfigError("lease_ms must be >= 500 and max_lost_attempts >= 1")
        if self.max_connections is not None and self.max_connections < 2:
            raise ConfigError("max_connections must be at least 2")
        if self.limits.retention_ms < MIN_TTL_MS:
            raise ConfigError(f"PARKWAY_RETENTION_MS must be >= {MIN_TTL_MS}")
        if self.limits.expiry_grace_ms < MIN_GRACE_MS:
            raise ConfigError(f"PARKWAY_EXPIRY_GRACE_MS must be >= {MIN_GRACE_MS}")
        if self.workflows is not None:
            try:
                object.__setattr__(self, "workflows", parse_modules(self.workflows))
            except WorkflowError as exc:
                raise ConfigError(exc.message) from None

    @property
    def modules(self) -> WorkflowModules:
        """Which modules this process may import workflows from."""
        return WorkflowModules(self.workflows)

    @property
    def slack_callers(self) -> dict[str, Caller]:
        """``slack_users`` read: Slack user id -> the caller that user answers as."""
        out: dict[str, Caller] = {}
        for item in self.slack_users:
            user, sep, who = item.partition("=")
            role, *rest = who.split(":")
            if not sep or not user or len(rest) > 2:
                raise ConfigError(f"PARKWAY_SLACK_USERS: {item!r} is not <Slack user id>=<role>[:owner[:tenant]]")
            try:
                out[user] = Caller(role, *(part or None for part in rest))  # type: ignore[arg-type]
            except ValidationError as exc:
                raise ConfigError(f"PARKWAY_SLACK_USERS: {item!r}: {exc.message}") from None
        return out

    @property
    def embedded(self) -> bool:
        return self.redis_url is None

    @property
    def acks(self) -> ReplicaAcks | None:
        """What each commit waits for: ``replica_acks`` replicas within ``replica_ack_ms``; None: nothing."""
        count = self.replica_acks
        if count is None:
            count = 1 if self.redis_url is not None and is_sentinel_url(self.redis_url) else 0
        return ReplicaAcks(count, self.replica_ack_ms) if count else None

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **overrides: Any) -> Settings:
        """Read ``PARKWAY_*`` variables; keyword arguments win over them."""
        env = os.environ if env is None else env
        values: dict[str, Any] = {}
        for name, attr in (("REDIS_URL", "redis_url"), ("SECRET", "secret"), ("QUEUE", "queue"), ("SHARDS", "shards"),
                           ("PUBLIC_URL", "public_url"), ("WEBHOOK_URL", "webhook_url"),
                           ("WEBHOOK_SECRET", "webhook_secret"), ("WEBHOOK_ROUTES", "webhook_routes"),
                           ("SMTP_HOST", "smtp_host"), ("SMTP_FROM", "smtp_from"), ("SMTP_TO", "smtp_to"),
                           ("SLACK_TOKEN", "slack_token"), ("SLACK_CHANNELS", "slack_channels"),
                           ("SLACK_SIGNING_SECRET", "slack_signing_secret"), ("SLACK_USERS", "slack_users"),
                           ("SLACK_API_URL", "slack_api_url")):
            if env.get(f"PARKWAY_{name}"):
                values[attr] = env[f"PARKWAY_{name}"]
        sentinel = sentinel_url(
            env.get("PARKWAY_REDIS_SENTINELS"), env.get("PARKWAY_REDIS_MASTER"),
            env.get("PARKWAY_REDIS_PASSWORD"), env.get("PARKWAY_REDIS_SENTINEL_PASSWORD"),
        )
        if sentinel is not None:
            if env.get("PARKWAY_REDIS_URL") and not overrides.get("redis_url"):
                raise ConfigError("set PARKWAY_REDIS_URL or PARKWAY_REDIS_SENTINELS, not both")
            values["redis_url"] = sentinel
        for name, attr in (
            ("TTL_MS", "ttl_ms"),
            ("JOB_TIMEOUT", "job_timeout"),
            ("LEASE_MS", "lease_ms"),
            ("MAX_LOST_ATTEMPTS", "max_lost_attempts"),
            ("REPLICA_ACKS", "replica_acks"),
            ("REPLICA_ACK_MS", "replica_ack_ms"),
            ("SMTP_PORT", "smtp_port"),
        ):
            raw = env.get(f"PARKWAY_{name}")
            if raw:
                try:
                    values[attr] = int(raw)
                except ValueError:
                    raise ConfigError(f"PARKWAY_{name} must be an integer, got {raw!r}") from None
        for name, attr in (("NOTIFY_RETRY_S", "notify_retry_s"), ("NOTIFY_BACKOFF_S", "notify_backoff_s"),
                           ("NOTIFY_RATE", "notify_rate"), ("NOTIFY_CLAIM_S", "notify_claim_s")):
            raw = env.get(f"PARKWAY_{name}")
            if raw:
                try:
                    values[attr] = float(raw)
                except ValueError:
                    raise ConfigError(f"PARKWAY_{name} must be a number, got {raw!r}") from None
        limits: dict[str, int] = {}
        for name, attr in (("RETENTION_MS", "retention_ms"), ("EXPIRY_GRACE_MS", "expiry_grace_ms")):
            raw = env.get(f"PARKWAY_{name}")
            if raw:
                try:
                    limits[attr] = int(raw)
                except ValueError:
                    raise ConfigError(f"PARKWAY_{name} must be an integer, got {raw!r}") from None
        if limits:
            values["limits"] = Limits(**limits)
        if env.get("PARKWAY_WORKFLOWS"):
            values["workflows"] = env["PARKWAY_WORKFLOWS"]
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**values)

    def with_(self, **changes: Any) -> Settings:
        return replace(self, **changes)


def _check_redis_url(url: str) -> None:
    if is_sentinel_url(url):
        try:
            parse_sentinel_url(url)
        except SentinelUrlError as exc:
            raise ConfigError(f"redis url {_redacted(url)!r}: {exc}") from None
    elif not url.startswith(("redis://", "rediss://", "unix://")):
        raise ConfigError(
            f"redis url must start with redis://, rediss://, unix:// or redis+sentinel://, got {_redacted(url)!r}"
        )
    else:
        _check_plain_url(url)


def _server_of(url: str) -> tuple[Any, ...]:
    """What a checked URL connects to, however written: host (any case), port and database, or the
    socket's path, or the sentinels (in any order), the master's name and the database."""
    from urllib.parse import parse_qs, urlsplit

    if is_sentinel_url(url):
        spec = parse_sentinel_url(url)
        return ("sentinel", frozenset(spec.sentinels), spec.master, spec.db)
    parts = urlsplit(url)
    db = parse_qs(parts.query).get("db", [""])[0] or (parts.path[1:] if parts.scheme != "unix" else "") or "0"
    if parts.scheme == "unix":
        return ("unix", parts.path, int(db))
    return ("tcp", (parts.hostname or "localhost").lower(), parts.port or 6379, int(db))


def _check_plain_url(url: str) -> None:
    """A redis://, rediss:// or unix:// URL's port and database, which redis-py does not check: it
    takes database 0 for a path or ``db`` it cannot read (``/15x``, a stray comma), so a typo would
    reach another database than the one meant."""
    from urllib.parse import parse_qs, urlsplit

    parts = urlsplit(url)
    where = f"redis url {_redacted(url)!r}"
    try:
        parts.port  # noqa: B018 - parsing it is the check
    except ValueError:
        raise ConfigError(f"{where}: its port must be a number from 0 to 65535") from None
    named = []
    if parts.scheme != "unix" and parts.path not in ("", "/"):
        named.append(parts.path[1:])
    named += parse_qs(parts.query).get("db", [])
    if len(named) > 1:
        raise ConfigError(f"{where} names its database twice (in its path and as db=)")
    if named and not (named[0].isascii() and named[0].isdigit()):
        raise ConfigError(f"{where}: its database must be a number, got {named[0]!r}")


def _redacted(url: str) -> str:
    head, at, tail = url.rpartition("@")
    return f"{head.split('://', 1)[0]}://***@{tail}" if at else url


def sentinel_url(
    sentinels: str | None, master: str | None, password: str | None = None, sentinel_password: str | None = None
) -> str | None:
    """The ``redis+sentinel://`` string for sentinels ``host:port,...`` and a master's name
    (``PARKWAY_REDIS_SENTINELS`` and ``PARKWAY_REDIS_MASTER``, or the CLI's flags); None without sentinels."""
    if not sentinels:
        if master:
            raise ConfigError("PARKWAY_REDIS_MASTER (--redis-master) needs PARKWAY_REDIS_SENTINELS (--redis-sentinels)")
        return None
    if not master:
        raise ConfigError("PARKWAY_REDIS_SENTINELS (--redis-sentinels) needs PARKWAY_REDIS_MASTER (--redis-master)")
    try:
        hosts = tuple(parse_sentinels(sentinels))
    except SentinelUrlError as exc:
        raise ConfigError(f"PARKWAY_REDIS_SENTINELS: {exc}") from None
    return SentinelSpec(hosts, master, password=password or None, sentinel_password=sentinel_password or None).url()
