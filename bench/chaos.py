"""Chaos: many two-interrupt runs while workers are SIGKILLed and Redis is SIGKILLed and restarted.

``python -m bench.chaos [--runs 500] [--workers 3] [--kill-every 1.0] [--redis-restarts 2]
[--seed N] [--timeout 600]``

Not a test (pytest never collects it, CI never runs it). It starts its own redis-server with
AOF (``--appendfsync always``) in a temp dir, a second never-killed redis-server for the
side-effect counters, and ``--workers`` ``parkway worker`` processes (lease 1500 ms), each
writing to its own log file. Runs of ``bench.chaos_flows:chaos`` ask a text question and
then a choice. The driver finds waiting runs with ``list_interrupts(include_tokens=True)``
and answers each interrupt once (a call that raised StoreUnavailable is retried, and
counted). A chaos thread SIGKILLs a random worker every ``--kill-every`` seconds and starts
a replacement at once, and SIGKILLs redis-server ``--redis-restarts`` times (when 1/3 and
2/3 of the answers and completions are in, or at 1/3 and 2/3 of the timeout), restarting it on the same
port and directory so it replays its AOF.

At the end it checks every run's status, its event stream (each ``node.completed``,
``interrupt`` and ``interrupt.resumed`` once per (node, step)), its output and the effect
counters, and prints a report. Exit code 0 if no run is lost and no transition was
committed twice, else 1.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import redis

from parkway import Parkway, ResumeOutcome, RunStatus, Settings, StoreUnavailable, ValidationError
from parkway import logs as parkway_logs
from parkway.runtime.errors import ParkwayError

from .chaos_flows import CHOICES, WORKFLOW, counter_key

ROOT = Path(__file__).absolute().parent.parent
SECRET = "chaos-secret-" + "c" * 40
FLOW_REF = "bench.chaos_flows:chaos"
LEASE_MS = 1500
RETRY_SLEEP = 0.25
T = TypeVar("T")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def log(msg: str) -> None:
    print(f"[chaos {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# --- processes ------------------------------------------------------------------------


class RedisProc:
    """A redis-server on a fixed port and directory; SIGKILL and restart replay its AOF."""

    def __init__(self, directory: Path, *, aof: bool, fsync: str = "always") -> None:
        self.dir, self.port, self.aof, self.fsync = directory, free_port(), aof, fsync
        self.proc: subprocess.Popen[bytes] | None = None
        directory.mkdir(parents=True, exist_ok=True)

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self, timeout: float = 60.0) -> float:
        """Start and wait until it answers PING (past AOF loading); return the seconds taken."""
        t0 = time.monotonic()
        args = [
            "redis-server",
            "--port",
            str(self.port),
            "--bind",
            "127.0.0.1",
            "--dir",
            str(self.dir),
            "--save",
            "",
            "--appendonly",
            "yes" if self.aof else "no",
            "--appendfsync",
            self.fsync,
            "--logfile",
            str(self.dir / "redis.log"),
            "--daemonize",
            "no",
        ]
        self.proc = subprocess.Popen(
            args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=self.dir, start_new_session=True
        )
        client = redis.Redis(port=self.port, socket_connect_timeout=1, socket_timeout=2)
        try:
            while True:
                try:
                    if bool(client.ping()):
                        return time.monotonic() - t0
                except (redis.exceptions.BusyLoadingError, redis.ConnectionError, redis.TimeoutError):
                    pass
                if self.proc.poll() is not None:
                    raise RuntimeError(f"redis-server exited with {self.proc.returncode}; see {self.dir}/redis.log")
                if time.monotonic() - t0 > timeout:
                    raise RuntimeError(f"redis-server on port {self.port} did not answer PING in {timeout}s")
                time.sleep(0.02)
        finally:
            client.close()

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.kill()


class WorkerProc:
    """``python -m parkway.cli worker`` with its output in a file of its own."""

    def __init__(self, number: int, url: str, env: dict[str, str], logdir: Path) -> None:
        self.number = number
        self.log_path = logdir / f"worker-{number:04d}.log"
        with open(self.log_path, "wb") as out:  # the child keeps its own descriptor
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "parkway.cli", "worker", "--redis-url", url],
                cwd=ROOT,
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,  # Ctrl-C in the terminal reaches the driver only
            )
        self.started = time.monotonic()

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)

    def stop(self, grace: float) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(grace)
            except subprocess.TimeoutExpired:
                pass
        self.kill()


# --- the chaos thread -------------------------------------------------------------------


class Chaos:
    """Keeps ``n`` workers up, SIGKILLs one every ``kill_every`` s, restarts Redis when due."""

    def __init__(
        self,
        args: argparse.Namespace,
        redis_proc: RedisProc,
        env: dict[str, str],
        logdir: Path,
        progress: Callable[[], float],
    ) -> None:
        self.args, self.redis, self.env, self.logdir, self.progress = args, redis_proc, env, logdir, progress
        self.rng = random.Random(args.seed)
        self.lock = threading.Lock()
        self.workers: list[WorkerProc] = []
        self.all_workers: list[WorkerProc] = []
        self.kills = 0
        self.unexpected_exits: list[tuple[int, int | None]] = []
        self.redis_restarts = 0
        self.redis_downtime: list[float] = []
        self.redis_down = threading.Event()
        self.stop_event = threading.Event()
        self.error: BaseException | None = None
        self.t0 = time.monotonic()
        self.thread = threading.Thread(target=self._loop, name="chaos", daemon=True)

    def spawn(self) -> WorkerProc:
        with self.lock:
            w = WorkerProc(len(self.all_workers) + 1, self.redis.url, self.env, self.logdir)
            self.workers.append(w)
            self.all_workers.append(w)
            return w

    def start(self) -> None:
        for _ in range(self.args.workers):
            self.spawn()
        self.t0 = time.monotonic()
        self.thread.start()

    def _restart_due(self) -> bool:
        if self.redis_restarts >= self.args.redis_restarts:
            return False
        mark = (self.redis_restarts + 1) / (self.args.redis_restarts + 1)
        return bool(self.progress() >= mark or time.monotonic() - self.t0 >= mark * self.args.timeout)

    def _loop(self) -> None:
        try:
            next_kill = time.monotonic() + self.args.kill_every
            while not self.stop_event.wait(0.05):
                self._replace_dead()
                if self._restart_due():
                    self._restart_redis()
                if self.args.kill_every > 0 and time.monotonic() >= next_kill:
                    next_kill += self.args.kill_every
                    self._kill_one()
        except BaseException as exc:  # reported by the driver
            self.error = exc

    def _replace_dead(self) -> None:
        with self.lock:
            dead = [w for w in self.workers if not w.alive()]
            for w in dead:
                self.workers.remove(w)
                self.unexpected_exits.append((w.number, w.proc.returncode))
        for w in dead:
            log(f"worker {w.number} (pid {w.pid}) exited by itself with {w.proc.returncode}; replacing it")
            self.spawn()

    def _kill_one(self) -> None:
        with self.lock:
            if not self.workers:
                return
            victim = self.rng.choice(self.workers)
            self.workers.remove(victim)
        victim.kill()
        self.kills += 1
        self.spawn()

    def _restart_redis(self) -> None:
        log(
            f"SIGKILL redis-server (restart {self.redis_restarts + 1}/{self.args.redis_restarts}, "
            f"progress {self.progress():.0%})"
        )
        self.redis_down.set()
        t0 = time.monotonic()
        self.redis.kill()
        time.sleep(self.rng.uniform(0.2, 1.0))  # stay down a moment: calls in flight fail
        self.redis.start()
        self.redis_down.clear()
        self.redis_downtime.append(time.monotonic() - t0)
        self.redis_restarts += 1
        log(f"redis-server answers PING again after {self.redis_downtime[-1]:.2f}s")

    def stop(self) -> None:
        self.stop_event.set()
        self.thread.join(15)

    def stop_workers(self) -> None:
        with self.lock:
            workers = list(self.workers)
            self.workers.clear()
        for w in workers:  # SIGTERM all first, then wait: RQ finishes the job at hand
            if w.alive():
                w.proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 10
        for w in workers:
            w.stop(max(0.1, deadline - time.monotonic()))
        for w in self.all_workers:  # belt and braces
            if w.alive():
                w.kill()


# --- the driver -------------------------------------------------------------------------


class Driver:
    def __init__(self, pw: Parkway, args: argparse.Namespace, deadline: float) -> None:
        self.pw, self.args, self.deadline = pw, args, deadline
        self.rng = random.Random(args.seed + 1)
        self.run_ids: list[str] = []
        self.status: dict[str, RunStatus] = {}
        self.finished: set[str] = set()
        self.answered: dict[str, tuple[str, str, Any]] = {}  # request id -> (run id, interrupt, answer)
        self.sent: dict[str, dict[str, Any]] = collections.defaultdict(dict)  # run id -> interrupt -> answer
        self.outcomes: collections.Counter[str] = collections.Counter()
        self.resume_retries = 0
        self.retry_outcomes: collections.Counter[str] = collections.Counter()
        self.first_call_already_resolved: list[str] = []
        self.reappeared: list[str] = []
        self.unavailable = 0
        self.start_retries = 0

    def progress(self) -> float:
        """Share of the transitions a person drives that are done: two answers and one end per run."""
        return (len(self.answered) + len(self.finished)) / max(1, 3 * int(self.args.runs))

    def call(self, fn: Callable[[], T], what: str) -> T:
        """Call ``fn``, retrying while Redis is down (StoreUnavailable), until the deadline."""
        while True:
            try:
                return fn()
            except StoreUnavailable:
                self.unavailable += 1
                if time.monotonic() > self.deadline:
                    raise
                time.sleep(RETRY_SLEEP)

    def start_runs(self) -> None:
        for n in range(self.args.runs):
            run_id = f"run_chaos{self.args.seed}x{n:05d}"
            attempts = 0
            while True:
                attempts += 1
                try:
                    self.pw.start(FLOW_REF, {"n": n}, run_id=run_id)
                    break
                except StoreUnavailable:
                    self.unavailable += 1
                    self.start_retries += 1
                    if time.monotonic() > self.deadline:
                        raise
                    time.sleep(RETRY_SLEEP)
                except ValidationError:
                    if attempts == 1:
                        raise
                    break  # an earlier attempt created it; the outbox gets its job enqueued
            self.run_ids.append(run_id)
            self.status[run_id] = RunStatus.QUEUED

    def answer_for(self, item: Any) -> tuple[str, dict[str, Any]]:
        name = "first" if item.request.kind == "text" else "second"
        if name == "first":
            return name, {"value": f"note {item.run_id}"}
        return name, {"selected": self.rng.choice(CHOICES)}

    def resume(self, item: Any) -> None:
        if item.request_id in self.answered:
            # we answered it and the resume was accepted; it must not be listed again
            self.reappeared.append(f"{item.run_id}/{item.request_id}")
            return
        name, kwargs = self.answer_for(item)
        if name in self.sent[item.run_id]:
            # a second interrupt of the same name in one run: a re-park. Answer it (it is a new
            # interrupt, not a blind repeat) so the run can end; the event check will count it.
            self.reappeared.append(f"{item.run_id}/{name} (new request {item.request_id})")
        attempts = 0
        while True:
            attempts += 1
            try:
                result = self.pw.resume(item.resume_token, **kwargs, responder="chaos")
                break
            except StoreUnavailable:
                # we do not know whether it committed: retrying is safe (exactly-once), count it
                self.unavailable += 1
                self.resume_retries += 1
                if time.monotonic() > self.deadline:
                    return
                time.sleep(RETRY_SLEEP)
        outcome = result.outcome.value
        self.outcomes[outcome] += 1
        if attempts > 1:
            self.retry_outcomes[outcome] += 1
        elif result.outcome is ResumeOutcome.ALREADY_RESOLVED:
            # our only call: redis-py re-sent the script after a lost reply and the first send had committed
            self.first_call_already_resolved.append(item.run_id)
        if result.outcome in (ResumeOutcome.ACCEPTED, ResumeOutcome.ALREADY_RESOLVED):
            value = kwargs.get("value", kwargs.get("selected"))
            self.answered[item.request_id] = (item.run_id, name, value)
            self.sent[item.run_id][name] = value

    def poll_interrupts(self) -> int:
        found, cursor = 0, None
        while True:
            page = self.call(
                lambda c=cursor: self.pw.list_interrupts(  # type: ignore[misc]
                    workflow=WORKFLOW, limit=200, cursor=c, include_tokens=True
                ),
                "list_interrupts",
            )
            for item in page.items:
                found += 1
                self.resume(item)
            cursor = page.next_cursor
            if cursor is None or time.monotonic() > self.deadline:
                return found

    def refresh_status(self) -> None:
        for run_id in self.run_ids:
            if run_id in self.finished:
                continue
            try:
                status = self.pw.get_run(run_id).status
            except StoreUnavailable:
                self.unavailable += 1
                return
            self.status[run_id] = status
            if status.finished:
                self.finished.add(run_id)

    def drive(self, chaos: Chaos) -> None:
        last_refresh, last_note = 0.0, time.monotonic()
        while time.monotonic() < self.deadline:
            if chaos.error is not None:
                raise RuntimeError("the chaos thread failed") from chaos.error
            found = self.poll_interrupts()
            now = time.monotonic()
            if now - last_refresh > 1.0:
                self.refresh_status()
                last_refresh = now
                if len(self.finished) == len(self.run_ids):
                    return
            if now - last_note > 15:
                last_note = now
                counts = collections.Counter(s.value for s in self.status.values())
                log(
                    f"{len(self.finished)}/{len(self.run_ids)} finished; {dict(counts)}; kills {chaos.kills}, "
                    f"redis restarts {chaos.redis_restarts}"
                )
            if not found:
                time.sleep(0.05)


# --- the checks -------------------------------------------------------------------------


def read_all_events(pw: Parkway, run_id: str) -> list[Any]:
    out: list[Any] = []
    after = "0"
    while True:
        batch = pw.store.read_events(run_id, after, None, 1000)
        if not batch:
            return out
        out += batch
        after = batch[-1].id


def check_runs(pw: Parkway, counters: redis.Redis, driver: Driver) -> dict[str, Any]:
    statuses: dict[str, str] = {}
    errors: dict[str, str] = {}
    duplicates: list[str] = []
    recovered = 0
    bad_output: list[str] = []
    multi_effects: list[str] = []
    extra_executions = 0
    missing_effects: list[str] = []
    lost_detail: list[str] = []
    for run_id in driver.run_ids:
        run = driver.call(lambda r=run_id: pw.get_run(r), "get_run")  # type: ignore[misc]
        statuses[run_id] = run.status.value
        if run.error is not None:
            errors[run_id] = f"{run.error.type}: {run.error.message}"
        events = driver.call(lambda r=run_id: read_all_events(pw, r), "read_events")  # type: ignore[misc]
        seen: collections.Counter[tuple[str, ...]] = collections.Counter()
        step_of: dict[str, str] = {}
        for e in events:
            if e.type == "interrupt":
                step_of[e.data.get("requestId", "?")] = str(e.data.get("step"))
        for e in events:
            d = e.data
            if e.type in ("node.completed", "interrupt"):
                seen[(e.type, str(d.get("node")), str(d.get("step")))] += 1
            elif e.type == "interrupt.resumed":
                seen[(e.type, str(d.get("node")), step_of.get(d.get("requestId", "?"), "?"))] += 1
            elif e.type in ("run.started", "run.completed", "run.failed", "done"):
                seen[(e.type,)] += 1
            elif e.type == "node.recovered":
                recovered += 1
        dups = {k: n for k, n in seen.items() if n > 1}
        if dups:
            duplicates.append(f"{run_id}: " + ", ".join(f"{'/'.join(k)} x{n}" for k, n in dups.items()))
        keys = [counter_key(run_id, "effect-1"), counter_key(run_id, "effect-2")]
        counts = [int(v or 0) for v in counters.mget(keys)]
        for name, n in zip(("effect-1", "effect-2"), counts, strict=True):
            if n > 1:
                multi_effects.append(f"{run_id}/{name} x{n}")
                extra_executions += n - 1
        if run.status is RunStatus.COMPLETED:
            if min(counts) < 1:
                missing_effects.append(run_id)
            want = driver.sent.get(run_id, {})
            out = run.output or {}
            if out.get("text") != want.get("first") or out.get("choice") != want.get("second"):
                bad_output.append(run_id)
        elif not run.status.finished:
            lost_detail.append(
                f"{run_id} {run.status.value} node={run.node} step={run.step} events={[e.type for e in events][-6:]}"
            )
    return {
        "statuses": statuses,
        "errors": errors,
        "duplicates": duplicates,
        "recovered": recovered,
        "bad_output": bad_output,
        "multi_effects": multi_effects,
        "extra_executions": extra_executions,
        "missing_effects": missing_effects,
        "lost": lost_detail,
    }


def diagnose(url: str, run_ids: list[str], logdir: Path) -> list[str]:
    """For runs left unfinished: what the store, the outbox, the lease set and RQ say about them."""
    from rq import Queue
    from rq.job import Job

    from parkway.adapters.redis import keys
    from parkway.runtime.clock import now_ms
    from parkway.workers import rq_internals
    from parkway.workers.jobs import job_id

    r: Any = redis.Redis.from_url(url, decode_responses=True)  # str replies
    queue = Queue(os.environ.get("PARKWAY_QUEUE", "parkway"), connection=r)
    queued, inter = set(r.lrange(queue.key, 0, -1)), set(r.lrange(rq_internals.intermediate_key(queue), 0, -1))
    started_scores = dict(r.zrange(queue.started_job_registry.key, 0, -1, withscores=True))
    started = set(started_scores)
    now = now_ms()
    lines = [
        f"RQ: queue {len(queued)} jobs, intermediate {len(inter)}, started registry {len(started)}, "
        f"registry-cleaning lock ttl {r.ttl(queue.registry_cleaning_key)}s"
    ]
    logs = {p.name: p.read_text(errors="replace") for p in sorted(logdir.glob("worker-*.log"))}
    for run_id in run_ids:
        run = r.hmget(keys.run(run_id), "status", "step", "fence", "crashes")
        jid = job_id(run_id, int(run[2] or 0))
        member = f"{run_id}:{run[1]}:{run[2]}"
        score = r.zscore(keys.outbox(), member)
        outbox = [m for m in r.zrange(keys.outbox(), 0, -1) if m.startswith(run_id + ":")]
        job = r.hmget(Job.key_for(jid), "status", "worker_name", "enqueued_at", "started_at")
        where = [
            name
            for name, ids in (("queue", queued), ("intermediate", inter), ("started", started))
            if any(i == jid or i.startswith(jid + ":") for i in ids)
        ]
        expiry = [
            f"{score - time.time():.0f}s"
            for member, score in started_scores.items()
            if member == jid or member.startswith(jid + ":")
        ]
        mentions = [
            f"{name}:{line[:160]}" for name, text in logs.items() for line in text.splitlines() if run_id in line
        ]
        lines.append(
            f"{run_id}: run status={run[0]} step={run[1]} fence={run[2]} crashes={run[3]}; outbox {outbox} "
            f"(current member age {'-' if score is None else f'{(now - score) / 1000:.0f}s'}); "
            f"lease {r.zscore(keys.leases(), run_id)}; job {jid} status={job[0]} worker={job[1]} "
            f"enqueued={job[2]} started={job[3]} in {where or 'no RQ list'}"
            f"{f' (started-registry entry expires in {expiry[0]})' if expiry else ''}; "
            f"worker log lines {mentions[:4]}"
        )
    return lines


def scan_worker_logs(logdir: Path) -> tuple[collections.Counter[str], list[str]]:
    """Count the event names of every worker's log lines (killed workers too); keep each traceback's last line."""
    seen: collections.Counter[str] = collections.Counter()
    tracebacks: list[str] = []
    for path in sorted(logdir.glob("worker-*.log")):
        in_traceback, last = False, ""
        for line in [*path.read_text(errors="replace").splitlines(), "{}"]:
            if in_traceback and (line.startswith(("{", "Traceback")) or not line.startswith(" ")):
                if not line.startswith(("{", "Traceback")):
                    last = line  # the exception line ends the block
                    line = "{}"
                tracebacks.append(f"{path.name}: {last[:200]}")
                in_traceback = False
            if line.startswith("{"):
                try:
                    event = json.loads(line).get("event")
                except ValueError:
                    event = "(unparsed line)"
                if event:
                    seen[event] += 1
            elif line.startswith("Traceback"):
                seen["Traceback"] += 1
                in_traceback = True
            elif in_traceback:
                last = line
    return seen, tracebacks


def report(
    args: argparse.Namespace,
    driver: Driver,
    chaos: Chaos,
    checked: dict[str, Any],
    logs: collections.Counter[str],
    tracebacks: list[str],
    wall: float,
    timed_out: bool,
) -> int:
    statuses = collections.Counter(checked["statuses"].values())
    lost = checked["lost"]
    dups = checked["duplicates"]
    p = print
    p("=" * 72)
    p(
        f"parkway chaos: {args.runs} runs, {args.workers} workers, kill every {args.kill_every}s, "
        f"{args.redis_restarts} Redis restarts, seed {args.seed}"
    )
    p("=" * 72)
    p(f"runs started                 {len(driver.run_ids)}")
    p(f"completed                    {statuses.get('completed', 0)}")
    p(f"failed                       {statuses.get('failed', 0)}")
    reasons = collections.Counter(checked["errors"][r] for r, s in checked["statuses"].items() if s == "failed")
    for reason, n in reasons.most_common(5):
        p(f"    {n} x {reason[:110]}")
    for s in ("expired", "cancelled"):
        if statuses.get(s):
            p(f"{s:<29}{statuses[s]}")
    p(f"LOST (not finished at end)   {len(lost)}" + ("   (the timeout passed)" if timed_out else ""))
    for line in lost[:8]:
        p(f"    {line}")
    p(f"COMMITTED TWICE              {len(dups)}")
    for line in dups[:8]:
        p(f"    {line}")
    p(
        f"wrong outputs                {len(checked['bad_output'])}"
        + (f"  e.g. {checked['bad_output'][:3]}" if checked["bad_output"] else "")
    )
    p(
        f"step effects run > once      {len(checked['multi_effects'])} steps, "
        f"{checked['extra_executions']} extra executions"
        + (f"  e.g. {checked['multi_effects'][:3]}" if checked["multi_effects"] else "")
    )
    p("    (at-least-once by design: a worker killed after fn ran but before the step's record")
    p("     committed replays the node and runs fn again; idempotency_key() is the remedy)")
    if checked["missing_effects"]:
        p(f"completed runs with an effect never counted: {len(checked['missing_effects'])}")
    p(
        f"node.recovered events        {checked['recovered']}  (worker log: attempt_recovered "
        f"{logs.get('attempt_recovered', 0)}; a reconciler killed right after recover() logs nothing)"
    )
    p(f"redispatches (worker logs)   {logs.get('job_redispatched', 0)}")
    p(f"resume outcomes              {dict(driver.outcomes)}")
    p(
        f"resume retries               {driver.resume_retries}  (outcomes of retried resumes: "
        f"{dict(driver.retry_outcomes)})"
    )
    p(
        f"already_resolved on 1st call {len(driver.first_call_already_resolved)}  (redis-py re-sent a "
        f"resume whose reply was lost)"
    )
    p(
        f"interrupts seen again        {len(driver.reappeared)}"
        + (f"  e.g. {driver.reappeared[:3]}" if driver.reappeared else "")
    )
    p(f"StoreUnavailable (driver)    {driver.unavailable}  (start retries {driver.start_retries})")
    p(
        f"worker kills                 {chaos.kills}  (workers started {len(chaos.all_workers)}, "
        f"exited by themselves {len(chaos.unexpected_exits)})"
    )
    p(
        f"Redis restarts               {chaos.redis_restarts}  (down for "
        f"{', '.join(f'{s:.2f}s' for s in chaos.redis_downtime) or '-'})"
    )
    noisy = {k: v for k, v in logs.items() if k not in ("attempt_recovered", "job_redispatched")}
    p(f"other worker log lines       {dict(sorted(noisy.items(), key=lambda kv: -kv[1])[:8])}")
    for line in tracebacks[:3]:
        p(f"    traceback in {line}")
    p(f"wall time                    {wall:.1f}s")
    ok = not lost and not dups
    p(f"RESULT                       {'PASS' if ok else 'FAIL'} (lost {len(lost)}, committed twice {len(dups)})")
    return 0 if ok else 1


# --- main -------------------------------------------------------------------------------


def parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench.chaos", description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=500)
    p.add_argument("--workers", type=int, default=3)
    p.add_argument("--kill-every", type=float, default=1.0, help="seconds between worker SIGKILLs (0: none)")
    p.add_argument("--redis-restarts", type=int, default=2)
    p.add_argument("--seed", type=int, default=None, help="default: random (printed)")
    p.add_argument("--timeout", type=float, default=600.0, help="seconds before the driver gives up")
    p.add_argument("--cpu-ms", type=float, default=10.0, help="CPU burnt around each effect in a node")
    p.add_argument("--fsync", choices=("always", "everysec"), default="always")
    p.add_argument("--keep", action="store_true", help="keep the temp dir (worker logs, AOF)")
    args = p.parse_args(argv)
    if args.seed is None:
        args.seed = random.SystemRandom().randrange(1_000_000)
    if args.runs < 1 or args.workers < 1:
        p.error("--runs and --workers must be at least 1")
    return args


def _interrupted(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt  # SIGTERM: clean up as on Ctrl-C


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    parkway_logs.configure("WARNING")  # the client's per-call info lines would drown the report
    if shutil.which("redis-server") is None:
        print("chaos: redis-server is not on PATH", file=sys.stderr)
        return 2
    tmp = Path(tempfile.mkdtemp(prefix="parkway-chaos-"))
    logdir = tmp / "logs"
    logdir.mkdir()
    main_redis = RedisProc(tmp / "redis", aof=True, fsync=args.fsync)
    counter_redis = RedisProc(tmp / "counters", aof=False)
    chaos: Chaos | None = None
    old_term = signal.signal(signal.SIGTERM, _interrupted)
    t0 = time.monotonic()
    try:
        main_redis.start()
        counter_redis.start()
        log(
            f"seed {args.seed}; redis {main_redis.url} (AOF, fsync {args.fsync}), counters {counter_redis.url}; "
            f"temp dir {tmp}"
        )
        env = {k: v for k, v in os.environ.items() if not k.startswith("PARKWAY_")}
        env.update(
            {
                "PARKWAY_SECRET": SECRET,
                "PARKWAY_LEASE_MS": str(LEASE_MS),
                "PYTHONPATH": str(ROOT),
                "CHAOS_COUNTER_URL": counter_redis.url,
                "CHAOS_CPU_MS": str(args.cpu_ms),
                "PYTHONUNBUFFERED": "1",
            }
        )
        pw = Parkway(Settings(redis_url=main_redis.url, secret=SECRET, lease_ms=LEASE_MS))
        deadline = time.monotonic() + args.timeout
        driver = Driver(pw, args, deadline)
        chaos = Chaos(args, main_redis, env, logdir, driver.progress)
        chaos.start()
        driver.start_runs()
        log(f"started {len(driver.run_ids)} runs in {time.monotonic() - t0:.1f}s")
        driver.drive(chaos)
        timed_out = len(driver.finished) < len(driver.run_ids)
        wall = time.monotonic() - t0
        chaos.stop()
        chaos.stop_workers()
        if main_redis.proc is None or main_redis.proc.poll() is not None:
            main_redis.start()  # the chaos thread may have stopped between kill and start
        log("all workers stopped; checking every run")
        driver.deadline = time.monotonic() + 120
        checked = check_runs(pw, redis.Redis.from_url(counter_redis.url), driver)
        code = report(args, driver, chaos, checked, *scan_worker_logs(logdir), wall, timed_out)
        stuck = [line.split()[0] for line in checked["lost"]]
        if stuck:
            print("diagnosis of the lost runs (workers stopped):")
            for line in diagnose(main_redis.url, stuck[:10], logdir):
                print("    " + line)
        if chaos.error is not None:
            print(f"chaos thread error: {chaos.error!r}")
            code = 1
        return code
    except KeyboardInterrupt:
        log("interrupted; stopping everything")
        return 130
    except ParkwayError as exc:
        log(f"gave up: {exc!r}")
        return 1
    finally:
        if chaos is not None:
            chaos.stop()
            chaos.stop_workers()
        main_redis.stop()
        counter_redis.stop()
        signal.signal(signal.SIGTERM, old_term)
        if args.keep:
            log(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
