"""Figure 3: Redis commands and round trips per cycle, parkway's own and RQ's.

``python -m bench.rediscost '{"system": "parkway"|"floor", "url": ..., "n": 300, "sample": 50}'``

Same cycles and client mode as figure 1 (one worker, windowed polling; parkway's client lists
with ``wait_ms``, so a listing that finds nothing waits for the next pause). Three views:

* commands, all: ``CONFIG RESETSTAT`` before the timed cycles, ``INFO commandstats``
  after; Redis 7 counts the commands a Lua script runs as well as the FCALL itself (EVALSHA before
  parkway's scripts were Redis functions). Also the
  microseconds Redis spent running scripts (``usec`` of FCALL or EVALSHA, which includes the commands a
  script runs): a CPU figure that leaves out the event loop and the network.
* commands by owner: ``MONITOR`` over a smaller sample of cycles. Every line names its
  keys: ``"pw:`` -> parkway, ``"rq:`` -> RQ, no key (MULTI/EXEC, PING, SCRIPT, CLIENT...) ->
  other; lines from ``[.. lua]`` are commands run inside a script, the rest were sent by
  a client. By script too (``monitor_by_script_per_cycle``): the commands each of parkway's
  scripts runs, by command (a script's lines follow its FCALL, whose function is named
  ``pw_<script>_<digest>``, or its EVALSHA, whose SHA1 names it).
* round trips by owner: the worker runs under ``bench.counted`` and the client installs
  the same counter: one round trip per redis-py ``send_packed_command`` (a command or a
  whole pipeline), attributed by the keys it names.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import sys
import tempfile
import threading
import time
from collections import Counter
from typing import Any

import redis

from . import counted
from .cycles import drive, finish, make
from .env import Workers, emit_result, flush

LUA = re.compile(rb"^\S+ \[\d+ lua\] ")
MARK = "bench-monitor-end"


def commandstats(r: redis.Redis, what: str = "calls") -> dict[str, int]:
    return {k.removeprefix("cmdstat_"): int(v[what]) for k, v in r.info("commandstats").items()}


class MonitorSample:
    """Every command Redis runs while the sample is open, read on a thread."""

    def __init__(self, url: str) -> None:
        self.conn = redis.Redis.from_url(url).connection_pool.get_connection()
        self.lines: list[bytes] = []
        self.conn.send_command("MONITOR")
        self.conn.read_response()
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        while True:
            line = self.conn.read_response()
            if isinstance(line, bytes | bytearray):
                if MARK.encode() in line:
                    return
                self.lines.append(bytes(line))

    def close(self, r: redis.Redis) -> None:
        r.echo(MARK)
        self.thread.join(30)
        self.conn.disconnect()

    def classify(self) -> dict[str, int]:
        out: Counter[str] = Counter()
        for line in self.lines:
            where = "in_script" if LUA.match(line) else "sent"
            who = "parkway" if b'"pw:' in line else "rq" if b'"rq:' in line else "other"
            if b'"ECHO"' in line:
                continue
            out[f"{who}_{where}"] += 1
        return dict(out)

    def by_script(self) -> dict[str, dict[str, int]]:
        """The commands run inside each script, by the script's name (parkway's, known by its SHA1)
        and by command: a script's commands follow its FCALL or EVALSHA line (a script runs alone)."""
        names = script_names()
        out: dict[str, Counter[str]] = {}
        current: Counter[str] | None = None
        for line in self.lines:
            words = re.findall(rb'"((?:[^"\\]|\\.)*)"', line)
            if not words:
                continue
            command = words[0].decode().lower()
            if LUA.match(line):
                if current is not None:
                    current[command] += 1
                continue
            current = None
            if command in ("evalsha", "fcall") and len(words) > 1:
                called = words[1].decode()
                function = re.fullmatch(r"pw_(\w+)_[0-9a-f]{16}", called)
                name = function.group(1) if command == "fcall" and function else names.get(called, "other")
                current = out.setdefault(name, Counter())
                current["(calls)"] += 1
        return {name: dict(c.most_common()) for name, c in sorted(out.items())}


