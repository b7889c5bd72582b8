"""Figure 7, where a worker's time goes: py-spy shares of the worker's main thread.

The measured process is bench/profile.py; this module runs it and writes the figure's section.
"""

from __future__ import annotations

from typing import Any

from ..plan import FLOOR_NAMES, Plan, task
from ..report import Section, log


def measure(plan: Plan, url: str) -> Section:
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
        "RQ|redis wait": "worker loop (dequeue, take-and-begin, heartbeats): waiting on Redis replies",
        "RQ|redis-py": "worker loop: redis-py packing/parsing",
        "RQ|python": "worker loop: RQ's and the worker's own Python",
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
        "`execute_with` (parkway's job body) is on the stack and to a column by its innermost frame: "
        "socket read/write → waiting on Redis (hiredis parsing happens inside that call too), other "
        "redis-py frames → redis-py, anything else → Python."
    )
    return sec
