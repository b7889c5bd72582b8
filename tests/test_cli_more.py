"""`parkway replay` and `parkway serve`, run as real processes."""

from __future__ import annotations

import json
import subprocess
import sys

import httpx
import redis

from parkway import Parkway, Settings
from parkway.http.app import hash_key
from tests import flows
from tests.conftest import SECRET, Closing
from tests.procs import ROOT, answers, free_port, wait_for
from tests.test_cli import _env, parkway


def test_replay_reports_consistent_or_nondeterministic_by_exit_status(
    redis_url: str, redis_client: redis.Redis, closing: Closing
) -> None:
    """replay exits 0 for the code the run recorded and 3 for code whose hooks changed, with JSON."""
    from tests.conftest import Harness

    settings = Settings(redis_url=redis_url, secret=SECRET)
    harness = Harness("redis", closing(Parkway(settings)), settings, redis_client)
    run_id = harness.start_and_run(flows.announcer, {"tag": "cli"})
    env = _env(PARKWAY_REDIS_URL=redis_url)
    same = parkway("replay", run_id, "--against", "tests.flows:announcer", env=env)
    assert same.returncode == 0 and json.loads(same.stdout)["outcome"] == "consistent", same.stderr
    changed = parkway("replay", run_id, "--against", "tests.flows:announcer_changed", env=env)
    assert changed.returncode == 3 and json.loads(changed.stdout)["outcome"] == "nondeterministic", changed.stderr


def test_serve_answers_health_and_refuses_without_keys(redis_url: str, redis_client: redis.Redis) -> None:
    """`parkway serve` without keys, or without the workflows it may import, refuses to start; with both
    it serves /healthz and /v1 for the key."""
    refused = parkway("serve", "--port", str(free_port()), env=_env(PARKWAY_REDIS_URL=redis_url))
    assert refused.returncode == 1 and "PARKWAY_API_KEYS" in refused.stderr
    port = free_port()
    env = _env(PARKWAY_REDIS_URL=redis_url, PARKWAY_API_KEYS=f"{hash_key('k' * 32)}=machine")
    unlisted = parkway("serve", "--port", str(port), env=env)
    assert unlisted.returncode == 1 and "PARKWAY_WORKFLOWS" in unlisted.stderr  # it would import what callers name
    proc = subprocess.Popen([sys.executable, "-m", "parkway.cli", "serve", "--port", str(port), "--workflows", "tests"],
                            cwd=ROOT, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        wait_for(lambda: answers(f"http://127.0.0.1:{port}"), 30, "parkway serve to answer")
        listed = httpx.get(f"http://127.0.0.1:{port}/v1/interrupts", headers={"Authorization": "Bearer " + "k" * 32})
        assert listed.status_code == 200 and listed.json()["items"] == []
    finally:
        proc.terminate()
        proc.wait(10)
        assert proc.stderr is not None
        proc.stderr.close()
