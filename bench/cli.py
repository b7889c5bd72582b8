"""``python -m bench``: run the figures, print a table, write bench/RESULTS.md."""

from __future__ import annotations

import argparse
import datetime as dt
import os
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import redis

from .env import ROOT, RedisServer, machine, run_task, version_of

FLOOR_NAMES = {
    "floor-pw": "RQ floor, parkway's worker class",
    "floor": "RQ floor, stock rq.SimpleWorker",
}


def floors() -> list[str]:
    """The floors to measure: with parkway's own worker class when it has one, and stock RQ."""
    try:
        from parkway.workers import worker

        return ["floor-pw", "floor"] if hasattr(worker, "ParkwayWorker") else ["floor"]
    except ImportError:
        return ["floor"]


FIGURES = ("cycles", "latency", "rediscost", "weight", "listing", "workers", "profile")
DEFAULT_PG = "postgresql://postgres@127.0.0.1:5432/test"
DBOS_SQLITE_CAP = 300  # cycles per run: DBOS's 1 s SQLite poll makes it the slowest system by far
TARGETS = {
    "cost": 1.15,  # parkway cycle cost <= 1.15x the RQ floor
    "langgraph": 2.0,  # throughput >= 2x LangGraph + SQLite
    "dbos": 4.0,  # throughput >= 4x DBOS + Postgres
    "latency": 3.0,  # resume p99 < 3x the LPUSH -> BLPOP hand-off p99
    "weight": 1024.0,  # bytes per parked run
    "listing": 2.0,  # list_interrupts p99 at 1,000,000 pending <= 2x its p99 at 1,000
}


# --- results --------------------------------------------------------------------


