"""The suite runs under pytest-xdist: what one worker uses (a Redis database, ports) is never another's."""

from __future__ import annotations

from pathlib import Path

import pytest
import redis

from tests.conftest import worker_redis_url
from tests.procs import RedisServer, free_port


def test_each_worker_gets_a_database_of_its_own_counting_down_from_the_urls() -> None:
    base = "redis://user:pw@127.0.0.1:6396/15"
    assert worker_redis_url(base, None) == base
    assert [worker_redis_url(base, f"gw{i}") for i in range(3)] == [
        "redis://user:pw@127.0.0.1:6396/15", "redis://user:pw@127.0.0.1:6396/14", "redis://user:pw@127.0.0.1:6396/13"
    ]
    assert worker_redis_url("redis://127.0.0.1:6379", "gw0") == "redis://127.0.0.1:6379/0"
    with pytest.raises(pytest.UsageError, match="fewer workers"):
        worker_redis_url("redis://127.0.0.1:6379/2", "gw3")


def test_ports_come_from_this_workers_share(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTEST_XDIST_WORKER_COUNT", "3")
    for share in range(3):
        monkeypatch.setenv("PYTEST_XDIST_WORKER", f"gw{share}")
        assert all(free_port() // 2 % 3 == share for _ in range(20))


def test_a_private_redis_whose_port_was_taken_meanwhile_starts_on_another(tmp_path: Path) -> None:
    """Another test's server took the port between the choice and the start: this one does not
    mistake that server for its own (its pid differs); it starts on a new port."""
    first, second = RedisServer(tmp_path / "a", appendonly=False), RedisServer(tmp_path / "b", appendonly=False)
    for srv in (first, second):
        srv.dir.mkdir()
    first.start()
    try:
        second.port = first.port
        second.start()
        try:
            assert second.port != first.port and second.proc is not None
            with redis.Redis.from_url(second.url) as client:
                assert int(client.info("server")["process_id"]) == second.proc.pid
        finally:
            second.stop()
    finally:
        first.stop()
