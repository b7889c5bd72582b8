"""The walk from ``Parkway.resume`` to the node's first line on replay makes each check once, in one
place: the request is validated where it is made (at park), the resume script reads the interrupt
it takes once, and the attempt's begin returns the run's record, not the whole run hash."""

from __future__ import annotations

import dataclasses
import re
from importlib import resources

from parkway.adapters.redis import layout
from parkway.adapters.redis.store import RedisStore
from parkway.runtime.clock import now_ms
from parkway.runtime.protocol import RunStatus
from tests import flows
from tests.conftest import Harness


def test_resume_commit_reads_neither_the_token_nor_the_step_again() -> None:
    """resume_commit takes the interrupt resume_refused read (its request id and the run's step) as
    an argument: the exactly-once check and the commit read them once, in one place."""
    source = resources.files("parkway.adapters.redis").joinpath("_resume.lua").read_text()
    body = re.search(r"local function resume_commit\(K, A, pending\)\n(.*?)\nend\n", source, re.S)
    assert body is not None
    assert "A.token_field" not in body.group(1) and "'step'" not in body.group(1)


def test_begin_returns_the_run_record_not_the_run_hash(harness: Harness) -> None:
    """After an answer, the attempt's begin returns the run's RunRecord fields (``layout.RUN_FIELDS``),
    not the answered interrupt's record parts or its token field, and reads the run as a full read does."""
    store = harness.pw.store
    assert isinstance(store, RedisStore)
    run_id = harness.start_and_run(flows.stepper, {"tag": "walk"})
    assert harness.pw.resume(harness.token(run_id), selected="red").accepted
    before = store.get_run(run_id, now_ms())
    assert before is not None and before.status is RunStatus.QUEUED
    now = now_ms()
    command, attempt_of = store.begin_command(run_id, None, before.fence, now, now + 60_000)
    reply = store.client.execute_command(*command)
    names = {name.decode() for name in reply[0][::2]}
    assert names <= set(layout.RUN_FIELDS), names - set(layout.RUN_FIELDS)
    assert {"rq", "rn", "r0"}.isdisjoint(names)
    began = attempt_of(reply).run
    assert began.status is RunStatus.RUNNING
    assert dataclasses.replace(began, status=before.status, updated_at=before.updated_at) == before
