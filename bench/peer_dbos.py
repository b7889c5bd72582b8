"""Figure 1 peer: DBOS Transact, the same two steps around ``DBOS.recv`` / ``DBOS.send``.

``python -m bench.peer_dbos '{"db": "postgres"|"sqlite", "n": 1000, "window": 16, "dir": TMP, "pg": URL}'``

The workflow runs step ``ask``, publishes the request with ``DBOS.set_event`` (how a
client learns that the workflow waits for a person, DBOS's human-in-the-loop idiom),
waits in ``DBOS.recv`` and then runs step ``finish``. The client starts workflows
(``DBOS.start_workflow``, run on DBOS's threads in this process), waits for each
request (``DBOS.get_event``), answers (``DBOS.send``) and collects results; ``window``
workflows are kept started and not yet answered. CPU is this process's (os.times)
plus, for Postgres, the server's (sum of utime+stime of the postgres processes, from
/proc) per cycle. The system database is reset before each run.

The SQLite system database has no LISTEN/NOTIFY: DBOS polls it for notifications every
``notification_listener_polling_interval_sec`` (default 1.0 s, used here unless
``poll_s`` is given), so with a window of W it cannot exceed about W cycles per poll.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections import deque
from typing import Any

from .env import CLK_TCK, emit_result, self_cpu, version_of
from .flows import ANSWER, REQUEST

PG_DB = "pwbench_dbos"


def postgres_cpu() -> float:
    """CPU seconds of every process named postgres (the server and its backends)."""
    total = 0.0
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/stat") as f:
                raw = f.read()
        except OSError:
            continue
        name = raw[raw.find("(") + 1 : raw.rfind(")")]
        if name.startswith("postgres"):
            fields = raw.rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / CLK_TCK
    return total


def measure(params: dict[str, Any]) -> dict[str, Any]:
    try:
        from dbos import DBOS, DBOSConfig
    except ImportError:
        return {"skipped": "dbos is not installed (pip install -r bench/requirements.txt)"}
    n, window, db = int(params["n"]), int(params.get("window", 16)), params["db"]
    config: DBOSConfig = {"name": "pwbench", "log_level": "ERROR"}
    if db == "postgres":
        try:
            import psycopg  # noqa: F401
        except ImportError:
            return {"skipped": "psycopg is not installed"}
        base = params["pg"].rstrip("/")
        url = base.rsplit("/", 1)[0] + "/" + PG_DB
        config["system_database_url"] = url
    else:
        url = "sqlite:///" + os.path.join(params["dir"], "dbos.sqlite")
        config["system_database_url"] = url
    poll = params.get("poll_s")
    if poll is not None:
        config["notification_listener_polling_interval_sec"] = float(poll)

    @DBOS.step()
    def ask(i: int) -> int:
        return i

    @DBOS.step()
    def finish(i: int, decision: str) -> dict[str, Any]:
        return {"i": i, "decision": decision, "done": True}

    @DBOS.workflow()
    def cycle(i: int) -> dict[str, Any]:
        ask(i)
        DBOS.set_event("request", REQUEST)
        decision = DBOS.recv("answer", timeout_seconds=120)
        return finish(i, decision)

    DBOS(config=config)
    DBOS.reset_system_database()
    DBOS.launch()
    try:

        def drive(count: int) -> None:
            pending: deque[Any] = deque()
            answered: list[Any] = []
            started = 0
            while started < count or pending:
                while started < count and len(pending) < window:
                    pending.append(DBOS.start_workflow(cycle, started))
                    started += 1
                handle = pending.popleft()
                if DBOS.get_event(handle.workflow_id, "request", timeout_seconds=120) is None:
                    raise RuntimeError(f"workflow {handle.workflow_id} published no request")
                DBOS.send(handle.workflow_id, ANSWER, "answer")
                answered.append(handle)
            for handle in answered:
                result = handle.get_result()
                if result.get("decision") != ANSWER:
                    raise RuntimeError(f"workflow {handle.workflow_id} returned {result}")

        drive(int(params.get("warmup", 20)))
        pg0 = postgres_cpu() if db == "postgres" else 0.0
        c0, t0 = self_cpu(), time.perf_counter()
        drive(n)
        elapsed, cpu = time.perf_counter() - t0, self_cpu() - c0
        server = (postgres_cpu() - pg0) if db == "postgres" else 0.0
    finally:
        DBOS.destroy(destroy_registry=True)
    return {
        "system": f"dbos-{db}",
        "version": version_of("dbos"),
        "cycles": n,
        "window": window,
        "poll_s": poll if poll is not None else (1.0 if db == "sqlite" else None),
        "seconds": elapsed,
        "cycles_per_s": n / elapsed,
        "process_cpu_ms": cpu / n * 1000,
        "server_cpu_ms": server / n * 1000,
    }


def drop_postgres_database(pg: str) -> None:
    """Remove the benchmark's system database from the shared server."""
    try:
        import psycopg
    except ImportError:
        return
    with psycopg.connect(pg.replace("postgresql+psycopg://", "postgresql://"), autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {PG_DB} WITH (FORCE)")


if __name__ == "__main__":
    emit_result(measure(json.loads(sys.argv[1])))