@dataclass
class Section:
    key: str
    title: str
    headers: list[str]
    rows: list[list[str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    extra: list[str] = field(default_factory=list)  # markdown only (method, breakdowns)
    targets: list[tuple[str, str, bool | None]] = field(default_factory=list)  # (what, value, met)


def med(values: Sequence[float]) -> float:
    return statistics.median(values) if values else float("nan")


def fmt(value: float, digits: int = 1) -> str:
    if value != value:  # nan
        return "-"
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    return f"{value:.{digits}f}"


def cell(values: Sequence[float], digits: int = 1) -> str:
    """median (min-max) over runs; a single value alone."""
    values = [v for v in values if v == v]
    if not values:
        return "-"
    if len(values) == 1:
        return fmt(values[0], digits)
    return f"{fmt(med(values), digits)} ({fmt(min(values), digits)}–{fmt(max(values), digits)})"


def log(msg: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def task(module: str, params: dict[str, Any], timeout: float) -> dict[str, Any] | None:
    result = run_task(module, params, timeout)
    if "error" in result:
        log(
            f"  {module} {params.get('system') or params.get('kind') or params.get('via') or ''} failed: "
            f"{result['error']}\n{result.get('stderr', '')[-1500:]}"
        )
        return None
    if "skipped" in result:
        log(f"  skip: {result['skipped']}")
        return None
    return result


# --- plan -------------------------------------------------------------------------


@dataclass
class Plan:
    quick: bool
    runs: int
    cycles: int
    peer_cycles: int
    window: int
    mode: str
    latency_n: int
    cost_n: int
    cost_sample: int
    weight_workers: int
    weight_executor: int
    weight_pipelined: int | None
    listing_sizes: list[int]
    listing_queries: int
    worker_counts: list[int]
    profile_seconds: float
    pg: str
    count_runs: int = 3
    """runs of the figures that count rather than time (3 and 4): 1 with --quick unless --runs is given"""
    profile_systems: tuple[str, ...] = ("parkway", "floor-pw", "floor")
    tmp: str = ""

    @classmethod
    def from_args(cls, a: argparse.Namespace) -> Plan:
        q = a.quick
        max_listing = a.max_listing if a.max_listing is not None else (100_000 if q else 1_000_000)
        sizes = sorted({s for s in (1_000, 100_000, 1_000_000) if s <= max_listing} | {min(max_listing, 1_000_000)})
        runs = a.runs if a.runs is not None else 3
        return cls(
            quick=q,
            runs=runs,
            cycles=a.cycles or (150 if q else 1000),
            peer_cycles=a.cycles or (150 if q else 1000),
            window=a.window,
            mode=a.mode,
            latency_n=a.resumes or (150 if q else 1000),
            cost_n=100 if q else 500,
            cost_sample=20 if q else 50,
            count_runs=1 if q and a.runs is None else runs,
            profile_systems=("parkway",) if q else ("parkway", *floors()),
            weight_workers=300 if q else 1000,
            weight_executor=10_000,
            weight_pipelined=None if q else 100_000,
            listing_sizes=[s for s in sizes if s >= 1000],
            listing_queries=100 if q else 300,
            worker_counts=[1, 2, 4],
            profile_seconds=5 if q else 10,
            pg=a.pg_url,
        )


# --- figure 1 -------------------------------------------------------------------


def peers_available(plan: Plan) -> tuple[list[tuple[str, str, dict[str, Any]]], list[str]]:
    """(name, module, params) of the peers that can run here, and skip lines for the rest."""
    peers: list[tuple[str, str, dict[str, Any]]] = []
    skips: list[str] = []
    installed = lambda dist: version_of(dist) != "not installed"  # noqa: E731 - no imports here
    if not installed("langgraph"):
        skips.append("langgraph: not installed (pip install -r bench/requirements.txt)")
    else:
        if not installed("langgraph-checkpoint-sqlite"):
            skips.append("LangGraph + SQLite: langgraph-checkpoint-sqlite not installed")
        else:
            peers.append(("langgraph-sqlite", "peer_langgraph", {"saver": "sqlite"}))
        peers.append(("langgraph-memory", "peer_langgraph", {"saver": "memory"}))
    if not installed("dbos"):
        skips.append("dbos: not installed (pip install -r bench/requirements.txt)")
    else:
        if pg_reachable(plan.pg):
            peers.append(("dbos-postgres", "peer_dbos", {"db": "postgres", "pg": plan.pg}))
        else:
            skips.append(f"DBOS + Postgres: no PostgreSQL at {plan.pg}, or psycopg not installed")
        peers.append(("dbos-sqlite", "peer_dbos", {"db": "sqlite", "cap": DBOS_SQLITE_CAP}))
    return peers, skips


def pg_reachable(url: str) -> bool:
    try:
        import psycopg

        with psycopg.connect(url, connect_timeout=3):
            return True
    except Exception:  # noqa: BLE001
        return False


def run_systems(
    module: str, run: int, runs: int, systems: Sequence[str], params: dict[str, Any], res: dict[str, list[Any]]
) -> None:
    """One run of ``bench.<module>`` per system, in order; each result goes to ``res[system]``."""
    for system in systems:
        log(f"{module} run {run + 1}/{runs}: {system}")
        r = task(module, {"system": system, **params}, 600)
        if r:
            res.setdefault(system, []).append(r)


def fig_cycles(plan: Plan, url: str) -> Section:
    peers, skips = peers_available(plan)
    for s in skips:
        log(f"  skip: {s}")
    res: dict[str, list[dict[str, Any]]] = {}
    for run in range(plan.runs):
        params = {"url": url, "n": plan.cycles, "window": plan.window, "mode": plan.mode}
        run_systems("cycles", run, plan.runs, ("parkway", *floors()), params, res)
        for name, module, params in peers:
            log(f"cycles run {run + 1}/{plan.runs}: {name}")
            n = min(plan.peer_cycles, params.get("cap", plan.peer_cycles))
            r = task(module, {**params, "n": n, "window": plan.window, "dir": plan.tmp}, 900)
            if r:
                res.setdefault(name, []).append(r)
    if any(name == "dbos-postgres" for name, _, _ in peers):
        from .peer_dbos import drop_postgres_database

        drop_postgres_database(plan.pg)

    sec = Section(
        "cycles",
        "1. Cycle throughput (start → pause → resume → complete)",
        [
            "system",
            "cycles/s",
            "worker CPU ms/cycle",
            "Redis/DB CPU ms/cycle",
            "client CPU ms/cycle",
            "total CPU ms/cycle",
        ],
    )
    order = ["parkway", "floor-pw", "floor", "langgraph-sqlite", "langgraph-memory", "dbos-postgres", "dbos-sqlite"]
    labels = {
        "parkway": "parkway (1 worker)",
        "floor-pw": "RQ floor (2 trivial jobs), parkway's worker class",
        "floor": "RQ floor (2 trivial jobs), stock rq.SimpleWorker",
        "langgraph-sqlite": "LangGraph + SqliteSaver",
        "langgraph-memory": "LangGraph + InMemorySaver",
        "dbos-postgres": "DBOS + Postgres",
        "dbos-sqlite": "DBOS + SQLite (poll 1.0 s)",
    }
    for name in order:
        rs = res.get(name)
        if not rs:
            continue
        cps = [r["cycles_per_s"] for r in rs]
        if name in ("parkway", "floor", "floor-pw"):
            w = [r["worker_cpu_ms"] for r in rs]
            d = [r["redis_cpu_ms"] for r in rs]
            c = [r["client_cpu_ms"] for r in rs]
        elif name.startswith("dbos"):
            w, c = [float("nan")], [r["process_cpu_ms"] for r in rs]
            d = [r["server_cpu_ms"] for r in rs] if name == "dbos-postgres" else [float("nan")]
        else:
            w, d, c = [float("nan")], [float("nan")], [r["process_cpu_ms"] for r in rs]
        tot = [
            sum(
                x
                for x in (
                    r.get("worker_cpu_ms", 0),
                    r.get("redis_cpu_ms", 0),
                    r.get("client_cpu_ms", 0),
                    r.get("process_cpu_ms", 0),
                    r.get("server_cpu_ms", 0),
                )
                if x == x
            )
            for r in rs
        ]
        sec.rows.append([labels[name], cell(cps), cell(w, 2), cell(d, 2), cell(c, 2), cell(tot, 2)])

    def paired(a: str, b: str, f: Callable[[dict[str, Any], dict[str, Any]], float]) -> list[float]:
        return [f(x, y) for x, y in zip(res.get(a, []), res.get(b, []), strict=False)]

    pk = "parkway"
    ratios: list[tuple[str, list[float], str | None, float, str]] = []
    for fl in floors():
        short = f"parkway ÷ {FLOOR_NAMES[fl]}:"
        target = fl == floors()[0]  # the target compares with the floor run by parkway's own worker class
        time_ratio = paired(pk, fl, lambda p, f: f["cycles_per_s"] / p["cycles_per_s"])
        cpu_ratio = paired(
            pk, fl, lambda p, f: (p["worker_cpu_ms"] + p["redis_cpu_ms"]) / (f["worker_cpu_ms"] + f["redis_cpu_ms"])
        )
        all_ratio = paired(
            pk,
            fl,
            lambda p, f: (
                (p["worker_cpu_ms"] + p["redis_cpu_ms"] + p["client_cpu_ms"])
                / (f["worker_cpu_ms"] + f["redis_cpu_ms"] + f["client_cpu_ms"])
            ),
        )
        ratios += [
            (
                f"{short} time per cycle (floor cycles/s ÷ parkway cycles/s)",
                time_ratio,
                f"cycle cost ≤ {TARGETS['cost']}x {FLOOR_NAMES[fl]}: time per cycle" if target else None,
                TARGETS["cost"],
                "le",
            ),
            (
                f"{short} worker+Redis CPU per cycle",
                cpu_ratio,
                f"cycle cost ≤ {TARGETS['cost']}x {FLOOR_NAMES[fl]}: worker+Redis CPU per cycle" if target else None,
                TARGETS["cost"],
                "le",
            ),
            (f"{short} worker+Redis+client CPU per cycle", all_ratio, None, 0.0, ""),
        ]
    lg = paired(pk, "langgraph-sqlite", lambda p, g: p["cycles_per_s"] / g["cycles_per_s"])
    lgm = paired(pk, "langgraph-memory", lambda p, g: p["cycles_per_s"] / g["cycles_per_s"])
    db = paired(pk, "dbos-postgres", lambda p, g: p["cycles_per_s"] / g["cycles_per_s"])
    dbs = paired(pk, "dbos-sqlite", lambda p, g: p["cycles_per_s"] / g["cycles_per_s"])
    ratios += [
        (
            "parkway/LangGraph+SQLite cycles/s",
            lg,
            f"throughput ≥ {TARGETS['langgraph']:.0f}x LangGraph + SQLite",
            TARGETS["langgraph"],
            "ge",
        ),
        ("parkway/LangGraph+memory cycles/s", lgm, None, 0.0, ""),
        (
            "parkway/DBOS+Postgres cycles/s",
            db,
            f"throughput ≥ {TARGETS['dbos']:.0f}x DBOS + Postgres",
            TARGETS["dbos"],
            "ge",
        ),
        ("parkway/DBOS+SQLite cycles/s", dbs, None, 0.0, ""),
    ]
    for what, values, target, bound, sense in ratios:
        if not values:
            continue
        sec.notes.append(f"ratio {what}: {cell(values, 2)}")
        if target:
            m = med(values)
            sec.targets.append((target, fmt(m, 2) + "x", m <= bound if sense == "le" else m >= bound))
    for s in skips:
        sec.notes.append(f"skipped: {s}")
    polls = [r.get("empty_polls", 0) / r["cycles"] for r in res.get(pk, [])]
    sec.extra += [
        f"N = {plan.cycles} cycles per run (after 30 warm-up cycles), {plan.runs} runs, systems interleaved run by "
        f"run so drift hits all alike; ratios are taken within a run, then the median (min–max) over runs.",
        f"Client mode: **windowed, {plan.mode}**. The client keeps {plan.window} runs started and not yet resumed. "
        + (
            "It polls `list_interrupts(workflow=..., limit=100, include_tokens=True)` (floor: `LPOP` of the "
            "signal list, 100 at a time), sleeps 0.5 ms when a poll finds nothing, resumes each paused run found "
            "(`resume(token, selected=...)`; floor: enqueue job 2) and starts a new run for each one resumed. "
            if plan.mode == "poll"
            else "It blocks on the oldest run's event stream (`stream(run_id, until='settled')`; floor: `BLPOP`) "
            "and resumes it, starting a new run for each one resumed. "
        )
        + "The clock runs from the first start to the last completion. Empty polls per parkway cycle: "
        + cell(polls, 1)
        + ".",
        "parkway: `python -m parkway.cli worker --redis-url URL` (one process, PARKWAY_SECRET and "
        "PARKWAY_REDIS_URL set) on the benchmark's own redis-server; client `Parkway(Settings(redis_url=..., "
        "secret=...))` logging at WARNING like the worker; workflow `bench.flows:cycle` (node `ask` pauses on "
        "a ~200-byte choice request with `use_interrupt`, node `finish` returns).",
        "RQ floor: a parkway cycle is two RQ jobs (job 1 runs node 1 until it pauses; the resume enqueues job 2, "
        "which replays node 1 and runs node 2 in the same job), so the floor is two trivial jobs per cycle: "
        "job 1 only RPUSHes a signal (the cheapest possible 'park'), the client pops signals and enqueues job 2 "
        "(the 'resume'), job 2 does nothing. Enqueued with RQ's own unique enqueue (`enqueue_call` with a job id, "
        "`unique=True`, `result_ttl=0`, parkway's msgpack serializer: the job hash parkway writes too, in 2 round "
        "trips; parkway writes it inside the Lua call that commits the start or the resume), run by a plain "
        "`rq.SimpleWorker`, and again by parkway's own worker class (`ParkwayWorker`, a SimpleWorker subclass "
        "that trims RQ's per-job bookkeeping and runs parkway's maintenance thread) when parkway has one. The "
        "target compares with the latter: the gap to it is parkway's own work (its Lua scripts, client-side "
        "lookup/validation, replay, the second node); the stock floor shows what RQ alone costs unmodified.",
        "CPU per cycle: worker processes from /proc/PID/stat (utime+stime), Redis from INFO cpu "
        "(used_cpu_user+used_cpu_sys), the client from os.times(), each a delta over the timed window ÷ cycles. "
        "LangGraph runs in one process (no worker): its CPU is in the client column. DBOS runs workflows on "
        "threads of the client process; its Postgres CPU is the sum over all `postgres` processes on the "
        "machine (a shared server: other load would show up there).",
        "LangGraph: `StateGraph` with nodes `ask` (`interrupt(request)`) and `finish`; a cycle is "
        "`invoke(input)` then `invoke(Command(resume=answer))` on the same thread id; with "
        "`SqliteSaver(sqlite3.connect(file))` on local disk (saver defaults) or `InMemorySaver()`; "
        f"{plan.window} threads kept paused.",
        "DBOS: workflow = step `ask`, `DBOS.set_event('request', ...)` (how a client learns it waits), "
        "`DBOS.recv('answer')`, step `finish`; client: `DBOS.start_workflow`, `DBOS.get_event`, `DBOS.send`, "
        "`handle.get_result()`; system database reset before each run. SQLite has no LISTEN/NOTIFY: DBOS "
        "polls it every `notification_listener_polling_interval_sec` = 1.0 s (its default, used here); "
        f"DBOS + SQLite runs at most {DBOS_SQLITE_CAP} cycles per run (it is the slowest by far). "
        "Each peer runs in its own subprocess; peers do 30 (DBOS: 20) warm-up cycles first.",
    ]
    return sec


# --- figure 2 -------------------------------------------------------------------


def fig_latency(plan: Plan, url: str) -> Section:
    pk: list[dict[str, Any]] = []
    ho: list[dict[str, Any]] = []
    for run in range(plan.runs):
        log(f"latency run {run + 1}/{plan.runs}: parkway")
        r = task("latency", {"kind": "parkway", "url": url, "n": plan.latency_n, "idle_s": 0.01}, 900)
        if r:
            pk.append(r)
        log(f"latency run {run + 1}/{plan.runs}: LPUSH -> BLPOP hand-off")
        r = task("latency", {"kind": "handoff", "url": url, "n": plan.latency_n, "idle_s": 0.01}, 300)
        if r:
            ho.append(r)
    sec = Section("latency", "2. Resume latency (idle worker)", ["measured", "p50 ms", "p99 ms", "max ms"])
    if pk:
        sec.rows.append(
            [
                "parkway: resume() returned → node's first line",
                cell([r["from_return"]["p50_ms"] for r in pk], 2),
                cell([r["from_return"]["p99_ms"] for r in pk], 2),
                cell([r["from_return"]["max_ms"] for r in pk], 1),
            ]
        )
        sec.rows.append(
            [
                "parkway: resume() called → node's first line",
                cell([r["from_call"]["p50_ms"] for r in pk], 2),
                cell([r["from_call"]["p99_ms"] for r in pk], 2),
                cell([r["from_call"]["max_ms"] for r in pk], 1),
            ]
        )
    if ho:
        sec.rows.append(
            [
                "LPUSH issued → BLPOP returned (other process)",
                cell([r["from_call"]["p50_ms"] for r in ho], 2),
                cell([r["from_call"]["p99_ms"] for r in ho], 2),
                cell([r["from_call"]["max_ms"] for r in ho], 1),
            ]
        )
    if pk and ho:
        p99 = [a["from_return"]["p99_ms"] / b["from_call"]["p99_ms"] for a, b in zip(pk, ho, strict=False)]
        p50 = [a["from_return"]["p50_ms"] / b["from_call"]["p50_ms"] for a, b in zip(pk, ho, strict=False)]
        sec.notes.append(f"ratio parkway/hand-off p99: {cell(p99, 2)}; p50: {cell(p50, 2)}")
        sec.targets.append(
            (
                f"resume p99 < {TARGETS['latency']}x LPUSH→BLPOP p99",
                fmt(med(p99), 2) + "x",
                med(p99) < TARGETS["latency"],
            )
        )
        early = sum(r["node_before_return"] for r in pk)
        sec.notes.append(f"resumes whose node started before resume() returned: {early}")
    sec.extra += [
        f"{plan.latency_n} resumes per run (after 20 warm-up), {plan.runs} runs. One parkway worker; for each run "
        "of `bench.flows:timed` the client starts it, reads its event stream up to the `interrupt` event, sleeps "
        "10 ms (the worker is back in its blocking dequeue), then calls `resume()`. The node's first line "
        "RPUSHes `time.time()` to a Redis list on every attempt; the replay's timestamp minus the time "
        "`resume()` returned is the latency (same clock, same machine).",
        "Hand-off: a second process waits in `BLPOP`; the client sleeps 10 ms, then `LPUSH`es `time.time()`; "
        "the other side subtracts it from `time.time()` when BLPOP returns. Same redis-py + hiredis on both "
        "sides, measured in the same run.",
    ]
    return sec


# --- figure 3 -------------------------------------------------------------------


def fig_rediscost(plan: Plan, url: str) -> Section:
    res: dict[str, list[dict[str, Any]]] = {}
    for run in range(plan.count_runs):
        params = {"url": url, "n": plan.cost_n, "sample": plan.cost_sample, "window": plan.window}
        run_systems("rediscost", run, plan.count_runs, ("parkway", *floors()), params, res)
    systems = ["parkway", *floors()]
    sec = Section(
        "rediscost", "3. Redis cost per cycle", ["per cycle", "parkway", *(FLOOR_NAMES[f] for f in systems[1:])]
    )

    def col(system: str, f: Callable[[dict[str, Any]], float], digits: int = 1) -> str:
        return cell([f(r) for r in res.get(system, [])], digits)

    def row(label: str, f: Callable[[dict[str, Any]], float], digits: int = 1) -> None:
        sec.rows.append([label, *(col(system, f, digits) for system in systems)])

    def pick(part: str) -> Callable[[str], Callable[[dict[str, Any]], float]]:
        def of(k: str) -> Callable[[dict[str, Any]], float]:
            return lambda r: float(r[part].get(k, 0.0))

        return of

    mon, wrt, crt = (
        pick("monitor_per_cycle"),
        pick("worker_round_trips_per_cycle"),
        pick("client_round_trips_per_cycle"),
    )
    row("commands, all (INFO commandstats)", lambda r: r["commands_per_cycle"])
    row("  parkway's, sent by a client (MONITOR)", mon("parkway_sent"))
    row("  parkway's, run inside its Lua scripts (MONITOR)", mon("parkway_in_script"))
    row("  RQ's, sent (MONITOR)", mon("rq_sent"))
    row("  RQ's, run inside Lua scripts: RQ's own and parkway's hand-offs (MONITOR)", mon("rq_in_script"))
    row("  no key: MULTI/EXEC, PING, SCRIPT, floor's signal/polls (MONITOR)", mon("other_sent"))
    row("round trips, worker: parkway", wrt("parkway"), 2)
    row("round trips, worker: RQ", wrt("rq"), 2)
    row("round trips, worker: other", wrt("other"), 2)
    row("round trips, client: parkway (incl. empty polls)", crt("parkway"), 2)
    row("round trips, client: RQ (enqueue)", crt("rq"), 2)
    row("round trips, client: other (floor: polls)", crt("other"), 2)
    row("client empty polls", lambda r: r["client_empty_polls_per_cycle"], 2)
    if res.get("parkway"):
        top = sorted(res["parkway"][0]["commandstats_per_cycle"].items(), key=lambda kv: -kv[1])[:12]
        sec.extra.append(
            "parkway's busiest commands per cycle (first run, commandstats, in-script included): "
            + ", ".join(f"{k} {v:.1f}" for k, v in top)
            + "."
        )
    same = systems[1]
    if res.get("parkway") and res.get(same):
        rq_pk = [mon("rq_sent")(r) + mon("rq_in_script")(r) + mon("other_sent")(r) for r in res["parkway"]]
        rq_fl = [mon("rq_sent")(r) + mon("rq_in_script")(r) + mon("other_sent")(r) for r in res[same]]
        sec.notes.append(
            f"RQ's commands (incl. no-key ones) per cycle under parkway {cell(rq_pk)} vs {FLOOR_NAMES[same]} "
            f"{cell(rq_fl)}: the subtraction check (the floor's no-key row also holds its signal and polls)"
        )
    sec.extra += [
        f"{plan.cost_n} cycles per run for commandstats and round trips, {plan.cost_sample} more under MONITOR; "
        f"{plan.count_runs} run(s); same client mode as figure 1 (empty polls are part of the client's count).",
        "Method: *commands, all* = `CONFIG RESETSTAT` before, `INFO commandstats` after (Redis 7 counts commands "
        "run inside Lua scripts, plus the EVALSHA itself). *By owner* = `MONITOR` on a smaller sample: each line "
        'names its keys (`"pw:` → parkway, `"rq:` → RQ, no key → its own row: MULTI/EXEC of RQ\'s '
        "transactions, health-check PINGs, and in the floor the signal RPUSH and LPOP polls); lines tagged "
        "`lua` ran inside a script (parkway's start and resume scripts write RQ's job hash: those RQ commands "
        "count as RQ's, in a script). *Round trips* = redis-py `send_packed_command` calls (a command, or a whole "
        "pipeline), counted in the worker (run under `bench.counted`) and in the client, attributed by the keys "
        "they name; one that names both (the worker's start transaction carrying parkway's `begin`, a start or resume "
        "carrying its job) counts as parkway's.",
    ]
    return sec


# --- figure 4 -------------------------------------------------------------------


def fig_weight(plan: Plan, url: str, listing: dict[str, Any] | None) -> Section:
    rows: list[tuple[str, int, list[dict[str, Any]]]] = []
    for via, count, runs in (
        ("workers", plan.weight_workers, plan.count_runs),
        ("executor", plan.weight_executor, plan.count_runs),
        ("pipelined", plan.weight_pipelined, 1),
    ):
        if not count:
            continue
        got = []
        for run in range(runs):
            log(f"weight run {run + 1}/{runs}: {count:,} runs parked via {via}")
            r = task("weight", {"url": url, "via": via, "count": count}, 1800)
            if r:
                got.append(r)
        rows.append((via, count, got))
    sec = Section("weight", "4. Redis memory per parked run", ["parked through", "parked runs", "bytes per run"])
    labels = {
        "workers": "start + a real worker",
        "executor": "start + the job body in-process (executor)",
        "pipelined": "same, script calls pipelined",
    }
    worst: list[float] = []
    for via, count, got in rows:
        if got:
            values = [r["bytes_per_run"] for r in got]
            worst.append(med(values))
            sec.rows.append([labels[via], f"{count:,}", cell(values, 0)])
    if listing:
        for size, point in listing["sizes"].items():
            if int(size) >= 10_000:
                sec.rows.append(
                    [
                        "bulk replay of park's script calls (figure 5's fill)",
                        f"{int(size):,}",
                        fmt(point["bytes_per_pending"], 0),
                    ]
                )
                worst.append(point["bytes_per_pending"])
    if worst:
        sec.targets.append(
            (
                f"≤ {TARGETS['weight']:.0f} bytes per parked run",
                fmt(max(worst), 0) + " B",
                max(worst) <= TARGETS["weight"],
            )
        )
    sample = next((got[0] for _, _, got in rows if got), None)
    if sample:
        parts = ", ".join(f"`{k}` {v}" for k, v in sorted(sample["by_key"].items(), key=lambda kv: -kv[1]))
        sec.notes.append(f"request size {sample['request_bytes']} bytes (msgpack, as stored)")
        ev, probe = sample["by_key"].get("ev"), sample.get("one_entry_stream_bytes")
        if ev and probe:
            sec.notes.append(
                f"the run's event stream alone is {ev} bytes; a stream holding one tiny entry takes {probe} bytes "
                f"on this server (stream-node-max-bytes = {sample.get('stream_node_max_bytes')}: Redis allocates "
                "a stream's first node at that size)"
            )
        sec.extra.append(
            f"Bytes by key for one parked run (`MEMORY USAGE ... SAMPLES 0`; indexes: bytes ÷ members): {parts}."
        )
    sec.extra += [
        "On the benchmark's own redis-server, emptied first: `used_memory` (INFO memory) after parking minus "
        "before, ÷ pending interrupts (ZCARD of the `newest` index). Runs are `bench.flows:cycle` with "
        "parkway-chosen run ids (`run_` + 32 hex) and a 6-hour TTL, parked with a ~200-byte choice request.",
        "*start + a real worker*: `Parkway.start` and one `parkway worker` process; memory read while the worker is "
        "still registered (one-off costs such as Lua scripts loaded on first use are in the delta; they amortize "
        "with more runs). *executor*: `Parkway.start` with a dispatcher that notes the job instead of enqueuing "
        "it, then the worker's job body `executor.execute(store, options, run_id, 0, 0)` in-process (create.lua, "
        "begin.lua, the node up to `use_interrupt`, park.lua) — what a worker writes, minus RQ's job hash, which "
        "`result_ttl=0` deletes anyway. *pipelined*: the same code with `RedisStore._call` queueing the scripts on "
        "a pipeline (replies for the executor taken from a real template run), two processes. *bulk replay*: see "
        "figure 5.",
    ]
    return sec


# --- figure 5 -------------------------------------------------------------------


def fig_listing(plan: Plan, url: str) -> tuple[Section, dict[str, Any] | None]:
    log(
        f"listing: filling to {', '.join(f'{s:,}' for s in plan.listing_sizes)} pending interrupts "
        f"({plan.runs} runs x {plan.listing_queries} calls per page and size)"
    )
    r = task(
        "listing", {"url": url, "sizes": plan.listing_sizes, "queries": plan.listing_queries, "runs": plan.runs}, 3600
    )
    sec = Section(
        "listing",
        "5. list_interrupts at scale (newest first, page of 50)",
        [
            "pending",
            "first page p50 ms",
            "first page p99 ms",
            "deep page p50 ms",
            "deep page p99 ms",
            "Redis memory",
            "fill s",
        ],
    )
    if r:
        for size, p in r["sizes"].items():
            sec.rows.append(
                [
                    f"{int(size):,}",
                    cell([x["p50_ms"] for x in p["first"]], 2),
                    cell([x["p99_ms"] for x in p["first"]], 2),
                    cell([x["p50_ms"] for x in p["deep"]], 2),
                    cell([x["p99_ms"] for x in p["deep"]], 2),
                    f"{p['used_memory_mb']:,.0f} MiB",
                    fmt(p["fill_seconds"], 0),
                ]
            )
        by_size = {int(size): p for size, p in r["sizes"].items()}
        largest = max(by_size)
        if 1_000 in by_size and largest > 1_000:
            for page in ("first", "deep"):
                pairs = zip(by_size[1_000][page], by_size[largest][page], strict=True)
                ratios = [big["p99_ms"] / small["p99_ms"] for small, big in pairs]
                sec.notes.append(f"ratio {page} page p99 at {largest:,} ÷ at 1,000 (within a run): {cell(ratios, 2)}")
                if largest == 1_000_000:
                    sec.targets.append(
                        (
                            f"list_interrupts p99 at 1,000,000 ≤ {TARGETS['listing']:.0f}x at 1,000 ({page} page)",
                            fmt(med(ratios), 2) + "x",
                            med(ratios) <= TARGETS["listing"],
                        )
                    )
    if 1_000_000 not in plan.listing_sizes:
        sec.notes.append(
            f"largest size capped at {max(plan.listing_sizes):,} (--max-listing); run without --quick for 1,000,000"
        )
    sec.extra += [
        f"p50/p99 of the wall time of one `Parkway.list_interrupts()` call seen by the client ({plan.listing_queries} "
        f"calls per page, size and run; {plan.runs} runs; one call at a time, nothing else running; the client "
        "froze its import-time objects with `gc.freeze()` first, else a 20–35 ms full collection of them lands "
        "in ~1 call in 200 at any size). *First page*: "
        "no cursor. *Deep page*: the cursor a page ending at rank N/2 of the `newest` index returns (member read "
        "with ZREVRANGE, cursor made by parkway's `codec.make_cursor`; checked that the page starts at rank "
        "N/2+1).",
        "Fill: the benchmark's own redis-server, emptied, then filled in steps by `bench.populate.bulk_park` in two "
        "processes: one template run is parked through the real path (`Parkway.start` + the worker's job body) "
        "while every script call the store makes is recorded (create.lua, begin.lua, park.lua: names, keys, "
        "arguments); the calls are then replayed, pipelined, for each new run with the run id, request id and "
        "token hash (of the token minted for the new ids) substituted — same lengths, so msgpack blobs stay "
        "valid. So the keys, fields, index members and TTLs are park.lua's own (checked: a replayed run has the "
        "same keys, fields, stream entries and index entries as the template); all replayed runs share the "
        "template's timestamps and input.",
    ]
    return sec, r


# --- figure 6 -------------------------------------------------------------------


def fig_workers(plan: Plan, url: str) -> Section:
    res: dict[int, list[dict[str, Any]]] = {}
    for run in range(plan.runs):
        for k in plan.worker_counts:
            log(f"workers run {run + 1}/{plan.runs}: {k} worker process(es)")
            r = task(
                "cycles",
                {
                    "system": "parkway",
                    "url": url,
                    "n": plan.cycles,
                    "workers": k,
                    "window": max(plan.window, 8 * k),
                    "mode": plan.mode,
                },
                600,
            )
            if r:
                res.setdefault(k, []).append(r)
    sec = Section(
        "workers",
        "6. parkway throughput with more worker processes",
        [
            "worker processes",
            "cycles/s",
            "x 1 worker",
            "worker CPU ms/cycle",
            "Redis CPU ms/cycle",
            "client CPU ms/cycle",
        ],
    )
    base = res.get(1, [])
    for k, rs in sorted(res.items()):
        scale = [r["cycles_per_s"] / b["cycles_per_s"] for r, b in zip(rs, base, strict=False)]
        sec.rows.append(
            [
                str(k),
                cell([r["cycles_per_s"] for r in rs]),
                cell(scale, 2),
                cell([r["worker_cpu_ms"] for r in rs], 2),
                cell([r["redis_cpu_ms"] for r in rs], 2),
                cell([r["client_cpu_ms"] for r in rs], 2),
            ]
        )
    sec.extra.append(
        f"Figure 1's parkway measurement with 1, 2 and 4 separate `parkway worker` processes, "
        f"{plan.cycles} cycles per run, window max({plan.window}, 8 x workers), {plan.runs} runs; "
        f"one client process. The machine has {os.cpu_count()} cores shared by Redis, the client "
        "and the workers."
    )
    return sec


# --- profile ------------------------------------------------------------------


def fig_profile(plan: Plan, url: str) -> Section:
    sec = Section(
        "profile",
        "7. Where a worker's time goes (py-spy, figure-1 load)",
        [
            "share of worker main-thread wall time",
            "parkway worker",
            *(FLOOR_NAMES[f] for f in plan.profile_systems[1:]),
        ],
    )
    got: dict[str, dict[str, Any]] = {}
    for system in plan.profile_systems:
        log(f"profile: {system} worker under py-spy for {plan.profile_seconds:.0f} s")
        r = task("profile", {"url": url, "seconds": plan.profile_seconds, "system": system}, 300)
        if r:
            got[system] = r
    if not got:
        sec.notes.append("skipped: py-spy is not installed (pip install py-spy)")
        return sec
    keys = [
        "RQ|dequeue wait",
        "RQ|redis wait",
        "RQ|redis-py",
        "RQ|python",
        "parkway job|redis wait",
        "parkway job|redis-py",
        "parkway job|python",
        "parkway job|scripts",
    ]
    labels = {
        "RQ|dequeue wait": "RQ: blocked in BLMOVE for the next job",
        "RQ|redis wait": "RQ bookkeeping: waiting on Redis replies",
        "RQ|redis-py": "RQ bookkeeping: redis-py packing/parsing",
        "RQ|python": "RQ bookkeeping: RQ's own Python",
        "parkway job|redis wait": "job body: waiting on Redis replies",
        "parkway job|redis-py": "job body: redis-py packing/parsing",
        "parkway job|python": "job body: parkway's Python (+ msgpack, pydantic, node)",
        "parkway job|scripts": "  of the job body: inside RedisStore._call (parkway's scripts)",
    }
    for k in keys:
        sec.rows.append(
            [labels[k]]
            + [f"{got[s]['fractions'].get(k, 0) * 100:.0f}%" if s in got else "-" for s in plan.profile_systems]
        )
    for s, r in got.items():
        sec.notes.append(
            f"{s}: {r['samples']} samples over {r['seconds']:.0f} s, {r['cycles']} cycles "
            "(py-spy slows the worker; shares, not speeds, are the point)"
        )
    sec.extra.append(
        "Method: `py-spy record --idle --format raw -r 200` on the worker process while the figure-1 "
        "client keeps it busy; main thread only. Each sample goes to a row by whether "
        "`execute_job` (parkway's job entry) is on the stack and to a column by its innermost frame: "
        "socket read/write → waiting on Redis (hiredis parsing happens inside that call too), other "
        "redis-py frames → redis-py, anything else → Python."
    )
    return sec


# --- output ---------------------------------------------------------------------


def text_table(headers: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]
    line = lambda cells: "  ".join(c.ljust(w) for c, w in zip(cells, widths, strict=False))  # noqa: E731
    return "\n".join([line(headers), line(["-" * w for w in widths]), *(line(r) for r in rows)])


def md_table(headers: list[str], rows: list[list[str]]) -> str:
    esc = lambda c: c.replace("|", "\\|")  # noqa: E731
    out = ["| " + " | ".join(esc(h) for h in headers) + " |", "|" + "---|" * len(headers)]
    out += ["| " + " | ".join(esc(c) for c in r) + " |" for r in rows]
    return "\n".join(out)


def loadavg() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3]) + " (1, 5, 15 min)"
    except OSError:
        return "unknown"


def source_digest() -> str:
    """A short hash of parkway's sources as they are on disk now (tracked or not)."""
    import hashlib

    h = hashlib.sha256()
    folder = ROOT / "parkway"
    for path in sorted(p for p in folder.rglob("*") if p.suffix in (".py", ".lua") and p.is_file()):
        h.update(str(path.relative_to(folder)).encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()[:12]


def git_revision() -> str:
    if shutil.which("git") is None:
        return "unknown"
    try:
        rev = subprocess.run(
            ["git", "-C", str(ROOT), "describe", "--always", "--dirty"], capture_output=True, text=True, timeout=10
        ).stdout.strip()
        return rev or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def write_results(
    path: Path, sections: list[Section], facts: dict[str, str], command: str, started: float, plan: Plan
) -> None:
    out = [
        "# parkway benchmark results",
        "",
        f"Written by `{command}` on {dt.datetime.now().astimezone().strftime('%Y-%m-%d %H:%M %Z')} "
        f"in {(time.time() - started) / 60:.1f} minutes"
        + (
            " (**--quick**: fewer cycles and smaller sizes; run without --quick for the issue's figures)"
            if plan.quick
            else ""
        )
        + ".",
        "Cells are the median over runs with (min–max); ratios are taken within a run, then summarized. "
        "The machine's speed drifts 15–30% between runs: compare figures from the same file, and ratios "
        "rather than absolute numbers.",
        "",
        "## Machine",
        "",
        md_table(["what", "value"], [[k, v] for k, v in facts.items()]),
        "",
    ]
    targets = [t for s in sections for t in s.targets]
    if targets:
        out += [
            "## Targets",
            "",
            md_table(
                ["target", "measured (median)", "met?"], [[w, v, "met" if ok else "missed"] for w, v, ok in targets]
            ),
            "",
        ]
    for s in sections:
        out += [f"## {s.title}", "", md_table(s.headers, s.rows) if s.rows else "_no result_", ""]
        out += [f"- {n}" for n in s.notes]
        if s.notes:
            out.append("")
        out += [*(p + "\n" for p in s.extra)]
    path.write_text("\n".join(out).rstrip() + "\n")


# --- main -------------------------------------------------------------------------


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    p.add_argument("--quick", action="store_true", help="fewer cycles and smaller sizes (about 5 minutes)")
    p.add_argument(
        "--only",
        action="append",
        default=[],
        metavar="NAME",
        help=f"run only these figures (repeat or comma-separate): {', '.join(FIGURES)}",
    )
    p.add_argument("--runs", type=int, default=None, help="runs per figure (default 3)")
    p.add_argument("--cycles", type=int, default=None, help="cycles per run for figures 1 and 6 (default 1000)")
    p.add_argument("--resumes", type=int, default=None, help="resumes per run for figure 2 (default 1000)")
    p.add_argument("--window", type=int, default=16, help="runs kept started and not yet resumed (default 16)")
    p.add_argument(
        "--mode",
        choices=("poll", "block"),
        default="poll",
        help="how the cycle client finds paused runs: poll list_interrupts (default) or block on "
        "each run's event stream",
    )
    p.add_argument(
        "--max-listing",
        type=int,
        default=None,
        help="largest pending-interrupt count for figure 5 (default 1,000,000; 100,000 with --quick)",
    )
    p.add_argument(
        "--pg-url",
        default=os.environ.get("BENCH_PG_URL", DEFAULT_PG),
        help=f"PostgreSQL for DBOS (default $BENCH_PG_URL or {DEFAULT_PG})",
    )
    p.add_argument(
        "--out",
        default=str(Path(__file__).resolve().parent / "RESULTS.md"),
        help="where to write the results (default bench/RESULTS.md)",
    )
    return p.parse_args(argv)


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def main(argv: Sequence[str] | None = None) -> int:
    # stop cleanly (tasks, workers, our redis-server) on Ctrl-C or SIGTERM, even when started in the background
    signal.signal(signal.SIGINT, _interrupt)
    signal.signal(signal.SIGTERM, _interrupt)
    args = parse(argv)
    only = [n.strip() for item in args.only for n in item.split(",") if n.strip()]
    unknown = [n for n in only if n not in FIGURES]
    if unknown:
        print(f"bench: unknown figure(s) {', '.join(unknown)}; choose from {', '.join(FIGURES)}", file=sys.stderr)
        return 2
    chosen = only or list(FIGURES)
    plan = Plan.from_args(args)
    if plan.runs < 1:
        print("bench: --runs must be at least 1", file=sys.stderr)
        return 2
    command = "python -m bench" + (
        ""
        if argv is None and len(sys.argv) <= 1
        else " " + " ".join(shlex.quote(a) for a in (sys.argv[1:] if argv is None else argv))
    )
    started = time.time()
    plan.tmp = tempfile.mkdtemp(prefix="pwbench-")
    server = RedisServer().start()
    log(
        f"own redis-server on port {server.port}; figures: {', '.join(chosen)}; runs: {plan.runs}"
        + (" (quick)" if plan.quick else "")
    )
    sections: list[Section] = []
    try:
        client = redis.Redis.from_url(server.url)
        facts = machine(client)
        digest = source_digest()
        facts["parkway source"] = f"{ROOT} (git {git_revision()}, sources {digest})"
        facts["load average at start"] = loadavg()
        listing: dict[str, Any] | None = None
        builders: dict[str, Callable[[], Section]] = {
            "cycles": lambda: fig_cycles(plan, server.url),
            "latency": lambda: fig_latency(plan, server.url),
            "rediscost": lambda: fig_rediscost(plan, server.url),
            "workers": lambda: fig_workers(plan, server.url),
            "profile": lambda: fig_profile(plan, server.url),
        }
        # the listing fill gives figure 4 its bulk rows, so it runs first of the two
        order = [f for f in FIGURES if f in chosen]
        if "weight" in order and "listing" in order:
            order.remove("listing")
            order.insert(order.index("weight"), "listing")
        done: dict[str, Section] = {}
        changed: list[str] = []
        for name in order:
            t0 = time.time()
            if source_digest() != digest:
                changed.append(name)
            if name == "listing":
                done[name], listing = fig_listing(plan, server.url)
            elif name == "weight":
                done[name] = fig_weight(plan, server.url, listing)
            else:
                done[name] = builders[name]()
            log(f"{name} done in {time.time() - t0:.0f} s")
            print("\n" + done[name].title + "\n" + text_table(done[name].headers, done[name].rows), flush=True)
            for n in done[name].notes:
                print("  " + n)
            print()
        sections = [done[f] for f in FIGURES if f in done]
        for name in changed:
            done[name].notes.insert(
                0, "WARNING: parkway's sources changed on disk after this run started; this figure ran on newer ones"
            )
    finally:
        server.stop()
        shutil.rmtree(plan.tmp, ignore_errors=True)
    print("=" * 100)
    for s in sections:
        print("\n" + s.title + "\n" + text_table(s.headers, s.rows))
        for n in s.notes:
            print("  " + n)
    targets = [t for s in sections for t in s.targets]
    if targets:
        print("\nTargets")
        print(text_table(["target", "measured", "met?"], [[w, v, "met" if ok else "MISSED"] for w, v, ok in targets]))
    facts["load average at end"] = loadavg()
    end_digest = source_digest()
    if end_digest != facts["parkway source"].rsplit("sources ", 1)[1].rstrip(")"):
        facts["parkway source at end"] = f"git {git_revision()}, sources {end_digest} (CHANGED during the run)"
    out = Path(args.out)
    write_results(out, sections, facts, command, started, plan)
    print(f"\nwrote {out} ({(time.time() - started) / 60:.1f} minutes)")
    return 0