def script_names() -> dict[str, str]:
    """SHA1 -> name of each of parkway's scripts, as a store with or without RQ's hand-off sent it
    whole (EVALSHA, before they were Redis functions, whose names say their script)."""
    import hashlib

    from parkway.adapters.redis.scripts import scripts
    from parkway.adapters.redis.store.store import _SCRIPTS, NO_HAND_OFF
    from parkway.workers.rq_internals.job_format import hand_off_lua

    out: dict[str, str] = {}
    for hand_off in (NO_HAND_OFF, hand_off_lua()):
        for name in _SCRIPTS:
            out[hashlib.sha1(scripts.source(name, hand_off).encode()).hexdigest()] = name
    return out


def worker_counts(pool: Workers, path: str) -> dict[str, int]:
    before = os.path.getmtime(path) if os.path.exists(path) else 0.0
    pool.procs[0].send_signal(signal.SIGUSR2)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if os.path.exists(path) and os.path.getmtime(path) != before:
            time.sleep(0.05)
            with open(path) as f:
                return dict(json.load(f))
        time.sleep(0.02)
    raise RuntimeError("the counted worker did not write its counts")


def diff(after: dict[str, int], before: dict[str, int], n: int) -> dict[str, float]:
    keys = set(after) | set(before)
    return {k: (after.get(k, 0) - before.get(k, 0)) / n for k in sorted(keys) if after.get(k, 0) != before.get(k, 0)}


def measure(params: dict[str, Any]) -> dict[str, Any]:
    url, n, sample = params["url"], int(params["n"]), int(params.get("sample", 50))
    window = int(params.get("window", 16))
    r = redis.Redis.from_url(url)
    flush(r)
    counted.install()  # this process: the client
    system = make(params["system"], url)
    tmp = tempfile.mkdtemp(prefix="pwbench-counts-")
    path = os.path.join(tmp, "worker.json")
    argv = system.worker_argv(url)
    pool = Workers([argv[0], "-m", "bench.counted", path, *argv[2:]], 1, system.worker_env(url)).start(r)
    try:
        drive(system, 30, window)
        finish(system, 0, 30, 30)
        system.empty_polls = 0
        w0, c0 = worker_counts(pool, path), counted.snapshot()
        r.config_resetstat()
        drive(system, n, window, first=30)
        finish(system, 30, n, 4 * window)
        stats, usec = commandstats(r), commandstats(r, "usec")
        w1, c1 = worker_counts(pool, path), counted.snapshot()
        polls = system.empty_polls
        time.sleep(0.3)
        mon = MonitorSample(url)
        drive(system, sample, window, first=30 + n)
        finish(system, 30 + n, sample, 4 * window)
        time.sleep(0.2)
        mon.close(r)
    finally:
        pool.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    total = sum(stats.values()) - stats.get("config|resetstat", 0) - stats.get("info", 0)
    return {
        "system": system.name,
        "cycles": n,
        "commands_per_cycle": total / n,
        "commandstats_per_cycle": {
            k: v / n for k, v in sorted(stats.items(), key=lambda kv: -kv[1]) if k not in ("config|resetstat", "info")
        },
        "script_usec_per_cycle": (usec.get("fcall", 0) + usec.get("evalsha", 0) + usec.get("eval", 0)) / n,
        "monitor_cycles": sample,
        "monitor_per_cycle": {k: v / sample for k, v in mon.classify().items()},
        "monitor_by_script_per_cycle": {
            name: {k: v / sample for k, v in c.items()} for name, c in mon.by_script().items()
        },
        "worker_round_trips_per_cycle": diff(w1, w0, n),
        "client_round_trips_per_cycle": diff(c1, c0, n),
        "client_empty_polls_per_cycle": polls / n,
    }


if __name__ == "__main__":
    emit_result(measure(json.loads(sys.argv[1])))
