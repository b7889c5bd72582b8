"""One signing key per deployment: a client or a worker started with another key than the one the
deployment's Redis holds is refused at start, saying why, and leaves no connection open."""

from __future__ import annotations

import pytest
import redis

from parkway import ConfigError, Parkway, Settings
from tests.conftest import SECRET, Closing
from tests.procs import Worker


def test_a_client_with_another_key_is_refused_at_start(
    redis_url: str, redis_client: redis.Redis, closing: Closing
) -> None:
    """A second client with a different PARKWAY_SECRET, or none at all, is refused with an error
    that says why; the key itself is not stored, only a fingerprint."""
    closing(Parkway(Settings(redis_url=redis_url, secret=SECRET)))
    with pytest.raises(ConfigError, match="PARKWAY_SECRET"):
        Parkway(Settings(redis_url=redis_url, secret="another-secret-" + "y" * 32))
    with pytest.raises(ConfigError, match="generated in Redis"):
        Parkway(Settings(redis_url=redis_url))
    stored = b"".join(redis_client.mget([k for k in redis_client.scan_iter("pw:*")]) or [])
    assert SECRET.encode() not in stored
    closing(Parkway(Settings(redis_url=redis_url, secret=SECRET)))  # the same key is welcome


def _connections(client: redis.Redis) -> int:
    """Connections open on the client's database (other databases belong to other test sessions)."""
    db = str(client.connection_pool.connection_kwargs.get("db", 0))
    return sum(1 for c in client.client_list() if str(c["db"]) == db)


def test_a_client_refused_at_start_leaves_no_connection_open(
    redis_url: str, redis_client: redis.Redis, closing: Closing
) -> None:
    """A Parkway refused for another key closes the connection it opened to find out, even while the
    error (and everything its traceback holds) is still alive."""
    closing(Parkway(Settings(redis_url=redis_url, secret=SECRET)))
    before = _connections(redis_client)
    with pytest.raises(ConfigError) as refused:
        Parkway(Settings(redis_url=redis_url, secret="another-secret-" + "y" * 32))
    assert refused.traceback and _connections(redis_client) == before


@pytest.mark.slow
def test_a_worker_with_another_key_refuses_to_start(
    redis_url: str, redis_client: redis.Redis, closing: Closing
) -> None:
    """`parkway worker` whose PARKWAY_SECRET differs from the clients' exits non-zero saying so."""
    closing(Parkway(Settings(redis_url=redis_url, secret=SECRET)))
    worker = Worker(redis_url, "a-different-secret-" + "z" * 32, "--burst")
    worker.proc.wait(30)
    out = worker.stop()
    assert worker.proc.returncode != 0 and "PARKWAY_SECRET" in out, out
