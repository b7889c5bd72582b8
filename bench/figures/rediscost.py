"""Figure 3, Redis cost per cycle: commands and round trips, parkway's and RQ's.

The measured process is bench/rediscost.py; this module runs it and writes the figure's section.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..plan import FLOOR_NAMES, TARGET_LABELS, TARGETS, Plan, floors, run_systems
from ..report import Section, Target, cell, fmt, md_table, med

BEFORE = Path(__file__).resolve().parent.parent / "rediscost_150d0cb.json"
"""the commands each of parkway's scripts ran per cycle at 150d0cb, before issue 22's cuts (how it was
measured is in the file)"""
CALLS = "(calls)"


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
    if res.get("parkway"):
        by_script(sec, res["parkway"])
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
        "run inside Lua scripts, plus the FCALL itself: EVALSHA before parkway's scripts were Redis functions). "
        "*By owner* = `MONITOR` on a smaller sample: each line "
        'names its keys (`"pw:` → parkway, `"rq:` → RQ, no key → its own row: MULTI/EXEC of RQ\'s '
        "transactions, health-check PINGs, and in the floor the signal RPUSH and LPOP polls); lines tagged "
        "`lua` ran inside a script (parkway's start and resume scripts write RQ's job hash: those RQ commands "
        "count as RQ's, in a script). *Round trips* = redis-py `send_packed_command` calls (a command, or a whole "
        "pipeline), counted in the worker (run under `bench.counted`) and in the client, attributed by the keys "
        "they name; one that names both (the worker's start transaction carrying parkway's `begin`, a start or resume "
        "carrying its job) counts as parkway's.",
    ]
    return sec


def commands(counts: dict[str, float]) -> float:
    """The commands a script ran per cycle (its calls left out)."""
    return sum(v for k, v in counts.items() if k != CALLS)


def by_script(sec: Section, runs: list[dict[str, Any]]) -> None:
    """Commands per cycle by script, 150d0cb beside this run, and the Lua command target."""
    now_runs = [r.get("monitor_by_script_per_cycle", {}) for r in runs]
    before_file = json.loads(BEFORE.read_text()) if BEFORE.exists() else None
    before: dict[str, dict[str, float]] = before_file["by_script"] if before_file else {}
    names = sorted({n for r in now_runs for n in r} | set(before), key=lambda n: (n == "other", n))

    def now(name: str, f: Callable[[dict[str, float]], float]) -> float:
        return med([f(r[name]) if name in r else 0.0 for r in now_runs])

    rows = []
    for name in names:
        mine = {k: now(name, lambda c, k=k: c.get(k, 0.0)) for k in {k for r in now_runs for k in r.get(name, {})}}
        busiest = sorted(((k, v) for k, v in mine.items() if k != CALLS and v), key=lambda kv: -kv[1])[:4]
        rows.append([
            name + (" (not parkway's: RQ's own scripts)" if name == "other" else ""),
            fmt(before[name].get(CALLS, 0.0), 0) if name in before else "-",
            fmt(commands(before[name]), 1) if name in before else "-",
            fmt(now(name, lambda c: c.get(CALLS, 0.0)), 0),
            fmt(now(name, commands), 1),
            ", ".join(f"{k} {v:.0f}" for k, v in busiest),
        ])
    ours = [n for n in names if n != "other"]
    total_now = sum(now(n, commands) for n in ours)
    total_before = sum(commands(before[n]) for n in ours if n in before)
    rows.append([
        "**all of parkway's scripts**",
        fmt(sum(before[n].get(CALLS, 0.0) for n in ours if n in before), 0) if before else "-",
        fmt(total_before, 1) if before else "-",
        fmt(sum(now(n, lambda c: c.get(CALLS, 0.0)) for n in ours), 0),
        fmt(total_now, 1),
        "",
    ])
    sec.extra.append(
        "Redis commands per cycle by script, before (150d0cb) and now (commands a script runs inside Redis, its "
        "FCALL or EVALSHA left out; RQ's job hash written by a hand-off counts in its script):\n\n"
        + md_table(["script", "calls, 150d0cb", "commands, 150d0cb", "calls, now", "commands, now",
                    "busiest commands now"], rows)
        + "\n\n"
        + (
            f"150d0cb: `{before_file['command']}` at commit {before_file['commit'][:7]}, "
            f"{before_file['monitor_cycles']} cycles under MONITOR, {before_file['measured']}; "
            f"{before_file['how']} (bench/{BEFORE.name}). Now: this figure's MONITOR sample, grouped the same way."
            if before_file
            else f"bench/{BEFORE.name} is missing: no before column."
        )
    )
    if before:
        sec.notes.append(
            f"commands run inside parkway's scripts per cycle: {fmt(total_now, 1)} now, {fmt(total_before, 1)} at "
            "150d0cb (by script below the table)"
        )
    calls = sum(now(n, lambda c: c.get(CALLS, 0.0)) for n in ours)
    heavy = sorted(((n, now(n, commands)) for n in ours), key=lambda kv: -kv[1])[:3]
    kinds = {k: sum(now(n, lambda c, k=k: c.get(k, 0.0)) for n in ours) for k in ("pexpire", "hset", "xadd")}
    bound = TARGETS["lua_commands"]
    sec.targets.append(Target(
        "lua_commands", TARGET_LABELS["lua_commands"], fmt(total_now, 1), total_now <= bound,
        f"{fmt(total_now - bound, 0)} commands fewer per cycle: at {fmt(calls, 0)} script calls per cycle, "
        f"{fmt(bound / calls if calls else float('nan'), 0)} commands each on average; the most now run in "
        + ", ".join(f"{n} ({fmt(v, 0)})" for n, v in heavy)
        + f"; PEXPIRE {fmt(kinds['pexpire'], 0)}, HSET {fmt(kinds['hset'], 0)}, XADD {fmt(kinds['xadd'], 0)} per "
        "cycle. Stored format 4's index buckets cost about 30 of them (69.2 per cycle before them, issue 36): "
        "each of a cycle's five index writes (create's run member, park's two, resume's two) finds its bucket "
        "in the directory (ZREVRANGEBYLEX), checks its size before adding (ZCARD) or whether a removal emptied "
        "it (EXISTS), keeps the index's count (HINCRBY) and, for a removal, also tries the single zset runs "
        "indexed before format 4 are in; they save ~280 B per parked run. Fewer needs the count summed when "
        "read instead of kept (-5), the old zset tried only while it exists (-2), emptied buckets left to the "
        "reconciler (-2), and the rest from the scripts themselves (issue 22's ways in: renew a TTL only once it "
        "has run down past a slack, one HSET per key per script)",
    ))
