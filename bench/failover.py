"""Failover chaos: runs answered while the Redis primary under Sentinel is killed, frozen or switched.

``python -m bench.failover [--fault kill|freeze|switchover|bare] [--runs 100] [--acks 1] [--ack-ms 100]
[--timeout 180]``

Not a test. It starts, on loopback ports in a temp dir, a primary, two replicas and three
``redis-server --sentinel`` processes (``down-after-milliseconds`` 1000; ``tests.procs.SentinelGroup``),
a plain redis-server for the effect counters (never touched), and one ``parkway worker
--workers 2`` on the Sentinel string, restarted whenever it exits. Runs of
``bench.chaos_flows:chaos`` ask a text question, then a choice, each after a counted outside
effect (``use_step``). The driver answers every pending interrupt once; when a third of the
answers are acknowledged it applies the fault to the primary:

- ``kill``: SIGKILL, and once the sentinels name another master, restart it empty on its port
  (it comes back as a replica);
- ``freeze``: SIGSTOP until the sentinels name another master, then SIGCONT (it is demoted);
- ``switchover``: ``parkway failover`` (the fenced switchover: writes paused on the primary, the
  replicas caught up, ``SENTINEL FAILOVER``, then the old primary made a replica, its clients'
  connections closed, writes unpaused), its progress lines kept in the report;
- ``bare``: ``SENTINEL FAILOVER`` alone (what ``parkway failover`` replaces), for comparison.

It goes on until every run has ended and the old primary has been demoted to a replica (clients
still connected to it read there, until then, what it alone holds). It reports the acknowledged
resumes lost (an interrupt answered ``accepted`` that asks again
later: the answer vanished with the old primary), the outside effects run more than once, the
calls that raised ``StoreUnavailable`` (outcome unknown; asked again, the same answer reads
``accepted``), the journal writes a worker wrote again because their outcome was unknown (its
``write_unconfirmed`` log lines: a step's record among them, whose effect is then not done
again), and the write gap: from the fault to the first resume acknowledged after it, and the
longest wait between two acknowledged resumes from the fault on. Exit status 0 when nothing
acknowledged was lost and every run completed. An outside effect run twice is reported, not failed:
a write pause longer than the lease (``--lease-ms``) lets the reconciler take an attempt back while
its step's effect is done and its record not yet written, and ``use_step`` promises at-least-once
there (docs/concepts/exactly-once.md); ``--lease-ms 5000`` keeps a freeze of a second or two inside
the lease.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import redis

from parkway import Parkway, ResumeOutcome, Settings, StoreUnavailable
from tests.procs import RedisServer, SentinelGroup, Worker

from .chaos_flows import COUNTER_PREFIX

SECRET = "failover-secret-" + "f" * 40
SWITCHOVER_OUTPUT: list[str] = []
"""``parkway failover``'s output in a ``switchover`` trial"""
FLOW_REF = "bench.chaos_flows:chaos"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.failover", description=__doc__.split("\n\n")[0])
    parser.add_argument("--fault", choices=("kill", "freeze", "switchover", "bare"), default="kill")
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--acks", type=int, default=1, help="PARKWAY_REPLICA_ACKS (0: no WAIT)")
    parser.add_argument("--ack-ms", type=int, default=100, help="PARKWAY_REPLICA_ACK_MS")
    parser.add_argument("--timeout", type=float, default=180.0)
    parser.add_argument("--lease-ms", type=int, default=1500,
                        help="PARKWAY_LEASE_MS: a write pause longer than it lets the reconciler take an attempt back")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="parkway-failover-") as tmp:
        report = trial(Path(tmp), args)
    print(json.dumps(report, indent=2))
    return 0 if report["acknowledged_lost"] == 0 and set(report["statuses"]) == {"completed"} else 1


