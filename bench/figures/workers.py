"""Figure 6, parkway throughput with 1, 2 and 4 worker processes.

The measured process is bench/cycles.py (figure 1's, parkway only); this module runs it and
writes the figure's section.
"""

from __future__ import annotations

import os
from typing import Any

from ..plan import Plan, task
from ..report import Section, cell, log


def measure(plan: Plan, url: str) -> Section:
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
