"""PARKWAY_KEY_PREFIX: two applications share one Redis without seeing each other's keys or jobs."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import redis
from rq import Queue

from parkway import Parkway, RunStatus, Settings
from parkway.workers import jobs
from parkway.workers.serializer import MsgpackSerializer
from parkway.workers.worker import ParkwayWorker
from tests import flows
from tests.conftest import SECRET
from tests.procs import ROOT, Worker

OTHER_APP = """
import json, sys
from parkway import Parkway, Settings
from tests import flows
with Parkway(Settings(redis_url=sys.argv[1], secret=sys.argv[2])) as pw:
    run_id = pw.start(flows.one_choice, run_id="shared1")
    run = pw.wait(run_id, timeout=30)
    items = pw.list_interrupts(include_tokens=True).items
    print(json.dumps({"status": run.status.value, "queue": pw.settings.queue,
                      "listed": [i.run_id for i in items], "token": items[0].resume_token if items else None}))
"""


def _other_app(redis_url: str) -> dict[str, object]:
    env = {**os.environ, "PARKWAY_KEY_PREFIX": "app2", "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", OTHER_APP, redis_url, SECRET], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def test_two_prefixes_share_one_redis_apart(redis_url: str, redis_client: redis.Redis) -> None:
    """An application under PARKWAY_KEY_PREFIX=app2 (its own worker and queue) and one under the
    default both park a run with the same run id: each lists only its own, every key of app2's
    run starts with app2:, and its jobs went to the app2-parkway queue with app2- job ids."""
    worker = Worker(redis_url, SECRET, env={"PARKWAY_KEY_PREFIX": "app2"})
    try:
        other = _other_app(redis_url)
    finally:
        worker.stop()
    assert other["status"] == "waiting" and other["listed"] == ["shared1"] and other["queue"] == "app2-parkway"
    settings = Settings(redis_url=redis_url, secret=SECRET)
    with Parkway(settings) as pw:
        assert pw.list_interrupts().items == ()  # app2's pause is not this application's
        run_id = pw.start(flows.one_choice, run_id="shared1")  # the same id: no collision
        queue = Queue(settings.queue, connection=redis_client, serializer=MsgpackSerializer)
        ParkwayWorker([queue], connection=redis_client, runtime=jobs.install(settings)).work(
            burst=True, logging_level="WARNING", with_maintenance=False
        )
        assert pw.get_run(run_id).status is RunStatus.WAITING
        assert [i.run_id for i in pw.list_interrupts().items] == ["shared1"]
        assert pw.resume(str(other["token"]), selected="red").outcome.value == "unknown"  # not this app's run
    names = [k.decode() for k in redis_client.scan_iter(count=1000)]
    assert any(n.startswith("app2:{shared1}:") for n in names) and any(n.startswith("pw:{shared1}:") for n in names)
    assert not [n for n in names if "app2" in n and not n.startswith(("app2:", "rq:"))], names
    assert b"rq:queue:app2-parkway" in redis_client.smembers("rq:queues")
