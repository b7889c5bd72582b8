"""Traces (DESIGN invariant 16, "a pause is a span, not a gap"): with OpenTelemetry's SDK as the
global tracer provider, a run is one trace from the HTTP request that started it, through its
pause and the answer another client gave, to its end; without a provider, or without
OpenTelemetry at all, parkway runs as ever and records nothing."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import redis
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.util._once import Once

from parkway import Parkway, Settings
from parkway.http.app import create_app
from parkway.runtime.clock import now_ms
from parkway.workers import jobs
from parkway.workers.serializer import MsgpackSerializer
from parkway.workers.worker import ParkwayWorker
from tests.conftest import SECRET
from tests.procs import ROOT

CALLER_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
CALLER_SPAN = "00f067aa0ba902b7"


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    """An SDK provider set as the global one (``set_tracer_provider``, the usual way), exporting to
    memory; unset after the test. OpenTelemetry lets a process set it once, so its two module globals
    are put back (as its own test utilities do) and later tests run untraced."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    try:
        yield exporter
    finally:
        provider.shutdown()
        trace._TRACER_PROVIDER = None
        trace._TRACER_PROVIDER_SET_ONCE = Once()


def _run_jobs(settings: Settings, connection: redis.Redis) -> None:
    """Every queued job, by parkway's worker in this thread (burst)."""
    from rq import Queue

    rt = jobs.install(settings)
    queue = Queue(settings.queue, connection=connection, serializer=MsgpackSerializer)
    ParkwayWorker([queue], connection=connection, runtime=rt).work(
        burst=True, logging_level="WARNING", with_maintenance=False
    )


def _start_over_http(pw: Parkway, traceparent: str) -> str:
    """POST /v1/runs to the app in this process (ASGI), with the caller's trace context."""

    async def post() -> str:
        app = create_app(pw)
        async with app.router.lifespan_context(app):
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://parkway") as client:
                reply = await client.post(
                    "/v1/runs", json={"workflow": "tests.trace_flows:asks_then_adds", "input": {}},
                    headers={"traceparent": traceparent},
                )
        assert reply.status_code == 201, reply.text
        return str(reply.json()["runId"])

    return asyncio.run(post())


def _ancestry(span: ReadableSpan, by_id: dict[int, ReadableSpan]) -> list[str]:
    """The span ids above ``span``, its parent first (the last may be a remote one: the caller's)."""
    out: list[str] = []
    while span.parent is not None:
        out.append(format(span.parent.span_id, "016x"))
        if span.parent.span_id not in by_id:
            break
        span = by_id[span.parent.span_id]
    return out


def _named(found: list[ReadableSpan], prefix: str) -> list[ReadableSpan]:
    return sorted((s for s in found if s.name.startswith(prefix)), key=lambda s: s.start_time or 0)


