"""Figure 8, the ``parkway`` command's start: ``--help``, ``interrupts``, and ``import parkway``.

The measured process is bench/startup.py: each command as a new process, one at a time.
"""

from __future__ import annotations

from ..plan import TARGET_LABELS, TARGETS, Plan, task
from ..report import Section, Target, cell, fmt, med


def measure(plan: Plan, url: str) -> Section:
    count = 10 if plan.quick else 30
    sec = Section("startup", "8. the parkway command's start (wall time, new process each)",
                  ["command", "p50 s", "p90 s", "min s"])
    results = [r for r in (task("startup", {"url": url, "count": count}, 600) for _ in range(plan.runs)) if r]
    if not results:
        return sec
    p50s = {name: med([r["commands"][name]["p50_s"] for r in results]) for name in results[0]["commands"]}
    imported = next((v for name, v in p50s.items() if name.startswith("python -c")), None)
    for name in results[0]["commands"]:
        runs = [r["commands"][name] for r in results]
        sec.rows.append([name, *(cell([x[k] for x in runs], 3) for k in ("p50_s", "p90_s", "min_s"))])
        key = f"start {name}"
        if key in TARGETS:
            bound, p50 = TARGETS[key], p50s[name]
            miss = (
                f"its p50 is {fmt(p50 - bound, 3)} s over; "
                + (
                    f"importing the client alone (`import parkway; parkway.Parkway`, the third row) takes "
                    f"{fmt(imported, 3)} s p50"
                    + (", over the target by itself" if imported > bound else "")
                    + ": the command must load less before its first call (the client's imports: redis, "
                    "pydantic, structlog, the store and its scripts)"
                    if imported is not None and name != "parkway --help"
                    else "the command must import less before it prints"
                )
            )
            sec.targets.append(Target(key, TARGET_LABELS[key], fmt(p50, 3) + " s", p50 <= bound, miss))
    sec.extra.append(
        f"Wall time from `Popen` to exit, {count} starts per command and run, one at a time; the `parkway` script "
        "beside the benchmark's interpreter; `interrupts` lists the benchmark's own empty Redis (start, connect, one "
        "listing call); parkway's bytecode is written first, as `pip install` does (a checkout under "
        "PYTHONDONTWRITEBYTECODE would compile every module at every start). `parkway` loads its public names on "
        "first use, and the CLI imports a command's needs when the command runs, so `--help` imports neither redis, "
        "pydantic nor structlog, and `interrupts` neither structlog (which imports rich when installed), the asyncio "
        "client nor the worker (tests/test_cli_imports.py)."
    )
    return sec
