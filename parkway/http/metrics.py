"""Prometheus metrics for ``GET /metrics``: counters kept in Redis, read at scrape time.

Workers bump their counters inside the Lua script of the transition that causes them, in one
small hash (``keys.metrics``, no TTL), so one scrape of any API process sees the whole
deployment's work without scraping each worker, and the counts outlive every process:

=====================================  =========  ============================================
metric                                 type       counted by
=====================================  =========  ============================================
``parkway_interrupts_pending``         gauge      ``workflow``: unexpired pending interrupts,
                                                  a ZLEXCOUNT of the workflow's expiring index
                                                  at scrape time (for every workflow that parked
                                                  and still has an interrupt in an index:
                                                  ``pw:workflows``)
``parkway_interrupts_overdue``         gauge      interrupts past their expiry whose expiry no
                                                  reconciler has recorded yet (its backlog): a
                                                  ZLEXCOUNT of each expiring index up to now
``parkway_interrupt_overdue_seconds``  gauge      how long the oldest of them has waited past its
                                                  expiry (0 when there is none); the reconciler
                                                  logs ``expiry_overdue`` past 5 s
``parkway_resume_wait_seconds``        histogram  ``workflow``; resume.lua: from the interrupt's
                                                  creation to its accepted answer (or cancellation)
``parkway_resumes_total``              counter    ``outcome``, ``workflow``: ``accepted`` by
                                                  resume.lua (any client); ``already_resolved``,
                                                  ``expired``, ``unknown`` and ``invalid`` (422)
                                                  write nothing, so this API process counts those
                                                  it answered, since it started (``workflow`` "")
``parkway_runs_finished_total``        counter    ``status``, ``workflow``: ``completed``
                                                  (advance.lua), ``failed`` (finish, recover,
                                                  expire with on_expire="fail"), ``cancelled``
                                                  (finish), ``expired`` (expire)
``parkway_node_duration_seconds``      histogram  ``workflow``; advance.lua: a node's attempt that
                                                  completed, from its start to its commit
``parkway_node_retries_total``         counter    ``workflow``; write_entry.lua: a node's attempt that
                                                  failed and is retried (``node.retry``)
``parkway_node_failures_total``        counter    ``workflow``: a node's attempt that failed,
                                                  retried (write_entry.lua) or failing its run (finish)
``parkway_job_attempts_total``         counter    begin.lua: activations begun
``parkway_recoveries_total``           counter    recover.lua: lease expired, run requeued
``parkway_deferred_total``             counter    release.lua: ``node.deferred``
``parkway_activations_running``       gauge      runs holding a lease (``pw:leases``), at scrape
``parkway_jobs_outstanding``           gauge      jobs in the outbox, enqueued and not begun
``parkway_oldest_job_age_seconds``     gauge      age of the outbox's oldest job (0: none)
``parkway_notifications_owed``         gauge      notifications written, not yet delivered (``pw:notices``)
``parkway_notifications_dead``         gauge      notifications given up on (``pw:notices:dead``)
=====================================  =========  ============================================

Runs failed are ``parkway_runs_finished_total{status="failed"}``; ``parkway_node_failures_total``
counts failed attempts, retried or not. Counters written before they carried a workflow (a
deployment's older counts) show as ``workflow=""``.
Every series but the refused resumes is deployment-wide, so it reads the same from every API
process (aggregate with ``max``, not ``sum``, across them). A registry per app: nothing is added
to prometheus-client's global one.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

from ..runtime.store import Tallies

RUN_STATUSES = ("completed", "failed", "cancelled", "expired")
REFUSED = ("already_resolved", "expired", "unknown", "invalid")


class Refused:
    """Resumes this process refused (they write nothing in Redis), by outcome."""

    def __init__(self) -> None:
        self._counts: Counter[str] = Counter()
        self._lock = threading.Lock()

    def add(self, outcome: str) -> None:
        with self._lock:
            self._counts[outcome] += 1

    def snapshot(self) -> dict[str, int]:
        with self._lock:
            return dict(self._counts)


class ParkwayCollector(Collector):
    """Reads ``tallies()`` (Redis, two round trips) once per scrape and exposes it."""

    def __init__(self, tallies: Callable[[], Tallies], refused: Refused) -> None:
        self.tallies, self.refused = tallies, refused

    def collect(self) -> Iterator[Metric]:
        t = self.tallies()
        c = t.counters
        pending = GaugeMetricFamily(
            "parkway_interrupts_pending", "Pending, unexpired interrupts by workflow", labels=["workflow"]
        )
        for workflow, count in sorted(t.pending.items()):
            pending.add_metric([workflow], count)
        yield pending
        yield GaugeMetricFamily(
            "parkway_interrupts_overdue", "Interrupts past their expiry not yet expired by a reconciler",
            value=t.overdue,
        )
        yield GaugeMetricFamily(
            "parkway_interrupt_overdue_seconds", "How long the oldest overdue interrupt has waited past its expiry",
            value=t.overdue_ms / 1000,
        )
        yield _histogram(t, "wait", t.wait_buckets, "parkway_resume_wait_seconds",
                         "Time from an interrupt's creation to its accepted resume")
        yield _histogram(t, "node", t.node_buckets, "parkway_node_duration_seconds",
                         "Time a node's completed attempt ran, to its commit")
        resumes = CounterMetricFamily("parkway_resumes", "Resumes by outcome", labels=["outcome", "workflow"])
        for workflow, count in sorted(_accepted(t).items()):
            resumes.add_metric(["accepted", workflow], count)
        refused = self.refused.snapshot()
        for outcome in REFUSED:
            resumes.add_metric([outcome, ""], refused.get(outcome, 0))
        yield resumes
        runs = CounterMetricFamily("parkway_runs_finished", "Runs by final status", labels=["status", "workflow"])
        for status in RUN_STATUSES:
            for workflow, count in sorted(_by_workflow(c, f"runs:{status}").items()):
                runs.add_metric([status, workflow], count)
        yield runs
        for name, field, text in (("parkway_node_retries", "retries", "Node attempts that failed and were retried"),
                                  ("parkway_node_failures", "failures", "Node attempts that failed")):
            family = CounterMetricFamily(name, text, labels=["workflow"])
            for workflow, count in sorted(_by_workflow(c, field).items()):
                family.add_metric([workflow], count)
            yield family
        yield CounterMetricFamily("parkway_job_attempts", "Activations begun", value=c.get("attempts", 0))
        yield CounterMetricFamily(
            "parkway_recoveries", "Activations whose lease expired, requeued", value=c.get("recovered", 0)
        )
        yield CounterMetricFamily(
            "parkway_deferred", "Activations given back by a worker that cannot load the workflow",
            value=c.get("deferred", 0),
        )
        yield GaugeMetricFamily("parkway_activations_running", "Activations executing now (runs holding a lease)",
                                value=t.running)
        yield GaugeMetricFamily("parkway_jobs_outstanding", "Jobs enqueued (or to enqueue) and not yet begun",
                                value=t.outstanding)
        yield GaugeMetricFamily("parkway_notifications_owed", "Notifications written and not yet delivered",
                                value=t.notices)
        yield GaugeMetricFamily("parkway_notifications_dead", "Notifications given up on (dead letters)",
                                value=t.notices_dead)
        oldest = t.oldest_outstanding_at
        yield GaugeMetricFamily(
            "parkway_oldest_job_age_seconds", "How long the oldest job not yet begun has waited (0: none waits)",
            value=0.0 if oldest is None else max(0.0, time.time() - oldest / 1000),
        )


def _by_workflow(counters: dict[str, int], prefix: str) -> dict[str, int]:
    """``<prefix>:<workflow>`` fields by workflow (``<prefix>`` alone, written before counters had a
    workflow: ""); always at least the "" series, so a family is never empty."""
    out = {"": counters.get(prefix, 0)}
    for field, value in counters.items():
        head, sep, workflow = field.rpartition(":")
        if sep and head == prefix:
            out[workflow] = out.get(workflow, 0) + value
    if len(out) > 1 and not out[""]:
        del out[""]
    return out


def _accepted(t: Tallies) -> dict[str, int]:
    """Accepted resumes by workflow: the wait histogram's count (its buckets summed), or the
    ``resumes:accepted`` counter resume.lua kept beside it before the histogram alone counted them,
    whichever is larger (that counter no longer grows)."""
    names = {str(b) for b in t.wait_buckets} | {"+Inf"}
    counted: dict[str, int] = {}
    for field, value in t.counters.items():
        parts = field.split(":")
        if parts[0] == "wait" and len(parts) in (2, 3) and parts[-1] in names:
            workflow = parts[1] if len(parts) == 3 else ""
            counted[workflow] = counted.get(workflow, 0) + value
    before = _by_workflow(t.counters, "resumes:accepted")
    out = {w: max(counted.get(w, 0), before.get(w, 0)) for w in before | counted}
    if len(out) > 1 and not out[""]:
        del out[""]
    return out


def _histogram(t: Tallies, prefix: str, bounds: Sequence[float], name: str, text: str) -> HistogramMetricFamily:
    """A histogram by workflow from ``<prefix>:<wf>:<bound>`` and ``<prefix>:<wf>:sum_ms`` fields (and,
    for the wait, ``wait:<bound>`` and ``wait:sum_ms`` from before counters had a workflow: "")."""
    names = {str(b) for b in bounds} | {"+Inf", "sum_ms"}
    by: dict[str, dict[str, int]] = {}
    for field, value in t.counters.items():
        parts = field.split(":")
        if parts[0] != prefix or parts[-1] not in names or len(parts) not in (2, 3):
            continue
        workflow = parts[1] if len(parts) == 3 else ""
        by.setdefault(workflow, {})[parts[-1]] = value
    if not by:
        by[""] = {}  # an empty series rather than none (as before counters had a workflow)
    family = HistogramMetricFamily(name, text, labels=["workflow"])
    for workflow, counts in sorted(by.items()):
        buckets: list[tuple[str, float]] = []
        total = 0
        for bound in bounds:
            total += counts.get(str(bound), 0)
            buckets.append((str(float(bound)), total))
        total += counts.get("+Inf", 0)
        buckets.append(("+Inf", total))
        family.add_metric([workflow], buckets, counts.get("sum_ms", 0) / 1000)
    return family
