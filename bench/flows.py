"""The workflows the benchmarks run; workers import them as ``bench.flows:NAME``.

``cycle``: node ``ask`` pauses once on a choice request (``use_interrupt``), node
``finish`` returns. One cycle = start, park, resume, replay of ``ask``, ``finish``.

``timed``: the same, except that the first line of ``ask`` appends ``time.time()`` to
the Redis list ``bench:lat:<i>`` (once on the first attempt, once on the replay after
the resume): the resume-latency benchmark reads the second entry.
"""

from __future__ import annotations

import os
import time
from typing import Any

import msgpack
import redis

from parkway import Workflow, use_interrupt

# A choice request of about 200 bytes as parkway stores it (msgpack of the request model).
REQUEST: dict[str, Any] = {
    "kind": "choice",
    "question": "Publish the Q3 finance report draft now? It was generated from the ledger export "
    "and needs one approval.",
    "options": [
        {"id": "approve", "label": "Approve"},
        {"id": "reject", "label": "Reject"},
    ],
}
ANSWER = "approve"


def request_bytes() -> int:
    """Size of REQUEST as parkway encodes it into the interrupt record."""
    from parkway import InterruptRequest

    model = InterruptRequest.model_validate(REQUEST)
    return len(msgpack.packb(model.model_dump(by_alias=True, exclude_none=True), use_bin_type=True))


_marker: redis.Redis | None = None


def _mark(i: Any) -> None:
    global _marker
    if _marker is None:
        _marker = redis.Redis.from_url(os.environ["PARKWAY_REDIS_URL"])
    _marker.rpush(f"bench:lat:{i}", repr(time.time()))


def _two_nodes(name: str, *, timed: bool) -> Workflow:
    """Node ``ask`` pauses once on REQUEST (``timed``: after stamping its first line), ``finish`` returns."""
    flow = Workflow(name)

    @flow.node(start=True)
    def ask(data: dict[str, Any]) -> dict[str, Any]:
        if timed:
            _mark(data["i"])  # the node's first line: a timestamp on every attempt
        decision = use_interrupt(REQUEST, id="approval")
        return {"decision": decision}

    @flow.node
    def finish(data: dict[str, Any]) -> dict[str, Any]:
        return {"done": True}

    return flow.edge("ask", "finish")


cycle = _two_nodes("bench_cycle", timed=False)
timed = _two_nodes("bench_timed", timed=True)
