"""Sessions figure: what a turn costs as a conversation grows.

``python -m bench.sessions [--url redis://...] [--levels 1,100,1000] [--samples 15]``; figure 9 of
``python -m bench`` (bench/figures/sessions.py) runs it with the harness's own Redis.

One session per level grown to that many messages (a turn: the user's message and the agent's
reply, each ``TEXT`` bytes), parkway's worker running each turn's job in this process. At each
level, for ``samples`` more turns:

* ``send_ms``: ``Sessions.send()`` wall time (median; the agent's run is not in it);
* ``send_redis_us``: Redis's own time in the commands ``send()`` ran (``INFO commandstats``'s
  ``usec`` over them: give the bench a Redis of its own);
* ``send_trips``: redis-py round trips ``send()`` made (``bench.counted``: one per command or
  pipeline sent);
* ``trips_to_model``: round trips from ``send()`` to the agent's model call (the dequeue, the run's
  start, its hooks' checks), parkway's own (``pw:`` keys) and all;
* ``bytes_per_turn``: the growth of the session's keys and its branch runs' (they share the
  session's hash tag; ``MEMORY USAGE ... SAMPLES 0``) per turn over the samples, and the same less
  the turn's text (``beyond_text``): a window that crosses a hash table's doubling (Redis grows
  a hash's bucket array at powers of two: 1,024 messages) carries that step;
* ``avg_bytes_per_turn``: all of it at the level's end divided by its turns (the doubling
  amortized), and ``avg_beyond_text`` the same less the text.

Level 1 is the first message of a fresh session (one session per sample).
"""

from __future__ import annotations

import argparse
import importlib
import json
import statistics
import sys
import time
from collections.abc import Mapping, Sequence
from typing import Any

import redis
from rq import Queue

from parkway import Parkway, Settings, Workflow
from parkway.adapters.redis import keys
from parkway.agents import add_message, use_model
from parkway.workers import jobs
from parkway.workers.serializer import MsgpackSerializer
from parkway.workers.worker import ParkwayWorker

from . import counted
from .env import SECRET, RedisServer, emit_result

TEXT = 100
"""bytes of each message's text (the user's and the agent's)"""


class EchoModel:
    """Answers every turn with ``TEXT`` bytes; notes the round trips made up to its call."""

    def __init__(self) -> None:
        self.at_call: dict[str, int] | None = None

    def complete(self, messages: Sequence[Mapping[str, Any]], tools: Any) -> Mapping[str, Any]:
        self.at_call = counted.snapshot()
        return {"answer": ("re: " + str(messages[-1]["content"]))[:TEXT].ljust(TEXT, ".")}


MODEL = EchoModel()
agent = Workflow("bench-session-echo")


@agent.node(start=True)
def reply(data: dict[str, Any]) -> None:
    turn = use_model(MODEL, data["messages"], id="turn")
    add_message(turn["answer"], id="reply")


