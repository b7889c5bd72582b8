"""Redis time per script call: what a cycle's Lua costs inside Redis, script by script.

``python -m bench.luacost '{"url": "redis://127.0.0.1:PORT/0", "cycles": 200}'``

Not a figure of ``python -m bench``: a probe for the next cut of Redis CPU per cycle. On the
benchmark's own redis-server (emptied first, as every figure's), it carries ``cycles`` runs of
``bench.flows:cycle`` through the real path minus RQ (``populate``: ``Parkway.start``, then the job
body in this process, ``resume``, the second job), one call at a time, and reads Redis's own
account of each script call: the ``usec`` of FCALL (EVALSHA before) in ``INFO commandstats`` read just before and
just after it (the commands a script runs are inside it). Prints one JSON line (``BENCH-RESULT``):
by script, calls per cycle, median and mean microseconds per call, its keys, arguments and their
bytes; and the sum per cycle.
"""

from __future__ import annotations

import json
import statistics
import sys
from collections import defaultdict
from typing import Any

import redis

from . import populate
from .env import emit_result, flush


def script_usec(r: redis.Redis) -> int:
    """Microseconds Redis spent in script calls: FCALL (parkway's scripts are functions), EVALSHA before."""
    stats = r.info("commandstats")
    return sum(int(stats.get(f"cmdstat_{c}", {}).get("usec", 0)) for c in ("fcall", "evalsha"))


def run(params: dict[str, Any]) -> dict[str, Any]:
    from parkway.adapters.redis.store.store import RedisStore
    from parkway.runtime import executor

    url, cycles = params["url"], int(params.get("cycles", 200))
    r = redis.Redis.from_url(url)
    flush(r)
    pw = populate.client(url)
    populate._noting(pw)
    notes = pw.backend.dispatcher
    store = pw.store
    assert isinstance(store, RedisStore)
    spent: dict[str, list[int]] = defaultdict(list)
    first: dict[str, Any] = {}

    def around(call: Any, send: Any) -> Any:
        first.setdefault(call.name, call)
        before = script_usec(r)
        try:
            return send()
        finally:
            spent[call.name].append(script_usec(r) - before)

    def jobs() -> None:
        for job in notes.jobs:
            executor.execute(store, pw.backend.options, *job)
        notes.jobs.clear()

    with store.around_scripts(around):
        for i in range(cycles):
            run_id = pw.start(populate.WORKFLOW, {"i": i})
            jobs()
            item = pw.list_interrupts(run_id=run_id, include_tokens=True).items[0]
            options = item.asked().options or []
            pw.resume(item.resume_token or "", selected=options[0].id if options else None)
            jobs()
    pw.close()

    by_script: dict[str, Any] = {}
    for name, usecs in sorted(spent.items()):
        call = first[name]
        by_script[name] = {
            "calls_per_cycle": round(len(usecs) / cycles, 2),
            "usec_median": statistics.median(usecs),
            "usec_mean": round(statistics.fmean(usecs), 1),
            "keys": len(call.keys),
            "args": len(call.args),
            "arg_bytes": sum(len(a) if isinstance(a, bytes) else len(str(a)) for a in call.args),
        }
    per_cycle = sum(v["usec_mean"] * v["calls_per_cycle"] for v in by_script.values())
    return {"cycles": cycles, "script_usec_per_cycle": round(per_cycle, 1), "by_script": by_script}


def main(argv: list[str]) -> int:
    emit_result(run(json.loads(argv[1]) if len(argv) > 1 else {}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
