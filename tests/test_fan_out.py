"""use_workflows: children in parallel, results in order, failures as values, a bound on how many
run at a time, their interrupts under the root, cancel cascading to all (issue 25, beyond)."""

from __future__ import annotations

import pytest
import redis
from structlog.testing import capture_logs

from parkway import Parkway, RunStatus, ValidationError, use_workflows
from parkway.adapters.redis import keys
from parkway.runtime.hooks import child_run_id
from tests import flows_life
from tests.conftest import Harness


def _types(pw: Parkway, run_id: str) -> list[str]:
    return [e.type for e in pw.store.read_events(run_id, "0", None, 10_000)]


def _children(root: str, n: int) -> list[str]:
    return [child_run_id(root, 0, f"all.{i}") for i in range(n)]


def _most_running(pw: Parkway, root: str) -> int:
    """The most children running at once, from the order of the root's events."""
    running = most = 0
    for t in _types(pw, root):
        running += (t == "child.started") - (t in ("child.completed", "child.ended"))
        most = max(most, running)
    return most


def test_children_run_side_by_side_within_the_bound_and_their_outputs_come_back_in_order(harness: Harness) -> None:
    """Seven children, three at a time: the outputs come back in the order asked, never more than
    three ran at once, and each child started once."""
    with capture_logs() as logs:
        root = harness.start_and_run(flows_life.fans_out, {"n": 7, "limit": 3})
    assert [e for e in logs if e["log_level"] == "error"] == []  # no script erred on the way
    run = harness.pw.get_run(root)
    assert run.status is RunStatus.COMPLETED, run
    assert [(r["i"], r["square"]) for r in run.output["results"]] == [(i, i * i) for i in range(7)]
    assert _most_running(harness.pw, root) == 3
    assert _types(harness.pw, root).count("child.started") == 7
    for child in _children(root, 7):
        assert harness.pw.get_run(child).status is RunStatus.COMPLETED


def test_a_finished_child_keeps_only_its_summary_under_1_kb(harness: Harness) -> None:
    """A fan-out child's records go when it ends: its summary (its status) stays, under 1 KB; its
    output lives in the parent's result."""
    if harness.connection is None:
        pytest.skip("MEMORY USAGE is real Redis's")
    root = harness.start_and_run(flows_life.fans_out, {"n": 5, "limit": 5})
    assert harness.pw.get_run(root).status is RunStatus.COMPLETED
    client = harness.connection
    for child in _children(root, 5):
        tagged = [k for k in client.scan_iter(match=f"{keys.PREFIX}:{{{root}}}:{child}*")]
        assert tagged == [keys.summary(child).encode()], tagged
        assert client.memory_usage(keys.summary(child)) <= 1024


def test_failed_children_are_values_in_their_places_and_the_parent_completes(harness: Harness) -> None:
    """Children that fail do not fail the parent: each failure is a ChildFailed in its place, with
    the child's status and message; the others' outputs are where they belong."""
    root = harness.start_and_run(flows_life.fans_out, {"n": 5, "limit": 2, "fail": [1, 3]})
    run = harness.pw.get_run(root)
    assert run.status is RunStatus.COMPLETED, run
    results = run.output["results"]
    assert [r.get("failed") for r in results] == [None, "failed", None, "failed", None]
    assert "no square for 3" in results[3]["message"]
    assert [r["square"] for r in results[::2]] == [0, 4, 16]


def test_the_childrens_interrupts_are_listed_under_the_root_and_answered_from_there(harness: Harness) -> None:
    """Each running child's question is in list_interrupts(run_id=root); answering them from that
    listing starts the next children, whose questions show there in turn, until all are done."""
    root = harness.start_and_run(flows_life.fans_out, {"n": 5, "ask": True, "limit": 3})
    answered = 0
    while (page := harness.pw.list_interrupts(run_id=root, include_tokens=True)).items:
        assert len(page.items) <= 3 and {i.root_run_id for i in page.items} == {root}
        assert page.items == harness.pw.list_interrupts(run_id=root, include_tokens=True, limit=1).items + \
            harness.pw.list_interrupts(run_id=root, include_tokens=True,
                                       cursor=harness.pw.list_interrupts(run_id=root, limit=1).next_cursor).items
        for item in page.items:
            assert item.resume_token is not None
            color = "red" if int(item.run_id == _children(root, 5)[2]) else "blue"
            assert harness.pw.resume(item.resume_token, selected=color).accepted
            answered += 1
        harness.run_jobs()
    assert answered == 5
    run = harness.pw.get_run(root)
    assert run.status is RunStatus.COMPLETED, run
    assert [r["color"] for r in run.output["results"]] == ["blue", "blue", "red", "blue", "blue"]