def trial(tmp: Path, args: argparse.Namespace) -> dict[str, Any]:
    (tmp / "group").mkdir()
    (tmp / "counter").mkdir()
    group = SentinelGroup(tmp / "group", replicas=2, sentinels=3)
    counter = RedisServer(tmp / "counter", appendonly=False)
    group.start()
    counter.start()
    env = {"CHAOS_COUNTER_URL": counter.url, "CHAOS_CPU_MS": "2", "PARKWAY_REPLICA_ACKS": str(args.acks),
           "PARKWAY_REPLICA_ACK_MS": str(args.ack_ms), "PARKWAY_WORKFLOWS": "bench.chaos_flows",
           "PARKWAY_LEASE_MS": str(args.lease_ms)}
    os.environ.update(env)  # the driver's own client reads the same settings
    stop = threading.Event()
    worker_restarts, outputs = [0], []
    keeper = threading.Thread(target=_keep_worker, args=(group.url, env, stop, worker_restarts, outputs), daemon=True)
    keeper.start()
    try:
        settings = Settings.from_env(redis_url=group.url, secret=SECRET)
        with Parkway(settings) as pw:
            report = _drive(pw, group, args, worker_restarts, redis.Redis.from_url(counter.url))
    finally:
        stop.set()
        keeper.join(30)
        group.stop()
        counter.stop()
    # a step's record (or other journal write) whose outcome was unknown, written again by its attempt
    report["journal_writes_written_again"] = sum(out.count("write_unconfirmed") for out in outputs)
    return report


def _keep_worker(url: str, env: dict[str, str], stop: threading.Event, restarts: list[int],
                 outputs: list[str]) -> None:
    """One ``parkway worker --workers 2``, started again whenever it exits; its output kept."""
    worker = Worker(url, SECRET, "--workers", "2", env=env)
    while not stop.wait(0.2):
        if worker.proc.poll() is not None:
            outputs.append(worker.stop())
            restarts[0] += 1
            worker = Worker(url, SECRET, "--workers", "2", env=env)
    outputs.append(worker.stop())


def _drive(pw: Parkway, group: SentinelGroup, args: argparse.Namespace, worker_restarts: list[int],
           counter: redis.Redis) -> dict[str, Any]:
    run_ids = []
    for n in range(args.runs):
        run_ids.append(_retrying(lambda n=n: pw.start(FLOW_REF, {"n": n})))  # type: ignore[misc]
    acknowledged: set[tuple[str, str]] = set()
    lost: list[tuple[str, str]] = []
    unknown_outcomes = 0
    fault_at: float | None = None
    first_ack_after: float | None = None
    fault_thread: threading.Thread | None = None
    ack_times: list[float] = []
    deadline = time.monotonic() + args.timeout
    while time.monotonic() < deadline:
        try:
            page = pw.list_interrupts(include_tokens=True, limit=500)
        except StoreUnavailable:
            continue
        pending = [i for i in page.items if i.run_id in set(run_ids)]
        if not pending and _all_ended(pw, run_ids) and _settled(group, fault_thread):
            break
        for item in pending:
            key = (item.run_id, item.request.question.split()[0])
            if key in acknowledged and key not in lost:
                lost.append(key)  # accepted once, asking again: that answer is gone
            answer: dict[str, Any] = {"value": "ok"} if item.request.kind == "text" else {"selected": "ship"}
            try:
                outcome = pw.resume(item.resume_token or "", **answer).outcome
            except StoreUnavailable:
                unknown_outcomes += 1
                continue
            if outcome is ResumeOutcome.ACCEPTED:
                acknowledged.add(key)
                ack_times.append(time.monotonic())
                if fault_at is not None and first_ack_after is None:
                    first_ack_after = time.monotonic()
        if fault_thread is None and len(acknowledged) >= args.runs * 2 // 3:
            fault_at = time.monotonic()
            fault_thread = threading.Thread(target=_fault, args=(group, args.fault), daemon=True)
            fault_thread.start()
        time.sleep(0.05)
    if fault_thread is not None:
        fault_thread.join(60)
    twice = sum(1 for k in counter.scan_iter(f"{COUNTER_PREFIX}*") if int(counter.get(k) or 0) > 1)
    statuses: dict[str, int] = {}
    failures: list[str] = []
    for r in run_ids:
        try:
            run = pw.get_run(r)
            status = run.status.value
        except StoreUnavailable:
            status = "unreadable"
        else:
            if run.error is not None:
                failures.append(f"{r}: {run.error.model_dump_json()[:300]}")
        statuses[status] = statuses.get(status, 0) + 1
    return {
        "fault": args.fault, "runs": args.runs, "replica_acks": args.acks, "replica_ack_ms": args.ack_ms,
        "acknowledged_resumes": len(acknowledged), "acknowledged_lost": len(lost),
        "effects_run_twice": twice, "store_unavailable_on_resume": unknown_outcomes,
        "write_gap_s": None if fault_at is None or first_ack_after is None else round(first_ack_after - fault_at, 2),
        "longest_ack_gap_s": _longest_gap(ack_times, fault_at),
        "worker_restarts": worker_restarts[0], "statuses": statuses, "failures": failures[:5],
        "effects_run_twice_by_effect": _twice_by_effect(counter),
        **({"parkway_failover": SWITCHOVER_OUTPUT} if args.fault == "switchover" else {}),
    }


