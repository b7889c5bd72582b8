"""Figure 8, the ``parkway`` command's start: ``--help``, ``interrupts``, and ``import parkway``.

The measured process is bench/startup.py: each command as a new process, one at a time.
"""

from __future__ import annotations

from ..plan import TARGETS, Plan, task
from ..report import Section, cell, fmt, med


def measure(plan: Plan, url: str) -> Section:
    count = 10 if plan.quick else 30
    sec = Section("startup", "8. the parkway command's start (wall time, new process each)",
                  ["command", "p50 s", "p90 s", "min s"])
    results = [r for r in (task("startup", {"url": url, "count": count}, 600) for _ in range(plan.runs)) if r]
    if not results:
        return sec
    for name in results[0]["commands"]:
        runs = [r["commands"][name] for r in results]
        sec.rows.append([name, *(cell([x[k] for x in runs], 3) for k in ("p50_s", "p90_s", "min_s"))])
        target = TARGETS.get(f"start {name}")
        if target is not None:
            p50 = med([x["p50_s"] for x in runs])
            sec.targets.append((f"`{name}` p50 ≤ {target} s", fmt(p50, 3) + " s", p50 <= target))
    sec.extra.append(
        f"Wall time from `Popen` to exit, {count} starts per command and run, one at a time; the `parkway` script "
        "beside the benchmark's interpreter; `interrupts` lists the benchmark's own empty Redis (start, connect, one "
        "listing call). `parkway` loads its public names on first use, and the CLI imports a command's needs when "
        "the command runs, so `--help` imports neither redis, pydantic nor structlog."
    )
    return sec
