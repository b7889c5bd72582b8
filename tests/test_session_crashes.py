"""Sessions when processes die: a worker SIGKILLed while a branch run's model call is in flight, and
Redis SIGKILLed and restarted from its AOF with branches parked and held."""

from __future__ import annotations

import os

import pytest

from parkway import Caller, Parkway, RunStatus, Settings
from tests import session_flows as sf
from tests.conftest import SECRET
from tests.procs import RedisServer, Worker, wait_for
from tests.test_sessions import _count, _hold_dir

pytestmark = pytest.mark.slow
ADA = Caller("user", "ada", "acme")



def test_a_worker_killed_mid_model_call_leaves_one_reply(private_redis: RedisServer) -> None:
    path = _hold_dir()
    with Parkway(Settings(redis_url=private_redis.url, secret=SECRET, lease_ms=1000)) as pw:
        sid = pw.sessions.open(sf.slow_model, owner="ada", tenant="acme")
        first = Worker(private_redis.url, SECRET)
        try:
            sent = pw.sessions.send(sid, path, caller=ADA)
            wait_for(lambda: _count(path, "model-calls") == 1, 20, "the model call")
            first.kill()
        finally:
            first.stop()
        os.remove(os.path.join(path, "hold"))
        second = Worker(private_redis.url, SECRET, env={"PARKWAY_LEASE_MS": "1000"})
        try:
            wait_for(lambda: pw.get_run(sent.run_id).status is RunStatus.COMPLETED, 30, "the run on the new worker")
        finally:
            second.stop()
        view = pw.sessions.get(sid)
        replies = [m.content for m in view.messages.values() if m.role == "assistant"]
        assert replies == ["call 2"] and view.messages[view.head].content == "call 2"
        assert [e.type for e in pw.stream(sent.run_id, timeout=5)].count("node.recovered") == 1


def test_parked_and_held_branches_survive_a_redis_sigkill(private_redis: RedisServer) -> None:
    path = _hold_dir()
    with Parkway(Settings(redis_url=private_redis.url, secret=SECRET)) as pw:
        worker = Worker(private_redis.url, SECRET, "--workers", "2")
        try:
            mail = pw.sessions.open(sf.mail, owner="ada", tenant="acme")
            asked = pw.sessions.send(mail, "mail bob", caller=ADA)
            tool = pw.sessions.open(sf.slow_tool_flow, owner="ada", tenant="acme")
            held = pw.sessions.send(tool, path, caller=ADA)
            wait_for(lambda: _count(path, "tool-calls") == 1, 20, "the tool call")
            pause = pw.sessions.raise_interrupt(tool, "hold on", caller=ADA)
            os.remove(os.path.join(path, "hold"))
            wait_for(lambda: pw.get_run(held.run_id).status is RunStatus.WAITING, 20, "the held run")
            wait_for(lambda: pw.sessions.get(mail).parked_by(), 20, "the approval")
            private_redis.kill()
            private_redis.start()  # same port, same directory: replays the AOF
            approval = pw.sessions.get(mail).parked_by()[0]
            assert pw.sessions.resume_interrupt(mail, approval, {"approved": True}, caller=ADA).outcome == "resumed"
            assert pw.sessions.resume_interrupt(tool, pause, caller=ADA).outcome == "resumed"
            wait_for(lambda: pw.get_run(asked.run_id).status is RunStatus.COMPLETED, 30, "the mail run")
            wait_for(lambda: pw.get_run(held.run_id).status is RunStatus.COMPLETED, 30, "the held run")
        finally:
            log = worker.stop()
        assert "Traceback" not in log, log[-3000:]
        for sid, expected in ((mail, "done: sent"), (tool, "after tool call 1")):
            view = pw.sessions.get(sid)
            assert view.messages[view.head].content == expected