def _longest_gap(times: list[float], since: float | None) -> float | None:
    """The longest wait between two acknowledged resumes from the fault on (a switchover's write
    gap: the fault starts with the command's own start-up, before its pause)."""
    if since is None:
        return None
    later = [since, *(t for t in times if t >= since)]
    return round(max((b - a for a, b in zip(later, later[1:], strict=False)), default=0.0), 2)


def _twice_by_effect(counter: redis.Redis) -> dict[str, int]:
    out: dict[str, int] = {}
    for k in counter.scan_iter(f"{COUNTER_PREFIX}*"):
        if int(counter.get(k) or 0) > 1:
            name = k.decode().rsplit(":", 1)[1]
            out[name] = out.get(name, 0) + 1
    return out


def _fault(group: SentinelGroup, fault: str) -> None:
    old = group.primary.port
    proc = group.primary.proc
    assert proc is not None
    if fault == "switchover":
        done = subprocess.run([sys.executable, "-m", "parkway.cli", "failover", "--redis-url", group.url],
                              capture_output=True, text=True, timeout=120)
        SWITCHOVER_OUTPUT.extend(done.stdout.splitlines() + done.stderr.splitlines()[-3:])
        if done.returncode != 0:
            raise RuntimeError(f"parkway failover exited {done.returncode}")
    elif fault == "bare":
        with group.sentinel() as s:
            s.execute_command("SENTINEL", "FAILOVER", group.name)
        group.wait_for_switch(old, timeout=60)
    elif fault == "kill":
        group.primary.kill()
        group.wait_for_switch(old, timeout=60)
        group.primary.start()  # empty, on its port: the sentinels make it a replica
    else:
        proc.send_signal(signal.SIGSTOP)
        try:
            group.wait_for_switch(old, timeout=60)
        finally:
            proc.send_signal(signal.SIGCONT)


def _settled(group: SentinelGroup, fault_thread: threading.Thread | None) -> bool:
    """Whether the fault is over and the old primary demoted (a replica): until then, clients still
    connected to it may read there what it alone holds, which its demotion discards."""
    if fault_thread is None:
        return False
    if fault_thread.is_alive():
        return False
    try:
        with redis.Redis(port=group.primary.port, socket_timeout=1) as old:
            return bool(old.execute_command("ROLE")[0] in (b"slave", "slave"))
    except redis.RedisError:
        return False


def _all_ended(pw: Parkway, run_ids: list[str]) -> bool:
    try:
        return all(pw.get_run(r).status.value in ("completed", "failed") for r in run_ids)
    except StoreUnavailable:
        return False


def _retrying(call: Any) -> Any:
    while True:
        try:
            return call()
        except StoreUnavailable:
            time.sleep(0.2)


if __name__ == "__main__":
    sys.exit(main())
