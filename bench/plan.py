"""What a benchmark run measures: the plan from the flags, the systems compared, the targets.

``Plan`` holds the sizes every figure reads; ``task`` runs one measured process
(``python -m bench.<module>``, see bench/env.py) and logs a failure or a skip instead of
raising; ``run_systems`` and ``peers_available`` say which systems a figure runs.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .env import run_task, version_of
from .report import log

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


DBOS_SQLITE_CAP = 300  # cycles per run: DBOS's 1 s SQLite poll makes it the slowest system by far
TARGETS = {
    # issue 22's targets, exactly, in its order
    "redis_cpu_ms": 1.0,  # Redis CPU per cycle, ms (at or below the RQ floor: one Redis core >= 1,000 cycles/s)
    "lua_commands": 70.0,  # Redis commands run inside parkway's Lua scripts per cycle
    "weight": 1024.0,  # bytes per parked run (a real worker, the parked runs' streams gone)
    "latency_p50": 3.0,  # resume p50, resume() called -> node's first line, < 3x LPUSH issued -> BLPOP returned p50
    "latency_p99": 3.0,  # the same at p99
    "send_ratio": 1.5,  # session send() at 1,000 messages <= 1.5x its time at 1
    "beyond_text": 1024.0,  # session memory per turn beyond the message text, bytes (1 KB)
    "cpu_memory": 0.8,  # total CPU per cycle (worker + Redis + client) <= 0.8x LangGraph + InMemorySaver's
    # issue 36's two more
    "redis_floor": 1.0,  # Redis CPU per cycle <= 1.0x the RQ floor's (parkway's worker class), same run
    "cpu_postgres": 0.3,  # total CPU per cycle <= 0.3x LangGraph + PostgresSaver's (its Postgres included)
    # issue 23's start times, seconds (p50)
    "start parkway --help": 0.3,
    "start parkway interrupts": 0.6,
}
TARGET_LABELS = {
    "redis_cpu_ms": f"Redis CPU per cycle ≤ {TARGETS['redis_cpu_ms']} ms",
    "lua_commands": f"Redis commands run inside parkway's Lua per cycle ≤ {TARGETS['lua_commands']:.0f}",
    "weight": f"bytes per parked run (a real worker, streams gone) ≤ {TARGETS['weight']:,.0f} B",
    "latency_p50": f"resume p50 (resume() called → node's first line) < {TARGETS['latency_p50']:.0f}× the "
    "LPUSH→BLPOP hand-off's p50",
    "latency_p99": f"resume p99 (resume() called → node's first line) < {TARGETS['latency_p99']:.0f}× the "
    "LPUSH→BLPOP hand-off's p99",
    "send_ratio": f"session send() at 1,000 messages ÷ at 1 ≤ {TARGETS['send_ratio']}×",
    "beyond_text": f"session memory per turn beyond the text ≤ {TARGETS['beyond_text'] / 1024:.0f} KB "
    f"({TARGETS['beyond_text']:,.0f} B, averaged over 1,000 messages)",
    "cpu_memory": f"total CPU per cycle ÷ LangGraph + InMemorySaver ≤ {TARGETS['cpu_memory']}×",
    "redis_floor": "Redis CPU per cycle ÷ the RQ floor's (parkway's worker class), same run ≤ "
    f"{TARGETS['redis_floor']}×",
    "cpu_postgres": "total CPU per cycle ÷ LangGraph + PostgresSaver (its Postgres included) ≤ "
    f"{TARGETS['cpu_postgres']}×",
    "start parkway --help": f"`parkway --help` p50 ≤ {TARGETS['start parkway --help']} s (issue 23)",
    "start parkway interrupts": f"`parkway interrupts` p50 ≤ {TARGETS['start parkway interrupts']} s (issue 23)",
}
TARGET_FIGURES = {
    "redis_cpu_ms": "cycles", "lua_commands": "rediscost", "weight": "weight", "latency_p50": "latency",
    "latency_p99": "latency", "send_ratio": "sessions", "beyond_text": "sessions", "cpu_memory": "cycles",
    "redis_floor": "cycles", "cpu_postgres": "cycles",
    "start parkway --help": "startup", "start parkway interrupts": "startup",
}
"""the figure that measures each target (a run without that figure lists the target as not measured)"""
EARLIER_TARGETS = {
    # issue 9's targets that issue 22 did not replace, reported under their own heading
    "cost": 1.25,  # cycle cost <= 1.25x the RQ floor run by parkway's worker class
    "cpu_sqlite": 0.5,  # total CPU per cycle <= 0.5x LangGraph + SqliteSaver's
    "listing": 2.0,  # list_interrupts p99 at 1,000,000 pending <= 2x its p99 at 1,000
}


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
        if not installed("langgraph-checkpoint-postgres") or not installed("psycopg-pool"):
            skips.append("LangGraph + Postgres: langgraph-checkpoint-postgres or psycopg-pool not installed")
        elif not pg_reachable(plan.pg):
            skips.append(f"LangGraph + Postgres: no PostgreSQL at {plan.pg}, or psycopg not installed")
        else:
            peers.append(("langgraph-postgres", "peer_langgraph", {"saver": "postgres", "pg": plan.pg}))
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
