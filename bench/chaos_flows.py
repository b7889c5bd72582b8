"""The workflow bench/chaos.py runs: two nodes, two interrupts, two counted side effects.

Workers import it as ``bench.chaos_flows:chaos``. Each ``use_step`` effect INCRs a counter
key of its own per run in the Redis at ``CHAOS_COUNTER_URL`` (a server the chaos never
kills), so the driver can tell how many times ``fn`` really ran. ``CHAOS_CPU_MS`` sets the
CPU burnt around each effect (default 10 ms), so that worker kills land inside nodes:
before the step, inside ``fn`` after its INCR (the case that runs ``fn`` again on replay),
and between the step's record and the interrupt.
"""

from __future__ import annotations

import hashlib
import os
import time
from typing import Any

import redis

from parkway import Workflow, idempotency_key, use_interrupt, use_step

WORKFLOW = "chaos"
COUNTER_PREFIX = "chaos:fx:"
CHOICES = ("ship", "hold")

_counter: redis.Redis | None = None


def counter() -> redis.Redis:
    global _counter
    if _counter is None:
        _counter = redis.Redis.from_url(os.environ["CHAOS_COUNTER_URL"])
    return _counter


def counter_key(run_id: str, effect: str) -> str:
    return f"{COUNTER_PREFIX}{run_id}:{effect}"


def burn(ms: float | None = None) -> int:
    """Spin the CPU for about ``ms`` milliseconds (hashing, so it is real work)."""
    ms = float(os.environ.get("CHAOS_CPU_MS", "10")) if ms is None else ms
    end, h, rounds = time.perf_counter() + ms / 1000, b"chaos", 0
    while time.perf_counter() < end:
        for _ in range(200):
            h = hashlib.sha256(h).digest()
        rounds += 1
    return rounds


def effect(run_id: str, name: str) -> dict[str, Any]:
    """The outside write: count the execution first, then work (a kill here re-runs it on replay)."""
    n = int(counter().incr(counter_key(run_id, name)))
    burn()
    return {"effect": name, "execution": n}


chaos = Workflow(WORKFLOW)


@chaos.node(start=True)
def gather(data: dict[str, Any]) -> dict[str, Any]:
    burn()
    run_id = idempotency_key("effect-1").split(":", 1)[0]
    first = use_step("effect-1", effect, run_id, "effect-1")
    burn()
    text = use_interrupt({"kind": "text", "question": f"Note for {data.get('n')}?"}, id="first")
    return {"text": text, "effect1": first["execution"]}


@chaos.node
def decide(data: dict[str, Any]) -> dict[str, Any]:
    burn()
    run_id = idempotency_key("effect-2").split(":", 1)[0]
    second = use_step("effect-2", effect, run_id, "effect-2")
    burn()
    choice = use_interrupt(
        {
            "kind": "choice",
            "question": "Ship it?",
            "options": [{"id": CHOICES[0], "label": "Ship"}, {"id": CHOICES[1], "label": "Hold"}],
        },
        id="second",
    )
    return {"text": data["text"], "choice": choice, "effect2": second["execution"]}


chaos.edge("gather", "decide")
