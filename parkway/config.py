"""Settings: where the store is, how long pauses live, what bounds apply.

Precedence for the TTL: an argument (``Settings(ttl_ms=...)`` or
``start(..., ttl_ms=...)``) over ``PARKWAY_TTL_MS`` over the 15-minute
default; a single ``use_interrupt(ttl_ms=...)`` overrides all of them for
its own pause.

=====================  ========================================================
variable               meaning
=====================  ========================================================
``PARKWAY_REDIS_URL``  Redis to use; unset means embedded (an in-process Redis and worker)
``PARKWAY_TTL_MS``     default TTL of a run's records and pauses (ms)
``PARKWAY_SECRET``     key that derives resume tokens (>= 32 characters)
``PARKWAY_QUEUE``      RQ queue name (default ``parkway``, or ``<prefix>-parkway`` with a key prefix)
``PARKWAY_KEY_PREFIX`` first part of every Redis key (default ``pw``): applications that share a Redis
                       each set their own (read once per process, when parkway is imported)
``PARKWAY_JOB_TIMEOUT`` seconds one job (node attempts until a pause) may run
``PARKWAY_LEASE_MS``   a worker silent this long has lost its attempt (default 5000)
``PARKWAY_MAX_LOST_ATTEMPTS`` attempts lost with their worker before the run fails (3)
``PARKWAY_RETENTION_MS`` how long a run's summary outlives its records (7 days)
``PARKWAY_WORKFLOWS``  modules workflows may be imported from (comma-separated);
                       unset means the application's own code only
=====================  ========================================================
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from .adapters.limits import DEFAULT_TTL_MS, Limits
from .adapters.redis import keys
from .runtime.errors import ConfigError, WorkflowError
from .runtime.loading import WorkflowModules, parse_modules
from .runtime.protocol import check_id

MIN_TTL_MS = 1000
MIN_SECRET_LENGTH = 32


def default_queue() -> str:
    """``parkway``, or ``<prefix>-parkway`` under a key prefix of its own (its jobs stay apart too)."""
    return "parkway" if keys.PREFIX == "pw" else f"{keys.PREFIX}-parkway"


def check_ttl(value: Any, what: str = "ttl_ms") -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < MIN_TTL_MS:
        raise ConfigError(f"{what} must be an integer number of milliseconds >= {MIN_TTL_MS}, got {value!r}")
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

    def __post_init__(self) -> None:
        check_ttl(self.ttl_ms)
        check_id(self.queue, "queue name")
        if self.secret is not None and len(self.secret) < MIN_SECRET_LENGTH:
            raise ConfigError(f"PARKWAY_SECRET must be at least {MIN_SECRET_LENGTH} characters")
        if self.redis_url is not None and not self.redis_url.startswith(("redis://", "rediss://", "unix://")):
            raise ConfigError(f"redis url must start with redis://, rediss:// or unix://, got {self.redis_url!r}")
        if self.job_timeout < 1:
            raise ConfigError("job_timeout must be >= 1 second")
        if self.lease_ms < 500 or self.max_lost_attempts < 1:
            raise ConfigError("lease_ms must be >= 500 and max_lost_attempts >= 1")
        if self.max_connections is not None and self.max_connections < 2:
            raise ConfigError("max_connections must be at least 2")
        if self.limits.retention_ms < MIN_TTL_MS:
            raise ConfigError(f"PARKWAY_RETENTION_MS must be >= {MIN_TTL_MS}")
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
    def embedded(self) -> bool:
        return self.redis_url is None

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **overrides: Any) -> Settings:
        """Read ``PARKWAY_*`` variables; keyword arguments win over them."""
        env = os.environ if env is None else env
        values: dict[str, Any] = {}
        for name, attr in (("REDIS_URL", "redis_url"), ("SECRET", "secret"), ("QUEUE", "queue")):
            if env.get(f"PARKWAY_{name}"):
                values[attr] = env[f"PARKWAY_{name}"]
        for name, attr in (
            ("TTL_MS", "ttl_ms"),
            ("JOB_TIMEOUT", "job_timeout"),
            ("LEASE_MS", "lease_ms"),
            ("MAX_LOST_ATTEMPTS", "max_lost_attempts"),
        ):
            raw = env.get(f"PARKWAY_{name}")
            if raw:
                try:
                    values[attr] = int(raw)
                except ValueError:
                    raise ConfigError(f"PARKWAY_{name} must be an integer, got {raw!r}") from None
        raw = env.get("PARKWAY_RETENTION_MS")
        if raw:
            try:
                values["limits"] = Limits(retention_ms=int(raw))
            except ValueError:
                raise ConfigError(f"PARKWAY_RETENTION_MS must be an integer, got {raw!r}") from None
        if env.get("PARKWAY_WORKFLOWS"):
            values["workflows"] = env["PARKWAY_WORKFLOWS"]
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**values)

    def with_(self, **changes: Any) -> Settings:
        return replace(self, **changes)