def test_cancelling_the_parent_cancels_every_running_child_and_starts_no_more(harness: Harness) -> None:
    """cancel(root) during a fan-out ends the root cancelled at once, cancels each running child
    (their questions leave the listing) and starts none of the others; the root's node never replays."""
    root = harness.start_and_run(flows_life.fans_out, {"n": 5, "ask": True, "limit": 2})
    assert len(harness.pw.list_interrupts(run_id=root).items) == 2
    result = harness.pw.cancel(root, reason="enough", responder="ops")
    assert result.status is RunStatus.CANCELLED and result.outcome.value == "cancelled"
    harness.run_jobs()
    statuses = [harness.pw.get_run(c).status for c in _children(root, 2)]
    assert statuses == [RunStatus.CANCELLED] * 2
    for child in _children(root, 5)[2:]:
        with pytest.raises(Exception, match="no run"):
            harness.pw.get_run(child)
    assert harness.pw.list_interrupts(run_id=root).items == ()
    assert harness.pw.list_interrupts().items == ()
    assert _types(harness.pw, root).count("node.started") == 1
    assert harness.pw.get_run(root).status is RunStatus.CANCELLED


def test_use_workflows_checks_its_arguments() -> None:
    """An empty or oversize list, a non-pair, or a bound outside 1-1000 is refused before anything starts."""
    from parkway.runtime.hooks import NodeContext, activate

    ctx = NodeContext.__new__(NodeContext)
    token = activate(ctx)
    try:
        for calls, limit in (([], 3), ([(flows_life.square, {})] * 1001, 3), ([flows_life.square], 3),
                             ([(flows_life.square, {})], 0), ([(flows_life.square, {})], True)):
            with pytest.raises(ValidationError):
                use_workflows(calls, id="x", limit=limit)  # type: ignore[arg-type]
    finally:
        from parkway.runtime.hooks import deactivate

        deactivate(token)


def test_a_childs_long_question_keeps_the_fan_out_set_as_long_as_itself(harness: Harness) -> None:
    """A child asking for longer than the run's TTL keeps its parent's fan-out set alive with the
    parent's other records, so its end still finds itself there and moves the parent."""
    root = harness.start_and_run(flows_life.fans_out, {"n": 2, "ask": True, "limit": 2}, ttl_ms=60_000)
    client = harness.pw.store.client  # type: ignore[attr-defined]
    assert client.pttl(keys.fanout(root)) > 500_000  # the children's questions last 600 s
    assert client.pttl(keys.run(root)) > 500_000
    for item in harness.pw.list_interrupts(run_id=root, include_tokens=True).items:
        assert item.resume_token is not None and harness.pw.resume(item.resume_token, selected="red").accepted
    harness.run_jobs()
    assert harness.pw.get_run(root).status is RunStatus.COMPLETED


@pytest.mark.slow
def test_with_two_live_workers_every_fan_out_completes_in_order_within_its_bound(
    redis_client: object, redis_url: str
) -> None:
    """2 worker processes, quick children 4 at a time, three fan-outs at once: children end while their
    parent replays (their ends find it running, record their outputs and queue nothing), yet every
    fan-out completes with all its outputs in order, never more than 4 children running."""
    from parkway import Settings
    from tests.conftest import SECRET
    from tests.procs import Worker, wait_for

    procs = [Worker(redis_url, SECRET) for _ in range(2)]
    try:
        with Parkway(Settings(redis_url=redis_url, secret=SECRET)) as pw:
            roots = [pw.start(flows_life.fans_out, {"n": 24, "limit": 4}) for _ in range(3)]
            for root in roots:
                run = wait_for(lambda root=root: (r := pw.get_run(root)).status.finished and r, 60, f"{root}'s end")
                assert run.status is RunStatus.COMPLETED, run
                assert [r["square"] for r in run.output["results"]] == [i * i for i in range(24)]
                assert _most_running(pw, root) <= 4
    finally:
        for proc in procs:
            proc.stop()


