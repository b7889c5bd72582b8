"""What every command shares: its client, its settings from the command line, and how it prints.

Every JSON a command prints has the events' shape: camelCase keys (``runId``, ``resumeToken``,
``nextCursor``), times in epoch milliseconds. Human output shows times as UTC ISO.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, TextIO
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from ..runtime.errors import ConfigError, ParkwayError

if TYPE_CHECKING:  # the command's start stays light: what a command needs, it imports when it runs
    from ..client import Parkway
    from ..config import Settings
    from ..runtime.protocol import Run


def as_json(value: Any) -> str:
    return json.dumps(value, default=str, sort_keys=False)


def dump(model: Any, **options: Any) -> dict[str, Any]:
    """A model as the CLI prints it, as the HTTP API answers it: camelCase, JSON types, and every
    field, null when it has no value."""
    out: dict[str, Any] = model.model_dump(mode="json", by_alias=True, **options)
    return out


NEEDS_REDIS = (
    "needs a Redis: set PARKWAY_REDIS_URL or pass --redis-url "
    "(embedded runs live only inside the process that started them)"
)


def settings_of(args: argparse.Namespace, **overrides: Any) -> Settings:
    from ..config import Settings

    url = redis_url_of(args)
    settings = Settings.from_env(redis_url=url, workflows=getattr(args, "workflows", None), **overrides)
    shards = settings.shards or ()
    if url and len(shards) > 1 and url not in shards:
        raise ConfigError(f"--redis-url {url} is not one of PARKWAY_SHARDS: with shards a command reads and writes "
                          "every shard (and a worker serves --shard K); unset PARKWAY_SHARDS to use one Redis")
    return settings


def redis_url_of(args: argparse.Namespace) -> str | None:
    """The Redis the command line names: ``--redis-url``, or ``--redis-sentinels`` with
    ``--redis-master`` (passwords from ``PARKWAY_REDIS_PASSWORD`` and
    ``PARKWAY_REDIS_SENTINEL_PASSWORD``) as one ``redis+sentinel://`` string; None: the environment's."""
    from ..config import sentinel_url

    url: str | None = getattr(args, "redis_url", None)
    sentinels, master = getattr(args, "redis_sentinels", None), getattr(args, "redis_master", None)
    if url and (sentinels or master):
        raise ConfigError("pass --redis-url or --redis-sentinels with --redis-master, not both")
    if url:
        return url
    env = os.environ
    password, sentinel_password = env.get("PARKWAY_REDIS_PASSWORD"), env.get("PARKWAY_REDIS_SENTINEL_PASSWORD")
    return sentinel_url(sentinels, master, password, sentinel_password)


def open_client(args: argparse.Namespace, *, embedded: bool = False, redis_only: bool = True) -> Parkway:
    settings = settings_of(args)
    if embedded:
        settings = settings.with_(redis_url=None)
    elif redis_only and settings.embedded:
        raise ConfigError(f"parkway {args.command} {NEEDS_REDIS}")
    from ..client import Parkway

    return Parkway(settings)


def when(ms: int) -> str:
    """Epoch milliseconds as UTC ISO to the second."""
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def span(ms: int) -> str:
    """A duration, roughly: 45s, 12m, 2h 5m, 3d 4h."""
    s = max(0, ms) // 1000
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m"
    if s < 86400:
        return f"{s // 3600}h" + (f" {s % 3600 // 60}m" if s % 3600 >= 60 else "")
    return f"{s // 86400}d" + (f" {s % 86400 // 3600}h" if s % 86400 >= 3600 else "")


def now_ms() -> int:
    return int(time.time() * 1000)


def show_run(run: Run, out: TextIO, extra: dict[str, Any] | None = None) -> None:
    out.write(as_json({**dump(run), **(extra or {})}) + "\n")


def interactive() -> bool:
    """Whether a person can answer at this terminal (stdin may be a file, /dev/null, or closed)."""
    return sys.stdin is not None and not sys.stdin.closed and sys.stdin.isatty()


def parse_json(text: str, option: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ParkwayError(f"{option} is not valid JSON: {exc}") from exc
    except RecursionError:
        raise ParkwayError(f"{option} nests too deeply") from None


def without_password(url: str) -> str:
    """The URL with no password, neither in its user part nor as a ``password=`` (or
    ``sentinel_password=``) parameter."""
    parts = urlsplit(url)
    userinfo, at, host = parts.netloc.rpartition("@")
    user = userinfo.partition(":")[0]
    netloc = f"{user}@{host}" if at and user else host
    query = urlencode([(k, v) for k, v in parse_qsl(parts.query) if not k.lower().endswith("password")])
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def warn_missing(shards: tuple[int, ...], what: str) -> None:
    """A listing across shards holds what the shards that answered hold: say which did not."""
    if shards:
        named = ", ".join(str(i) for i in shards)
        print(f"warning: shard {named} of PARKWAY_SHARDS did not answer: its {what} are not listed", file=sys.stderr)


def ago(seconds: int | None) -> int | None:
    """The creation time an age bound stands for (epoch ms), or None."""
    return None if seconds is None else now_ms() - seconds * 1000
