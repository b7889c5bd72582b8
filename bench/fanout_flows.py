"""The workflows bench/fanout.py runs: a parent starting ``n`` children, all at once with
``use_workflows`` or one after another with ``use_workflow``. Each child sleeps ``work_ms`` (its
"work": I/O-bound, so the figure shows what the fan-out overlaps, not the machine's two cores).
Workers import them as ``bench.fanout_flows:NAME``."""

from __future__ import annotations

import time
from typing import Any

from parkway import Workflow, use_workflow, use_workflows

child = Workflow("bench_child")


@child.node(start=True)
def work(data: dict[str, Any]) -> dict[str, Any]:
    time.sleep(data["work_ms"] / 1000)
    return {"i": data["i"]}


fan = Workflow("bench_fan")


@fan.node(start=True)
def fan_out(data: dict[str, Any]) -> dict[str, Any]:
    calls = [(child, {"i": i, "work_ms": data["work_ms"]}) for i in range(data["n"])]
    results = use_workflows(calls, id="c", limit=data["limit"])
    return {"done": len(results)}


chain = Workflow("bench_chain")


@chain.node(start=True)
def one_by_one(data: dict[str, Any]) -> dict[str, Any]:
    for i in range(data["n"]):
        use_workflow(child, {"i": i, "work_ms": data["work_ms"]}, id=f"c{i}")
    return {"done": data["n"]}
