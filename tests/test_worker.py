"""parkway's worker class: RQ's bookkeeping trimmed, its guarantees kept."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from rq import Queue, SimpleWorker

from parkway import Parkway, RunStatus, Settings
from parkway.workers import jobs
from parkway.workers.serializer import MsgpackSerializer
from parkway.workers.worker import ParkwayWorker
from tests import flows
from tests.conftest import SECRET
from tests.procs import RedisServer


@pytest.fixture
def private_redis(tmp_path: Path) -> Iterator[RedisServer]:
    """A server of the test's own, so INFO commandstats counts only this test's commands."""
    server = RedisServer(tmp_path, appendonly=False)
    server.start()
    yield server
    server.stop()


def _worker_commands(url: str, worker_class: type[SimpleWorker], runs: int) -> tuple[dict[str, int], list[str]]:
    settings = Settings(redis_url=url, secret=SECRET)
    pw = Parkway(settings)
    run_ids = [pw.start(flows.loop, {}) for _ in range(runs)]
    client = redis.Redis.from_url(url)
    client.config_resetstat()
    jobs.install(settings)
    queue = Queue(settings.queue, connection=client, serializer=MsgpackSerializer)
    worker_class([queue], connection=client, serializer=MsgpackSerializer).work(burst=True, logging_level="WARNING")
    stats = client.info("commandstats")
    calls = {name.removeprefix("cmdstat_"): int(v["calls"]) for name, v in stats.items()}
    statuses = [pw.get_run(r).status.value for r in run_ids]
    client.flushall()
    return calls, statuses


def test_parkway_worker_sends_fewer_bookkeeping_commands_than_rq(private_redis: RedisServer) -> None:
    """Over 30 jobs, ParkwayWorker skips most worker-key heartbeats (EXPIREs) and suspension
    checks (EXISTS) that stock RQ sends, and every run still completes."""
    stock, stock_status = _worker_commands(private_redis.url, SimpleWorker, 30)
    ours, our_status = _worker_commands(private_redis.url, ParkwayWorker, 30)
    assert stock_status == our_status == [RunStatus.COMPLETED.value] * 30
    assert stock["expire"] - ours.get("expire", 0) >= 4 * 30, (stock["expire"], ours.get("expire"))
    assert ours.get("exists", 0) * 3 <= stock["exists"], (stock["exists"], ours.get("exists"))
