"""Figure 1, cycle throughput: parkway, the RQ floors and the peers, run by run.

The measured processes are bench/cycles.py (parkway and the floors), bench/peer_langgraph.py
and bench/peer_dbos.py; this module runs them and writes the figure's section.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from ..plan import (
    DBOS_SQLITE_CAP,
    EARLIER_TARGETS,
    FLOOR_NAMES,
    TARGET_LABELS,
    TARGETS,
    Plan,
    floors,
    peers_available,
    run_systems,
    task,
)
from ..report import Section, Target, cell, fmt, log, med


def memory_miss(res: dict[str, list[dict[str, Any]]]) -> str:
    """What total CPU per cycle at 0.8x LangGraph + InMemorySaver's would take, from this run's figures."""
    pk, lgm = res.get("parkway", []), res.get("langgraph-memory", [])
    if not pk or not lgm:
        return ""
    parts = {k: med([r[f"{k}_cpu_ms"] for r in pk]) for k in ("worker", "redis", "client")}
    now, theirs = sum(parts.values()), med([r["process_cpu_ms"] for r in lgm])
    return (
        f"parkway's cycle costs {fmt(now, 2)} ms of CPU (worker {fmt(parts['worker'], 2)}, Redis "
        f"{fmt(parts['redis'], 2)}, client {fmt(parts['client'], 2)}) against one in-process graph's "
        f"{fmt(theirs, 2)} ms: {TARGETS['cpu_memory']}× is {fmt(TARGETS['cpu_memory'] * theirs, 2)} ms, "
        f"{fmt(now - TARGETS['cpu_memory'] * theirs, 2)} ms less per cycle. The graph makes no round trip; "
        "parkway's cycle makes about 10 (the worker 5: two take-and-begins, park, two advances, the park and "
        "the last advance each carrying the worker's next dequeue; the client about 5: start, its listings, "
        "resume). Most of the worker's and the client's CPU is "
        "Python, spread thin (perf record under this cycle: ~69% and ~66% of it in the interpreter, ~21% in "
        "the kernel, where the round trips' system calls are; cProfile of the client: ~900 Python calls a "
        "cycle, none above ~5% of its time). Below the bound needs both fewer round trips (a "
        "listing's page and its runs' records read in one, a read-only function) and fewer Python layers "
        "between each public call and the wire"
    )


def extrapolation(redis_ms: float, worker_ms: float, machines: int = 100, cores: int = 4) -> str:
    """Issue 24's paper extrapolation to ``machines`` worker machines of ``cores`` cores, from this
    run's median Redis and worker CPU per cycle (arithmetic, not a measurement)."""
    per_redis_core = 1000 / redis_ms
    per_worker_core = 1000 / worker_ms
    cycles = machines * cores * per_worker_core
    shards = math.ceil(cycles / per_redis_core)
    return (
        f"paper extrapolation (arithmetic on this run's medians, not measured): at {redis_ms:.2f} ms of Redis CPU "
        f"per cycle one Redis core carries about {per_redis_core:,.0f} cycles/s, and at {worker_ms:.2f} ms of worker "
        f"CPU one worker core about {per_worker_core:,.0f}, so one Redis keeps about "
        f"{per_redis_core / per_worker_core:.1f} busy worker cores fed. {machines} worker machines of {cores} cores "
        f"({machines * cores} worker cores, about {cycles:,.0f} cycles/s) would need about {shards} Redis primaries "
        "(PARKWAY_SHARDS), each under Sentinel; replica acknowledgement (WAIT) adds about 0.4-0.6 ms of Redis CPU "
        "per cycle (bench/SHARDS.md), i.e. proportionally more shards, and listings that read every shard grow "
        "with their number (filter them by workflow, tenant or audience at that size). Assumes workers and "
        "Redis scale by core, which this 2-core machine cannot show (bench/SHARDS.md)"
    )


