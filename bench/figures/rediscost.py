"""Figure 3, Redis cost per cycle: commands and round trips, parkway's and RQ's.

The measured process is bench/rediscost.py; this module runs it and writes the figure's section.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..plan import FLOOR_NAMES, Plan, floors, run_systems
from ..report import Section, cell


def measure(plan: Plan, url: str) -> Section:
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
    row("round trips, client: parkway (incl. waiting listings)", crt("parkway"), 2)
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
        f"{plan.count_runs} run(s); same client mode as figure 1 (its listings, their waits on the pause feed "
        "and the floor's empty polls are part of the client's count).",
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