class Bench:
    def __init__(self, url: str) -> None:
        self.client = redis.Redis.from_url(url)
        self.client.flushdb()
        self.settings = Settings(redis_url=url, secret=SECRET)
        self.pw = Parkway(self.settings)
        self.sessions = self.pw.sessions
        self.rt = jobs.install(self.settings)
        self.queue = Queue(self.settings.queue, connection=self.client, serializer=MsgpackSerializer)
        # the worker imports the agent by its reference: this module by its name, not ``__main__``
        self.model: EchoModel = importlib.import_module("bench.sessions").MODEL

    def run_jobs(self) -> None:
        worker = ParkwayWorker([self.queue], connection=self.client, runtime=self.rt)
        worker.work(burst=True, logging_level="WARNING", with_maintenance=False)

    def open(self) -> str:
        return self.sessions.open("bench.sessions:agent", owner="ada", tenant="acme")

    def redis_usec(self) -> int:
        return sum(int(v["usec"]) for v in self.client.info("commandstats").values())

    def turn(self, sid: str, i: int) -> tuple[float, int, dict[str, int], int]:
        """One turn: (send's seconds, its round trips, round trips from send to the model call by
        owner, Redis's microseconds in send's commands)."""
        text = f"message {i} ".ljust(TEXT, "x")
        usec = self.redis_usec()
        before = counted.snapshot()
        self.model.at_call = None
        t0 = time.perf_counter()
        self.sessions.send(sid, text)
        took = time.perf_counter() - t0
        sent = counted.snapshot()
        in_redis = self.redis_usec() - usec
        self.run_jobs()
        at: dict[str, int] = self.model.at_call or {}
        to_model = {k: at.get(k, 0) - before.get(k, 0) for k in set(at) | set(before)}
        to_model["other"] = to_model.get("other", 0) - 1  # the bench's own INFO after send
        return took, sum(sent.values()) - sum(before.values()), to_model, in_redis

    def memory(self, sid: str) -> int:
        total = 0
        for key in self.client.scan_iter(match=f"{keys.PREFIX}:{{{sid}}}*", count=1000):
            total += int(self.client.memory_usage(key, samples=0) or 0)
        return total

    def level(self, n: int, samples: int) -> dict[str, Any]:
        times: list[float] = []
        usecs: list[int] = []
        trips: list[int] = []
        to_model: list[dict[str, int]] = []
        mem_growth: list[float] = []
        if n <= 1:
            for _ in range(samples):
                sid = self.open()
                t, rt, tm, us = self.turn(sid, 0)
                times.append(t)
                usecs.append(us)
                trips.append(rt)
                to_model.append(tm)
        else:
            sid = self.open()
            i = 0
            while 2 * i + 1 < n:  # grow to n - 1 messages: the next send is message n
                self.turn(sid, i)
                i += 1
            start = self.memory(sid)
            for k in range(samples):
                t, rt, tm, us = self.turn(sid, i + k)
                times.append(t)
                usecs.append(us)
                trips.append(rt)
                to_model.append(tm)
            end = self.memory(sid)
            mem_growth.append((end - start) / samples)
            average = end / (i + samples)
        out: dict[str, Any] = {
            "messages": n,
            "send_ms": round(1000 * statistics.median(times), 3),
            "send_ms_p90": round(1000 * sorted(times)[int(0.9 * (len(times) - 1))], 3),
            "send_redis_us": statistics.median(usecs),
            "send_trips": statistics.median(trips),
            "trips_to_model_parkway": statistics.median(t.get("parkway", 0) for t in to_model),
            "trips_to_model_all": statistics.median(sum(t.values()) for t in to_model),
        }
        if mem_growth:
            out["bytes_per_turn"] = round(mem_growth[0])
            out["beyond_text"] = round(mem_growth[0] - 2 * TEXT)
            out["avg_bytes_per_turn"] = round(average)
            out["avg_beyond_text"] = round(average - 2 * TEXT)
        return out


def levels(url: str, counts: Sequence[int], samples: int) -> list[dict[str, Any]]:
    """One row per level (messages in the session), with each level's send time and Redis time as
    ratios of the first level's."""
    bench = Bench(url)
    try:
        rows = [bench.level(n, samples) for n in counts]
    finally:
        bench.pw.close()
    for row in rows:
        row["send_ratio"] = round(row["send_ms"] / rows[0]["send_ms"], 2)
        row["redis_ratio"] = round(row["send_redis_us"] / rows[0]["send_redis_us"], 2)
    return rows


def measure(params: dict[str, Any]) -> dict[str, Any]:
    """The measured process of ``python -m bench``'s sessions figure (bench/figures/sessions.py)."""
    counted.install()
    return {"rows": levels(params["url"], [int(n) for n in params["levels"]], int(params["samples"]))}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.sessions")
    parser.add_argument("--url", help="a Redis of this bench's own (flushed); default: a private redis-server")
    parser.add_argument("--levels", default="1,100,1000")
    parser.add_argument("--samples", type=int, default=15)
    args = parser.parse_args(argv)
    counted.install()
    server = None
    url = args.url
    if url is None:
        server = RedisServer().start()
        url = server.url
    try:
        rows = levels(url, [int(n) for n in args.levels.split(",")], args.samples)
    finally:
        if server is not None:
            server.stop()
    for row in rows:
        print(json.dumps(row))


if __name__ == "__main__":
    if len(sys.argv) == 2 and sys.argv[1].startswith("{"):  # run by python -m bench (bench.plan.task)
        emit_result(measure(json.loads(sys.argv[1])))
    else:
        main()