def test_a_run_started_over_http_is_one_trace_across_its_pause(
    spans: InMemorySpanExporter, redis_url: str, redis_client: redis.Redis
) -> None:
    """A run started by an HTTP request with a traceparent, paused, answered by another client and
    ended through a child run is one trace: its attempts descend from the caller's span, the wait is
    a span from the pause to the answer under the attempt that paused, the replay after the answer
    is linked to that attempt, and the child's attempt is a child of the parent's attempt."""
    settings = Settings(redis_url=redis_url, secret=SECRET, workflows=("tests.trace_flows", "tests.flows"))
    with Parkway(settings) as pw, Parkway(settings) as answering:
        run_id = _start_over_http(pw, f"00-{CALLER_TRACE}-{CALLER_SPAN}-01")
        _run_jobs(settings, redis_client)
        page = answering.list_interrupts(run_id=run_id, include_tokens=True)
        token = page.items[0].resume_token
        assert token is not None
        answered_at = page.items[0].created_at
        before = now_ms()
        assert answering.resume(token, selected="red", responder="ada").outcome.value == "accepted"
        after = now_ms()
        _run_jobs(settings, redis_client)
        assert pw.get_run(run_id).status.value == "completed"

    found = list(spans.get_finished_spans())
    assert {format(s.context.trace_id, "032x") for s in found if s.context} == {CALLER_TRACE}
    ours = [s for s in found if s.name.startswith("parkway.")]  # (FastAPI records spans of its own)
    assert len(ours) == 5 and all(s.attributes and "parkway.run_id" in s.attributes for s in ours)
    parent = [s for s in _named(found, "parkway.attempt") if s.attributes and s.attributes["parkway.run_id"] == run_id]
    child = [s for s in _named(found, "parkway.attempt") if s.attributes and s.attributes["parkway.run_id"] != run_id]
    assert [s.attributes and s.attributes["parkway.outcome"] for s in parent] == ["parked", "waiting", "completed"]
    assert [s.attributes and s.attributes["parkway.outcome"] for s in child] == ["completed"]
    paused, replayed, ended = parent
    by_id = {s.context.span_id: s for s in found if s.context}
    assert len({s.parent and s.parent.span_id for s in parent}) == 1  # the run's: its start's context
    assert CALLER_SPAN in _ancestry(paused, by_id)
    assert paused.attributes and paused.attributes["parkway.workflow"] == "asks_then_adds"
    assert paused.attributes["parkway.node"] == "ask_then_add" and paused.attributes["parkway.attempt"] == 1

    (wait,) = _named(found, "parkway.wait")
    assert wait.parent is not None and paused.context is not None and wait.parent.span_id == paused.context.span_id
    assert wait.attributes and wait.attributes["parkway.responder"] == "ada"
    assert wait.attributes["parkway.outcome"] == "resumed"
    assert wait.start_time == answered_at * 1_000_000  # the pause's time (the interrupt's creation)
    assert paused.start_time and paused.end_time and replayed.start_time and wait.end_time
    ms = 1_000_000  # the wait's times are parkway's: ms
    assert paused.start_time // ms <= wait.start_time // ms <= paused.end_time // ms  # from the pause...
    assert wait.end_time // ms <= replayed.start_time // ms  # ...to the answer, before its replay began
    assert before <= wait.end_time // ms <= after  # the answer's commit
    assert [link.context.span_id for link in replayed.links] == [paused.context.span_id]

    assert child[0].parent is not None and replayed.context is not None
    assert child[0].parent.span_id == replayed.context.span_id


def test_a_wait_ends_when_its_interrupt_is_cancelled_or_expires(
    spans: InMemorySpanExporter, redis_url: str, redis_client: redis.Redis
) -> None:
    """A run started by a caller with no span is a trace of its own under a parkway.start span; the
    wait of an interrupt cancelled ends at the cancel, one that expired at the reconciler's expiry,
    each saying so, a child of the attempt that paused."""
    from parkway.workers.reconciler import reconcile_once
    from tests import flows

    settings = Settings(redis_url=redis_url, secret=SECRET)
    with Parkway(settings) as pw:
        cancelled = pw.start(flows.one_choice, {})
        expired = pw.start(flows.expiring, {})  # its interrupt lasts 1 s
        _run_jobs(settings, redis_client)
        before = now_ms()
        pw.cancel(cancelled)
        after = now_ms()
        expires_at = pw.list_interrupts(run_id=expired).items[0].expires_at
        time.sleep(max(0.0, expires_at / 1000 - time.time()) + 0.05)
        reconcile_once(pw.store, pw.backend.dispatcher)
        expired_by = now_ms()

    found = list(spans.get_finished_spans())
    for run_id, outcome, lowest, highest in ((cancelled, "cancelled", before, after),
                                             (expired, "expired", expires_at, expired_by)):
        mine = [s for s in found if s.attributes and s.attributes.get("parkway.run_id") == run_id]
        (start,) = _named(mine, "parkway.start")
        (paused,) = _named(mine, "parkway.attempt")
        (wait,) = _named(mine, "parkway.wait")
        assert start.context and {s.context.trace_id for s in mine if s.context} == {start.context.trace_id}
        assert paused.parent and paused.parent.span_id == start.context.span_id
        assert wait.parent and paused.context and wait.parent.span_id == paused.context.span_id
        assert wait.attributes and wait.attributes["parkway.outcome"] == outcome
        assert wait.end_time and lowest <= wait.end_time // 1_000_000 <= highest


