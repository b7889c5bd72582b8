"""Tracing's cost per cycle (start -> pause -> resume -> complete), off and on.

``python -m bench.tracing --url redis://127.0.0.1:PORT/0 [--n 300] [--rounds 3]``

Each mode runs in a process of its own, client and worker in it (parkway's worker in burst mode,
twice a cycle, in the client's thread, as the tests run jobs), one cycle after the other on a real
Redis (the database given is flushed), after ``WARMUP`` cycles; the rounds interleave the modes::

    absent       opentelemetry blocked (``sys.modules['opentelemetry'] = None``): no ``otel`` extra
    no-provider  opentelemetry-api importable, no tracer provider set
    no-export    the SDK's TracerProvider with no span processor: every span made, then dropped
    in-memory    the SDK's TracerProvider, SimpleSpanProcessor to an InMemorySpanExporter (cleared
                 every 100 cycles): every span made and exported

Per cycle: the wall time, this process's CPU (``time.process_time``) and redis-server's (INFO
cpu, which ticks in 10 ms: take a few hundred cycles), each a delta over the timed cycles divided
by their number. On a shared machine these move by more than tracing costs, so each mode also
times, alone, the calls tracing makes in a cycle (``tracing_calls``: the tracer's ``started``,
``current`` and ``waited`` once, the attempt observer three times), in microseconds of CPU; its
``absent`` figure is the harness's own (records and contexts built, the other features asked).
A traced cycle makes five spans: the start (the caller has no span), the attempt of ``ask`` that
pauses, the wait, the replay of ``ask`` and the attempt of ``finish``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from statistics import median
from typing import Any

MODES = ("absent", "no-provider", "no-export", "in-memory")
WARMUP = 30


def _setup(mode: str) -> Any:
    """Prepare this process for ``mode``; the exporter to clear (in-memory), else None."""
    if mode == "absent":
        sys.modules["opentelemetry"] = None  # type: ignore[assignment]
        return None
    if mode == "no-provider":
        return None
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider

    provider = TracerProvider()
    exporter = None
    if mode == "in-memory":
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

        exporter = InMemorySpanExporter()
        provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    return exporter


def tracing_calls(n: int) -> float:
    """Microseconds of CPU the calls tracing makes in one cycle take (see the module's docstring),
    measured over ``n`` cycles: what a cycle costs more than with no tracer at all."""
    from parkway.runtime import features
    from parkway.runtime.hooks import NodeContext
    from parkway.runtime.protocol import RunStatus
    from parkway.runtime.store import InterruptRecord, RunRecord

    tracer = features.tracer()
    extensions = features.extensions()
    wait = InterruptRecord("i1", "r1", "bench_cycle", "ask", 0, "i:approval", None, 1, 2, "h")
    began = time.process_time()
    for _ in range(n):
        trace = tracer.started("bench_cycle", "r1")
        run = RunRecord("r1", "bench_cycle", RunStatus.RUNNING, trace=trace)
        for node, step in (("ask", 0), ("ask", 0), ("finish", 1)):
            ctx = NodeContext(None, "r1", "bench_cycle", node, step, 1, {}, {}, time.time_ns)  # type: ignore[arg-type]
            observers = [o for e in extensions if (o := e.observe(None, run)) is not None]  # type: ignore[arg-type]
            for o in observers:
                o.before_attempt(ctx, {})
            if node == "ask" and wait.trace is None:
                wait = InterruptRecord("i1", "r1", "bench_cycle", "ask", 0, "i:approval", None, 1, 2, "h",
                                       trace=tracer.current())
            for o in reversed(observers):
                o.after_attempt(ctx, "completed")
        tracer.waited(wait, 3, "resumed", "ada")
    return 1e6 * (time.process_time() - began) / n


def measure(mode: str, url: str, n: int) -> dict[str, Any]:
    """``n`` cycles in this process under ``mode`` (run in a process of its own: see ``main``)."""
    exporter = _setup(mode)
    import redis
    from rq import Queue

    from parkway import Parkway, Settings
    from parkway.workers import jobs
    from parkway.workers.serializer import MsgpackSerializer
    from parkway.workers.worker import ParkwayWorker

    from .env import SECRET, redis_cpu
    from .flows import ANSWER, cycle

    settings = Settings(redis_url=url, secret=SECRET)
    connection = redis.Redis.from_url(url)
    connection.flushdb()
    rt = jobs.install(settings)
    queue = Queue(settings.queue, connection=connection, serializer=MsgpackSerializer)

    def run_jobs() -> None:
        ParkwayWorker([queue], connection=connection, runtime=rt).work(
            burst=True, logging_level="WARNING", with_maintenance=False
        )

    with Parkway(settings) as pw:
        def one(i: int) -> None:
            run_id = pw.start(cycle, {"i": i})
            run_jobs()
            token = pw.list_interrupts(run_id=run_id, include_tokens=True).items[0].resume_token
            assert token is not None
            assert pw.resume(token, selected=ANSWER).outcome.value == "accepted"
            run_jobs()
            if exporter is not None and i % 100 == 0:
                exporter.clear()

        for i in range(WARMUP):
            one(i)
        wall, cpu, rcpu = time.perf_counter(), time.process_time(), redis_cpu(connection)
        for i in range(n):
            one(WARMUP + i)
        wall, cpu, rcpu = time.perf_counter() - wall, time.process_time() - cpu, redis_cpu(connection) - rcpu
        status = pw.get_run(pw.list_runs(limit=1).items[0].run_id).status.value
    connection.close()
    otel = sys.modules.get("opentelemetry") is not None
    calls_us = tracing_calls(20 * n)
    if exporter is not None:
        exporter.clear()
    return {"mode": mode, "n": n, "wall_ms": 1000 * wall / n, "cpu_ms": 1000 * cpu / n,
            "redis_ms": 1000 * rcpu / n, "calls_us": calls_us, "otel_imported": otel, "last_status": status}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--url", required=True, help="a Redis database this may flush")
    parser.add_argument("--n", type=int, default=300, help="timed cycles per mode and round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--mode", choices=MODES, help=argparse.SUPPRESS)  # one mode, in a child process
    args = parser.parse_args()
    if args.mode:
        print(json.dumps(measure(args.mode, args.url, args.n)))
        return
    root = Path(__file__).resolve().parent.parent
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")])))
    results: dict[str, list[dict[str, Any]]] = {m: [] for m in MODES}
    for _ in range(args.rounds):
        for mode in MODES:
            out = subprocess.run(
                [sys.executable, "-W", "ignore", "-m", "bench.tracing", "--url", args.url, "--n", str(args.n),
                 "--mode", mode], capture_output=True, text=True, check=True, cwd=root, env=env,
            )
            results[mode].append(json.loads(out.stdout.splitlines()[-1]))
    names = ("wall_ms", "cpu_ms", "redis_ms", "calls_us")
    base = {k: median(r[k] for r in results["absent"]) for k in names}
    print(f"{args.rounds} rounds x {args.n} cycles per mode; medians per cycle, CPU difference to absent")
    print(f"{'mode':<12} {'wall ms':>8} {'client+worker CPU ms':>21} {'redis CPU ms':>13} {'CPU diff ms':>12}"
          f" {'tracing calls us':>17}")
    for mode in MODES:
        m = {k: median(r[k] for r in results[mode]) for k in names}
        diff = m["cpu_ms"] + m["redis_ms"] - base["cpu_ms"] - base["redis_ms"]
        print(f"{mode:<12} {m['wall_ms']:8.3f} {m['cpu_ms']:21.3f} {m['redis_ms']:13.3f} {diff:+12.3f}"
              f" {m['calls_us']:17.1f}")


if __name__ == "__main__":
    main()