def measure(plan: Plan, url: str) -> Section:
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
        from ..peer_dbos import drop_postgres_database

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
    order = [
        "parkway", "floor-pw", "floor", "langgraph-postgres", "langgraph-sqlite", "langgraph-memory", "dbos-postgres",
        "dbos-sqlite",
    ]
    labels = {
        "parkway": "parkway (1 worker)",
        "floor-pw": "RQ floor (2 trivial jobs), parkway's worker class",
        "floor": "RQ floor (2 trivial jobs), stock rq.SimpleWorker",
        "langgraph-postgres": "LangGraph + PostgresSaver",
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
        elif name in ("dbos-postgres", "langgraph-postgres"):
            w, c, d = [float("nan")], [r["process_cpu_ms"] for r in rs], [r["server_cpu_ms"] for r in rs]
        elif name.startswith("dbos"):
            w, d, c = [float("nan")], [float("nan")], [r["process_cpu_ms"] for r in rs]
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
    total = lambda p: p["worker_cpu_ms"] + p["redis_cpu_ms"] + p["client_cpu_ms"]  # noqa: E731
    floor_miss = (
        "the gap to the floor is parkway's own work (its Lua scripts, the client's lookup and validation, the "
        "replay, the second node) less the RQ bookkeeping its jobs skip: the same cuts as issue 22's Redis CPU "
        "and Lua command rows"
    )
    # (note text, values, target key or None, earlier issue's target?, what the miss would take)
    ratios: list[tuple[str, list[float], str | None, bool, str]] = []
    for fl in floors():
        short = f"parkway ÷ {FLOOR_NAMES[fl]}:"
        target = "cost" if fl == floors()[0] else None  # compared with the floor run by parkway's own worker class
        time_ratio = paired(pk, fl, lambda p, f: f["cycles_per_s"] / p["cycles_per_s"])
        cpu_ratio = paired(
            pk, fl, lambda p, f: (p["worker_cpu_ms"] + p["redis_cpu_ms"]) / (f["worker_cpu_ms"] + f["redis_cpu_ms"])
        )
        all_ratio = paired(pk, fl, lambda p, f: total(p) / total(f))
        ratios += [
            (f"{short} time per cycle (floor cycles/s ÷ parkway cycles/s)", time_ratio, target, True, floor_miss),
            (f"{short} worker+Redis CPU per cycle", cpu_ratio, target, True, floor_miss),
            (f"{short} worker+Redis+client CPU per cycle", all_ratio, None, False, ""),
        ]
    lgp = paired(pk, "langgraph-postgres", lambda p, g: p["cycles_per_s"] / g["cycles_per_s"])
    lg = paired(pk, "langgraph-sqlite", lambda p, g: p["cycles_per_s"] / g["cycles_per_s"])
    lgm = paired(pk, "langgraph-memory", lambda p, g: p["cycles_per_s"] / g["cycles_per_s"])
    db = paired(pk, "dbos-postgres", lambda p, g: p["cycles_per_s"] / g["cycles_per_s"])
    dbs = paired(pk, "dbos-sqlite", lambda p, g: p["cycles_per_s"] / g["cycles_per_s"])
    cpu_lgp = paired(pk, "langgraph-postgres", lambda p, g: total(p) / (g["process_cpu_ms"] + g["server_cpu_ms"]))
    cpu_lg = paired(pk, "langgraph-sqlite", lambda p, g: total(p) / g["process_cpu_ms"])
    cpu_lgm = paired(pk, "langgraph-memory", lambda p, g: total(p) / g["process_cpu_ms"])
    ratios += [
        ("parkway ÷ LangGraph+SQLite, total CPU per cycle", cpu_lg, "cpu_sqlite", True,
         "the same cuts as the LangGraph + InMemorySaver row above, deeper"),
        ("parkway ÷ LangGraph+memory, total CPU per cycle", cpu_lgm, "cpu_memory", False, memory_miss(res)),
        ("parkway ÷ LangGraph+Postgres, total CPU per cycle (its Postgres included)", cpu_lgp, "cpu_postgres", False,
         "the same cuts as the LangGraph + InMemorySaver row above: the peer's saver costs it a round trip to "
         "Postgres per checkpoint, so 0.3× of it is about 0.9× of the in-process graph"),
        ("parkway/LangGraph+Postgres cycles/s", lgp, None, False, ""),
        ("parkway/LangGraph+SQLite cycles/s", lg, None, False, ""),
        ("parkway/LangGraph+memory cycles/s", lgm, None, False, ""),
        ("parkway/DBOS+Postgres cycles/s", db, None, False, ""),
        ("parkway/DBOS+SQLite cycles/s", dbs, None, False, ""),
    ]
    if lgp and cpu_lgp:
        sec.notes.append(
            f"against LangGraph + PostgresSaver (the production peer): parkway runs {fmt(med(lgp), 2)}× its cycles/s "
            f"at {fmt(med(cpu_lgp), 2)}× its total CPU per cycle (its Postgres included); medians of the ratios below"
        )
    redis_ms = [r["redis_cpu_ms"] for r in res.get(pk, [])]
    worker_ms = [r["worker_cpu_ms"] for r in res.get(pk, [])]
    if redis_ms and worker_ms:
        sec.notes.append(extrapolation(med(redis_ms), med(worker_ms)))
    if redis_ms:
        bound = TARGETS["redis_cpu_ms"]
        floor_ms = [r["redis_cpu_ms"] for r in res.get(floors()[0], [])]
        miss = (
            (f"the RQ floor (two trivial jobs on RQ's path, {FLOOR_NAMES[floors()[0]]}) takes "
             f"{fmt(med(floor_ms), 2)} ms here. " if floor_ms else "")
            + "Parkway's jobs skip most of RQ's bookkeeping; what is left of its Redis CPU is its own Lua "
            "functions (seven calls per cycle: create, begin twice, park, resume, advance twice; the client resumes "
            "what it listed, so no lookup; figure 3 counts their commands by script; each is a Redis function, so "
            "a call runs its body alone) and the round trips around them. At or below the floor needs fewer, "
            "smaller transitions and fewer round trips, not a cheaper queue: figure 3's Lua command row is the "
            "same cut"
        )
        sec.targets.append(
            Target("redis_cpu_ms", TARGET_LABELS["redis_cpu_ms"], fmt(med(redis_ms), 2) + " ms",
                   med(redis_ms) <= bound, miss)
        )
        by_floor = paired(pk, floors()[0], lambda p, f: p["redis_cpu_ms"] / f["redis_cpu_ms"])
        if by_floor:
            sec.notes.append(f"ratio parkway ÷ {FLOOR_NAMES[floors()[0]]}, Redis CPU per cycle: {cell(by_floor, 2)}")
            sec.targets.append(
                Target("redis_floor", TARGET_LABELS["redis_floor"], fmt(med(by_floor), 2) + "×",
                       med(by_floor) <= TARGETS["redis_floor"], miss)
            )
    for what, values, key, earlier, miss in ratios:
        if not values:
            continue
        sec.notes.append(f"ratio {what}: {cell(values, 2)}")
        if key:
            m = med(values)
            bound = EARLIER_TARGETS[key] if earlier else TARGETS[key]
            label = (
                TARGET_LABELS[key]
                if not earlier
                else f"total CPU per cycle ≤ {bound}× LangGraph + SqliteSaver's"
                if key == "cpu_sqlite"
                else f"cycle cost ≤ {bound}× {FLOOR_NAMES[floors()[0]]}: " + what.split(": ", 1)[1]
            )
            sec.targets.append(Target(key, label, fmt(m, 2) + "×", m <= bound, miss, earlier))
    for s in skips:
        sec.notes.append(f"skipped: {s}")
    polls = [r.get("empty_polls", 0) / r["cycles"] for r in res.get(pk, [])]
    sec.extra += [
        f"N = {plan.cycles} cycles per run (after 30 warm-up cycles), {plan.runs} runs, systems interleaved run by "
        f"run so drift hits all alike; ratios are taken within a run, then the median (min–max) over runs.",
        f"Client mode: **windowed, {plan.mode}**. The client keeps {plan.window} runs started and not yet resumed. "
        + (
            "It lists `list_interrupts(workflow=..., limit=100, include_tokens=True, wait_ms=1000)`: a listing "
            "that finds nothing waits on parkway's pause feed for the next pause, then lists again (floor: `LPOP` "
            "of the signal list, 100 at a time, and a 0.5 ms sleep when it finds nothing), resumes each paused run "
            "found (`resume(token, selected=...)`; floor: enqueue job 2) and starts a new run for each one resumed. "
            if plan.mode == "poll"
            else "It blocks on the oldest run's event stream (`stream(run_id, until='settled')`; floor: `BLPOP`) "
            "and resumes it, starting a new run for each one resumed. "
        )
        + "The clock runs from the first start to the last completion. Empty listings per parkway cycle "
        "(a wait that saw no pause for a second): "
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
        "that runs parkway's maintenance thread) when parkway has one. The target compares with the latter. "
        "Its trivial jobs are not parkway's: that worker reads each one's hash and runs it on RQ's path, trimmed "
        "to 4 round trips of bookkeeping per job; parkway's own jobs skip that path (run by their id alone: the "
        "dequeue and one round trip that takes and begins the job), so the gap to this floor is parkway's own "
        "work (its Lua scripts, client-side lookup/validation, replay, the second node) less the RQ bookkeeping "
        "its jobs skip, and parkway can come in under it. The stock floor shows what RQ alone costs unmodified.",
        "CPU per cycle: worker processes from /proc/PID/stat (utime+stime), Redis from INFO cpu "
        "(used_cpu_user+used_cpu_sys), the client from os.times(), each a delta over the timed window ÷ cycles. "
        "LangGraph runs in one process (no worker): its CPU is in the client column. DBOS runs workflows on "
        "threads of the client process; its Postgres CPU is the sum over all `postgres` processes on the "
        "machine (a shared server: other load would show up there).",
        "LangGraph: `StateGraph` with nodes `ask` (`interrupt(request)`) and `finish`; a cycle is "
        "`invoke(input)` then `invoke(Command(resume=answer))` on the same thread id; with "
        "`PostgresSaver` on a fresh database of the machine's PostgreSQL (server defaults) through a "
        "`psycopg_pool.ConnectionPool` (max 4; autocommit, `prepare_threshold=0`, dict rows, as LangGraph's "
        "documentation sets it up; its Postgres CPU counted as for DBOS), "
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