def test_each_retry_is_an_attempt_span_of_its_own(
    spans: InMemorySpanExporter, redis_url: str, redis_client: redis.Redis
) -> None:
    """A node retried twice is three attempt spans numbered 1 to 3, the first two ``retried``, the
    last ``completed``, each ended before the next began."""
    from tests import flows

    settings = Settings(redis_url=redis_url, secret=SECRET)
    with Parkway(settings) as pw:
        run_id = pw.start(flows.flaky, {"tag": "traced"})
        _run_jobs(settings, redis_client)
        assert pw.get_run(run_id).status.value == "completed"
    tries = _named(list(spans.get_finished_spans()), "parkway.attempt")
    assert [(s.attributes or {}).get("parkway.attempt") for s in tries] == [1, 2, 3]
    assert [(s.attributes or {}).get("parkway.outcome") for s in tries] == ["retried", "retried", "completed"]
    ends = [(a.end_time or 0, b.start_time or 0) for a, b in zip(tries[:-1], tries[1:], strict=True)]
    assert all(0 < end <= start for end, start in ends)
    assert len({s.parent and s.parent.span_id for s in tries}) == 1  # each a child of the run's start


_UNTRACED = """
import json, sys
{block}
from parkway import Parkway, Settings
from parkway.adapters.redis import keys
from tests import flows
settings = Settings(secret=sys.argv[1])  # embedded: its worker thread runs the jobs
with Parkway(settings) as pw:
    run_id = pw.start(flows.one_choice, {{}})
    pw.drain()
    token = pw.list_interrupts(run_id=run_id, include_tokens=True).items[0].resume_token
    outcome = pw.resume(token, selected="red").outcome.value
    pw.drain()
    run = pw.get_run(run_id)
    fields = sorted(k.decode() for k in pw.store.client.hkeys(keys.run(run_id)))
print(json.dumps({{"outcome": outcome, "status": run.status.value, "output": run.output, "fields": fields,
                  "otel": "opentelemetry" in sys.modules and sys.modules["opentelemetry"] is not None}}))
"""


def _untraced(block: str) -> dict[str, Any]:
    """Start, pause, answer and end a run (embedded) in a process of its own, after ``block``."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    out = subprocess.run(
        [sys.executable, "-W", "ignore", "-c", _UNTRACED.format(block=block), SECRET],
        capture_output=True, text=True, timeout=60, cwd=ROOT, env=env,
    )
    assert out.returncode == 0, out.stderr
    return dict(json.loads(out.stdout.splitlines()[-1]))


def test_without_a_provider_nothing_is_recorded_and_runs_go_on() -> None:
    """With OpenTelemetry importable but no tracer provider set, a run pauses, is answered and ends
    as ever, and no trace context is stored on its record."""
    seen = _untraced("from opentelemetry import trace  # no provider set")
    assert seen["otel"] is True
    assert (seen["outcome"], seen["status"], seen["output"]) == ("accepted", "completed", {"picked": "red",
                                                                                            "painted": "red"})
    assert "tc" not in seen["fields"] and "tp" not in seen["fields"]


def test_without_opentelemetry_parkway_runs_normally() -> None:
    """With OpenTelemetry not importable (blocked in ``sys.modules``), a run pauses, is answered and
    ends as ever, untraced."""
    seen = _untraced("sys.modules['opentelemetry'] = None")
    assert seen["otel"] is False
    assert (seen["outcome"], seen["status"]) == ("accepted", "completed")
    assert "tc" not in seen["fields"]
