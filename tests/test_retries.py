"""A node's attempt that fails and is retried is recorded on its run: a ``node.retry`` event with the
attempt's number and its error (traceback included), and a journal entry, written with a fence
check in one step that also counts a retry and a failure by workflow."""

from __future__ import annotations

from typing import Any

from parkway.adapters.redis import keys
from tests import flows
from tests.conftest import Harness


def _counters(harness: Harness) -> dict[str, int]:
    return dict(harness.pw.store.tallies(0).counters)


def test_each_retried_attempt_is_an_event_with_its_error_before_the_node_completes(harness: Harness) -> None:
    """flaky fails twice, then completes: two node.retry events (attempts 1 and 2 of 3) with the
    error and its traceback, before node.completed; counted as two retries and two failures."""
    run_id = harness.start_and_run(flows.flaky, {"tag": "r1"})
    assert harness.pw.get_run(run_id).status.value == "completed"
    events = list(harness.pw.stream(run_id, timeout=10))
    types = [e.type for e in events]
    retries = [e.data for e in events if e.type == "node.retry"]
    assert [(r["attempt"], r["attempts"], r["node"], r["step"]) for r in retries] == [
        (1, 3, "sometimes", 0), (2, 3, "sometimes", 0)]
    assert all(r["error"]["type"] == "builtins.ConnectionError" and r["error"]["message"] == "transient"
               and "ConnectionError: transient" in r["error"]["traceback"] for r in retries)
    assert types.index("node.retry") < types.index("node.completed")
    counters = _counters(harness)
    assert (counters["retries:flaky"], counters["failures:flaky"], counters["runs:completed:flaky"]) == (2, 2, 1)
    assert sum(v for k, v in counters.items() if k.startswith("node:flaky:") and k != "node:flaky:sum_ms") == 1


def test_a_failure_past_its_retries_counts_each_failed_attempt(harness: Harness) -> None:
    """A node failing both its attempts: one node.retry, then the run fails; two failures counted."""
    from tests import flows_inbox

    run_id = harness.start_and_run(flows_inbox.deep_failure, {})
    run: Any = harness.pw.get_run(run_id)
    assert run.status.value == "failed" and "disagreed" in run.error.message
    assert [e.data["attempt"] for e in harness.pw.stream(run_id, timeout=10) if e.type == "node.retry"] == [1]
    counters = _counters(harness)
    wf = flows_inbox.deep_failure.name
    assert (counters[f"retries:{wf}"], counters[f"failures:{wf}"], counters[f"runs:failed:{wf}"]) == (1, 2, 1)
    if harness.connection is not None:  # the failed activation's journal keeps the retry (r:<attempt>)
        assert harness.connection.hexists(keys.journal(run_id, 0), "r:1")
