"""fork through its other entry points: AsyncParkway, the CLI as a process, HTTP on a real server."""

from __future__ import annotations

import asyncio
import json

import redis

from parkway import Parkway, RunStatus, Settings
from parkway.client.aio import AsyncParkway
from tests import flows_fork
from tests.conftest import SECRET, Harness
from tests.procs import wait_for
from tests.test_api import Server, _api, _token
from tests.test_cli import _assert_one_error_line, parkway
from tests.test_fork import START


def test_fork_awaited(harness: Harness) -> None:
    """AsyncParkway.fork re-opens the step as Parkway.fork does."""
    old = harness.start_and_run(flows_fork.three, START)

    async def go() -> str:
        return await AsyncParkway(client=harness.pw).fork(old, step=1, input={"x": 5})

    new = asyncio.run(go())
    harness.run_jobs()
    assert harness.pw.get_run(new).status is RunStatus.WAITING
    assert harness.pw.get_run(new).input == {"trail": ["in", "a"], "x": 5}


def test_parkway_fork_as_a_process(redis_client: redis.Redis, redis_url: str) -> None:
    """`parkway fork RUN --step N` prints the new run and where it came from; a step out of range and
    an unknown run are one clear error line, exit 1."""
    settings = Settings(redis_url=redis_url, secret=SECRET)
    with Parkway(settings) as pw:
        harness = Harness("redis", pw, settings, redis_client)
        old = harness.start_and_run(flows_fork.three, START)
        done = parkway("fork", old, "--step", "1", "--run-id", "cli-fork", "--input", '{"x": 2}',
                       "--redis-url", redis_url)
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout) == {"runId": "cli-fork", "forkedFrom": {"runId": old, "step": 1}}
        harness.run_jobs()
        assert pw.get_run("cli-fork").status is RunStatus.WAITING
        assert pw.get_run("cli-fork").input["x"] == 2
        _assert_one_error_line(parkway("fork", old, "--step", "9", "--redis-url", redis_url),
                               "has no step 9: it can be forked at steps 0 to 1")
        _assert_one_error_line(parkway("fork", "nope", "--step", "0", "--redis-url", redis_url), "no run 'nope'")


def test_http_fork(api_server: Server) -> None:
    """POST /v1/runs/{id}/fork answers 201 with the new run, which a worker process runs to its own
    pause; a bad step is a 422 and an unknown run a 404."""
    api = _api(api_server)
    old = api.post("/v1/runs", json={"workflow": "tests.flows_fork:three", "input": START}).json()["runId"]
    wait_for(lambda: api.get(f"/v1/runs/{old}").json()["status"] == "waiting", 20, "the run to pause")
    reply = api.post(f"/v1/runs/{old}/fork", json={"step": 1, "runId": "http-fork"})
    assert reply.status_code == 201, reply.text
    assert reply.json() == {"runId": "http-fork", "forkedFrom": {"runId": old, "step": 1}}
    wait_for(lambda: api.get("/v1/runs/http-fork").json()["status"] == "waiting", 20, "the fork to pause")
    assert _token(api, "http-fork")[0] != _token(api, old)[0]
    assert api.post(f"/v1/runs/{old}/fork", json={"step": 7}).status_code == 422
    assert api.post(f"/v1/runs/{old}/fork", json={"step": -1}).status_code == 422
    assert api.post("/v1/runs/nope/fork", json={"step": 0}).status_code == 404
