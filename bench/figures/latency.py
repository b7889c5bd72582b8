"""Figure 2, resume latency: parkway's resume against a bare LPUSH -> BLPOP hand-off.

The measured process is bench/latency.py; this module runs it and writes the figure's section.
"""

from __future__ import annotations

from typing import Any

from ..plan import TARGET_LABELS, TARGETS, Plan, task
from ..report import Section, Target, cell, fmt, log, med


def measure(plan: Plan, url: str) -> Section:
    pk: list[dict[str, Any]] = []
    ho: list[dict[str, Any]] = []
    for run in range(plan.runs):
        log(f"latency run {run + 1}/{plan.runs}: parkway")
        r = task("latency", {"kind": "parkway", "url": url, "n": plan.latency_n, "idle_s": 0.01}, 900)
        if r:
            pk.append(r)
        log(f"latency run {run + 1}/{plan.runs}: LPUSH -> BLPOP hand-off")
        r = task("latency", {"kind": "handoff", "url": url, "n": plan.latency_n, "idle_s": 0.01}, 300)
        if r:
            ho.append(r)
    sec = Section("latency", "2. Resume latency (idle worker)", ["measured", "p50 ms", "p99 ms", "max ms"])
    if pk:
        sec.rows.append(
            [
                "parkway: resume() called → node's first line, the client that listed it",
                cell([r["from_call"]["p50_ms"] for r in pk], 2),
                cell([r["from_call"]["p99_ms"] for r in pk], 2),
                cell([r["from_call"]["max_ms"] for r in pk], 1),
            ]
        )
        sec.rows.append(
            [
                "parkway: resume() called → node's first line, a client given only the token (lookup first)",
                cell([r["from_call_token"]["p50_ms"] for r in pk if "from_call_token" in r], 2),
                cell([r["from_call_token"]["p99_ms"] for r in pk if "from_call_token" in r], 2),
                cell([r["from_call_token"]["max_ms"] for r in pk if "from_call_token" in r], 1),
            ]
        )
        sec.rows.append(
            [
                "parkway: resume() returned → node's first line",
                cell([r["from_return"]["p50_ms"] for r in pk], 2),
                cell([r["from_return"]["p99_ms"] for r in pk], 2),
                cell([r["from_return"]["max_ms"] for r in pk], 1),
            ]
        )
    if ho:
        sec.rows.append(
            [
                "LPUSH issued → BLPOP returned (other process)",
                cell([r["from_call"]["p50_ms"] for r in ho], 2),
                cell([r["from_call"]["p99_ms"] for r in ho], 2),
                cell([r["from_call"]["max_ms"] for r in ho], 1),
            ]
        )
    if pk and ho:
        p99 = [a["from_call"]["p99_ms"] / b["from_call"]["p99_ms"] for a, b in zip(pk, ho, strict=False)]
        p50 = [a["from_call"]["p50_ms"] / b["from_call"]["p50_ms"] for a, b in zip(pk, ho, strict=False)]
        ret99 = [a["from_return"]["p99_ms"] / b["from_call"]["p99_ms"] for a, b in zip(pk, ho, strict=False)]
        tok99 = [a["from_call_token"]["p99_ms"] / b["from_call"]["p99_ms"] for a, b in zip(pk, ho, strict=False)]
        sec.notes.append(
            f"ratio parkway (resume() called → first line) / hand-off (LPUSH issued → BLPOP returned), p99: "
            f"{cell(p99, 2)}; p50: {cell(p50, 2)}"
        )
        sec.notes.append(
            f"for comparison, p99: a client given only the token (it looks the interrupt up first) {cell(tok99, 2)}; "
            f"from resume() returned {cell(ret99, 2)}"
        )
        miss = (
            "the hand-off crosses two process hops (client to Redis, Redis to the other process), and so does a "
            "resume now (stored format 3: the commit, when the queue is empty, also begins the attempt, and the "
            "worker runs the node from its dequeue's reply, with no round trip of its own before the first line; "
            "it was four hops before issue 36). What is left is work on each hop that the hand-off does not do: "
            "the commit's Lua (the answer checked against the pending interrupt, the fence bumped, the begin's "
            "writes and the reply the element carries), the client's Python before it sends (the answer validated "
            "against the request, the token checked) and the worker's from the dequeue to the node (the element "
            "read into an attempt, the replay up to its first line); three processes share two cores. Under 3× "
            "needs less of each: fewer Python layers on both sides (issue 36's move 3) and a smaller commit"
        )
        for key, ratios in (("latency_p50", p50), ("latency_p99", p99)):
            sec.targets.append(
                Target(key, TARGET_LABELS[key], fmt(med(ratios), 2) + "×", med(ratios) < TARGETS[key], miss)
            )
        early = sum(r["node_before_return"] for r in pk)
        sec.notes.append(f"resumes whose node started before resume() returned: {early}")
    sec.extra += [
        f"{plan.latency_n} resumes of each kind per run (after 20 warm-up of each), {plan.runs} runs. One "
        "parkway worker; for each run of `bench.flows:timed` the client starts it, lists its interrupt with "
        "its token (the listing waits on the pause feed for the pause), sleeps 10 ms (the worker is back in "
        "its blocking dequeue), then calls "
        "`resume()`: on every other run the client that listed it (it holds the request, so the commit is the "
        "one round trip), on the others a second client given only the token (it looks the interrupt up "
        "first: two round trips). The node's first line "
        "RPUSHes `time.time()` to a Redis list on every attempt; the replay's timestamp minus the time taken just "
        "before `resume()` is called is the latency (same clock, same machine): both ends match the hand-off's, "
        "whose clock starts before `LPUSH` is issued. The time from `resume()` returning is shown beside it.",
        "Hand-off: a second process waits in `BLPOP`; the client sleeps 10 ms, then `LPUSH`es `time.time()`; "
        "the other side subtracts it from `time.time()` when BLPOP returns. Same redis-py + hiredis on both "
        "sides, measured in the same run.",
    ]
    return sec
