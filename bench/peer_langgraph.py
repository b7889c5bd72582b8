"""Figure 1 peer: LangGraph, the same two-node graph, with its Postgres, SQLite or in-memory checkpointer.

``python -m bench.peer_langgraph '{"saver": "postgres"|"sqlite"|"memory", "n": 1000, "window": 16, "dir": TMP,
"pg": URL}'``

Node ``ask`` calls ``interrupt(request)`` (the graph stops and checkpoints), node
``finish`` returns. A cycle is ``invoke(input)`` (runs ``ask`` until it pauses) and later
``invoke(Command(resume=ANSWER))`` (replays ``ask``, whose ``interrupt`` now returns the
answer, then runs ``finish``). Everything runs in this one process (LangGraph has no
separate worker); ``window`` threads are kept paused: run i is started, then run
i - window is resumed. CPU per cycle is this process's CPU (os.times) per cycle, and with
Postgres also the server's (every ``postgres`` process, as for DBOS); the SQLite file is on
local disk with the saver's default settings. ``PostgresSaver`` runs on a database of its own
(``PG_DB``, made empty for each run) through a ``psycopg_pool.ConnectionPool`` with the connection
settings LangGraph's documentation gives (autocommit, ``prepare_threshold=0``, dict rows).
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any, TypedDict

from .env import emit_result, self_cpu, version_of
from .flows import ANSWER, REQUEST
from .peer_dbos import postgres_cpu

PG_DB = "bench_langgraph"


class State(TypedDict, total=False):
    i: int
    decision: str
    done: bool


def build(saver: Any) -> Any:
    from langgraph.graph import END, START, StateGraph
    from langgraph.types import interrupt

    def ask(state: State) -> State:
        decision = interrupt(REQUEST)
        return {"decision": decision}

    def finish(state: State) -> State:
        return {"done": True}

    graph = StateGraph(State)
    graph.add_node("ask", ask)
    graph.add_node("finish", finish)
    graph.add_edge(START, "ask")
    graph.add_edge("ask", "finish")
    graph.add_edge("finish", END)
    return graph.compile(checkpointer=saver)


def measure(params: dict[str, Any]) -> dict[str, Any]:
    try:
        from langgraph.types import Command
    except ImportError:
        return {"skipped": "langgraph is not installed (pip install -r bench/requirements.txt)"}
    n, window, kind = int(params["n"]), int(params.get("window", 16)), params["saver"]
    if kind == "sqlite":
        try:
            import sqlite3

            from langgraph.checkpoint.sqlite import SqliteSaver
        except ImportError:
            return {"skipped": "langgraph-checkpoint-sqlite is not installed"}
        path = os.path.join(params["dir"], f"langgraph-{os.getpid()}.sqlite")  # a fresh file per run
        conn = sqlite3.connect(path, check_same_thread=False)
        saver: Any = SqliteSaver(conn)
    elif kind == "postgres":
        try:
            saver, pool = _postgres_saver(params["pg"])
        except ImportError:
            return {"skipped": "langgraph-checkpoint-postgres or psycopg_pool is not installed"}
    else:
        from langgraph.checkpoint.memory import InMemorySaver

        saver = InMemorySaver()
    app = build(saver)

    def config(i: int) -> dict[str, Any]:
        return {"configurable": {"thread_id": f"t{i}"}}

    def start(i: int) -> None:
        out = app.invoke({"i": i}, config(i))
        if "__interrupt__" not in out:
            raise RuntimeError(f"thread {i} did not pause: {out}")

    def resume(i: int) -> None:
        out = app.invoke(Command(resume=ANSWER), config(i))
        if not out.get("done") or out.get("decision") != ANSWER:
            raise RuntimeError(f"thread {i} did not complete: {out}")

    def drive(first: int, count: int) -> None:
        for k in range(count + window):
            if k < count:
                start(first + k)
            if k >= window:
                resume(first + k - window)

    warmup = int(params.get("warmup", 30))
    drive(0, warmup)
    pg0 = postgres_cpu() if kind == "postgres" else 0.0
    c0, t0 = self_cpu(), time.perf_counter()
    drive(warmup, n)
    elapsed, cpu = time.perf_counter() - t0, self_cpu() - c0
    server = postgres_cpu() - pg0 if kind == "postgres" else float("nan")
    if kind == "postgres":
        pool.close()
        drop_database(params["pg"])
    if kind == "sqlite":
        conn.close()
        for suffix in ("", "-wal", "-shm"):
            if os.path.exists(path + suffix):
                os.remove(path + suffix)
    return {
        "system": f"langgraph-{kind}",
        "version": version_of("langgraph"),
        "cycles": n,
        "window": window,
        "seconds": elapsed,
        "cycles_per_s": n / elapsed,
        "process_cpu_ms": cpu / n * 1000,
        "server_cpu_ms": server / n * 1000,
    }


def _database(pg: str, name: str) -> str:
    return pg.rstrip("/").rsplit("/", 1)[0] + "/" + name


def _postgres_saver(pg: str) -> tuple[Any, Any]:
    """A PostgresSaver on an empty database of its own, over a connection pool."""
    import psycopg
    from langgraph.checkpoint.postgres import PostgresSaver
    from psycopg.rows import dict_row
    from psycopg_pool import ConnectionPool

    drop_database(pg)
    with psycopg.connect(pg, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {PG_DB}")
    pool = ConnectionPool(
        _database(pg, PG_DB),
        max_size=4,
        kwargs={"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row},
        open=True,
    )
    saver = PostgresSaver(pool)  # type: ignore[arg-type]
    saver.setup()
    return saver, pool


def drop_database(pg: str) -> None:
    """Remove the peer's database from the shared server."""
    import psycopg

    with psycopg.connect(pg, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {PG_DB} WITH (FORCE)")


if __name__ == "__main__":
    emit_result(measure(json.loads(sys.argv[1])))