@pytest.mark.slow
def test_cancel_in_the_middle_of_a_fan_out_with_two_live_workers_stops_every_child(
    redis_client: redis.Redis, redis_url: str
) -> None:
    """100 quick children 10 at a time on 2 worker processes, cancel(root) at a different point of
    the fan-out in each of 20 trials (the fan-out queued, running or waiting between children; the
    root's own in even trials, its child's in odd ones): no node of the tree begins after cancel
    returns, and every child that had not ended by then ends cancelled."""
    from rq import Queue

    from parkway import Settings
    from parkway.errors import RunNotFound
    from parkway.workers.serializer import MsgpackSerializer
    from tests.conftest import SECRET
    from tests.procs import Worker, wait_for

    settings = Settings(redis_url=redis_url, secret=SECRET)
    queue = Queue(settings.queue, connection=redis_client, serializer=MsgpackSerializer)

    def attempts() -> int:  # begin.lua counts every attempt it lets begin
        return int(redis_client.hget(keys.metrics(), "attempts") or 0)

    def idle() -> bool:
        return queue.count == 0 and redis_client.zcard(keys.leases()) == 0

    procs = [Worker(redis_url, SECRET) for _ in range(2)]
    try:
        with Parkway(settings) as pw:
            cut: list[int] = []  # children cancelled in each trial
            for trial in range(20):
                data = {"n": 100, "limit": 10}
                if trial % 2 == 0:
                    root = fan = pw.start(flows_life.fans_out, data)
                else:  # the fan-out's children are the root's grandchildren
                    root = pw.start(flows_life.nests_fan_out, data)
                    fan = child_run_id(root, 0, "fan")
                ended_first = 1 + trial % 10 * 3  # children ended before the cancel: 1 to 28
                wait_for(lambda fan=fan, n=ended_first: _ended(pw, fan, n), 30, f"{ended_first} children of {fan}",
                         interval=0.002)
                result = pw.cancel(root, reason="enough", responder="ops")
                begun = attempts()
                wait_for(idle, 30, "idle workers")
                assert result.status is RunStatus.CANCELLED, (trial, result)
                assert attempts() == begun, f"trial {trial}: {attempts() - begun} node(s) began after cancel returned"
                ended = {e.data["childRunId"] for e in pw.store.read_events(fan, "0", None, 10_000)
                         if e.type in ("child.completed", "child.ended")}
                statuses = {}
                for child in _children(fan, 100):
                    try:
                        statuses[child] = pw.get_run(child).status
                    except RunNotFound:
                        continue  # never started
                    if child not in ended:
                        assert statuses[child] is RunStatus.CANCELLED, (trial, child, statuses[child])
                assert pw.get_run(fan).status is RunStatus.CANCELLED
                cut.append(len(statuses) - len(ended))
        assert sum(1 for n in cut if n) >= 5, cut  # the trials cut fan-outs short with children running
    finally:
        for proc in procs:
            proc.stop()


def _ended(pw: Parkway, fan: str, n: int) -> bool:
    """Whether at least ``n`` children of the fan-out ``fan`` have ended (its stream says so; none
    while the run is not created yet)."""
    return _types(pw, fan).count("child.completed") >= n


def test_a_fan_outs_children_are_its_trees_tenant_owner_and_origin(harness: Harness) -> None:
    """Each child of a fan-out is created whose its tree is: tenant, owner and origin on its record
    and its summary, its questions listed under the tree's tenant and nobody else's."""
    root = harness.start_and_run(flows_life.fans_out, {"n": 3, "ask": True, "limit": 2}, tenant="acme", owner="ada",
                                 origin="frontend")
    client = harness.pw.store.client  # type: ignore[attr-defined]
    for child in _children(root, 2):
        record = harness.pw.store.get_run(child, 0)
        assert record is not None and (record.tenant, record.owner, record.origin) == ("acme", "ada", "frontend")
        assert client.hmget(keys.summary(child), "tenant", "owner", "origin") == [b"acme", b"ada", b"frontend"]
    assert {i.run_id for i in harness.pw.list_interrupts(tenant="acme").items} == set(_children(root, 2))
    assert harness.pw.list_interrupts(tenant="other").items == ()


def test_a_fan_out_starts_the_next_child_as_soon_as_any_one_ends(harness: Harness) -> None:
    """Four asking children, two at a time: the end of either running child starts the next one
    at once while the other still asks (the bound refills child by child, never waiting for a batch)."""
    root = harness.start_and_run(flows_life.fans_out, {"n": 4, "ask": True, "limit": 2})
    kids = _children(root, 4)

    def asking() -> dict[str, str]:
        page = harness.pw.list_interrupts(run_id=root, include_tokens=True)
        return {i.run_id: str(i.resume_token) for i in page.items}

    for ends, then in ((kids[1], {kids[0], kids[2]}), (kids[0], {kids[2], kids[3]}), (kids[3], {kids[2]})):
        assert harness.pw.resume(asking()[ends], selected="red").accepted
        harness.run_jobs()
        assert set(asking()) == then
        assert harness.pw.get_run(root).status is RunStatus.WAITING
    assert harness.pw.resume(asking()[kids[2]], selected="blue").accepted
    harness.run_jobs()
    run = harness.pw.get_run(root)
    assert run.status is RunStatus.COMPLETED and [r["color"] for r in run.output["results"]] == [
        "red", "red", "blue", "red"]
