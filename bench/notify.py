"""Notifications: what one worker delivers, and what a pause pays for them.

``python -m bench.notify --redis-url redis://127.0.0.1:6379/0 [--n 500] [--rounds 3]`` (a Redis of its own: the
database is flushed) prints three figures:

* ``pause_ms`` and ``pause_redis_us`` with no channel configured and with one: the same N pauses of
  ``bench.flows:cycle`` (start, then a burst worker in this process runs each to its pause), timed
  whole (wall ms per pause: start, dequeue, begin, node, park) and on Redis's side (the FCALLs'
  microseconds per pause, from ``INFO commandstats``). With no channel the park script checks one key
  (``pw:notify``); with one it also appends the notification. A warm-up round, then ``--rounds`` of
  each, alternated; medians.
* ``delivered_per_s``: the N notifications those pauses wrote, delivered by one worker's delivery
  (``parkway.channels.Delivery``, the class ``parkway worker`` runs, with its webhook channel) to a
  local receiver (a threading HTTP server answering 204), from the first read to the last
  acknowledgement; rate limit lifted.
"""

from __future__ import annotations

import argparse
import json
import statistics
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import redis

from parkway import Parkway, Settings
from parkway.adapters.redis import keys
from parkway.logs import configure as configure_logs

from .flows import cycle

SECRET = "bench-notify-secret-0123456789abcdef"
WHSEC = "whsec_" + "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"


def _fcall_usec(client: redis.Redis) -> tuple[int, int]:
    stats = client.info("commandstats").get("cmdstat_fcall", {})
    return int(stats.get("usec", 0)), int(stats.get("calls", 0))


def _pauses(pw: Parkway, client: redis.Redis, settings: Settings, n: int) -> dict[str, float]:
    from rq import Queue

    from parkway.workers import jobs
    from parkway.workers.serializer import MsgpackSerializer
    from parkway.workers.worker import ParkwayWorker

    for i in range(n):
        pw.start(cycle, {"i": i})
    rt = jobs.install(settings)
    queue = Queue(settings.queue, connection=client, serializer=MsgpackSerializer)
    client.config_resetstat()
    t0 = time.perf_counter()
    ParkwayWorker([queue], connection=client, runtime=rt).work(burst=True, logging_level="WARNING",
                                                             with_maintenance=False)
    wall = time.perf_counter() - t0
    usec, _ = _fcall_usec(client)
    waiting = pw.status().pending.get("bench_cycle", 0)
    assert waiting == n, f"{waiting} of {n} runs paused"
    return {"pause_ms": round(wall * 1000 / n, 3), "pause_redis_us": round(usec / n, 1)}


class _Sink(BaseHTTPRequestHandler):
    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        self.rfile.read(int(self.headers["content-length"]))
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


def _deliver(pw: Parkway, url: str, client: redis.Redis, n: int) -> float:
    from parkway.adapters.redis.connection.connection import connect
    from parkway.channels import Delivery, viewer
    from parkway.channels.base import Route
    from parkway.channels.delivery import Policy
    from parkway.channels.webhook import WebhookChannel

    server = ThreadingHTTPServer(("127.0.0.1", 0), _Sink)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    hook = f"http://127.0.0.1:{server.server_address[1]}/hook"
    assert client.xlen(keys.notices()) == n
    delivery = Delivery(connect(url), [WebhookChannel([Route(hook)], WHSEC)], viewer(pw, "https://pw.example"),
                        "bench", Policy(rate=1e9))
    t0 = time.perf_counter()
    delivery.start()
    while client.xlen(keys.notices()):
        time.sleep(0.005)
    took = time.perf_counter() - t0
    delivery.stop()
    delivery.thread.join(5)
    server.shutdown()
    server.server_close()
    return n / took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--redis-url", required=True)
    parser.add_argument("--n", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--baseline", action="store_true",
                        help="pauses only, no channel: for a parkway from before notifications (this file copied "
                        "into its bench/, run there)")
    args = parser.parse_args()
    configure_logs("WARNING")
    client = redis.Redis.from_url(args.redis_url)
    settings = Settings(redis_url=args.redis_url, secret=SECRET, workflows=("bench.flows",))
    out: dict[str, Any] = {"n": args.n, "rounds": args.rounds}
    runs: dict[str, list[dict[str, float]]] = {"no_channel": [], "one_channel": []}
    delivered: list[float] = []
    # a warm-up round, then the two ends alternated: the machine's drift falls on both alike
    ends = (("no_channel", False),) if args.baseline else (("no_channel", False), ("one_channel", True))
    if args.baseline:
        del runs["one_channel"]
    for label, on in [("warmup", False)] + [(x, y) for _ in range(args.rounds) for x, y in ends]:
        client.flushdb()
        if on:
            client.set(keys.notify_on(), 1)  # (never with --baseline: a parkway without it)
        with Parkway(settings) as pw:
            got = _pauses(pw, client, settings, args.n)
            if label != "warmup":
                runs[label].append(got)
            if on:
                delivered.append(_deliver(pw, args.redis_url, client, args.n))
    client.flushdb()
    for label, each in runs.items():
        out[label] = {k: round(statistics.median(r[k] for r in each), 3) for k in each[0]}
    if not args.baseline:
        added = out["one_channel"]["pause_redis_us"] - out["no_channel"]["pause_redis_us"]
        out["added_per_pause_redis_us"] = round(added, 1)
        out["delivered_per_s"] = round(statistics.median(delivered), 1)
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
