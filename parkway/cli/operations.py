"""Operating a deployment: ``parkway worker``, ``serve``, ``reconcile``, ``status``, ``failover``,
``check-deploy``; each command's arguments (``add_*``) beside its function (``cmd_*``)."""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import TYPE_CHECKING

from ..runtime.errors import ConfigError, ParkwayError
from .common import as_json, dump, now_ms, open_client, redis_url_of, settings_of, span, without_password
from .parsing import Subcommands, integer, subcommand
from .upgrade import describe

if TYPE_CHECKING:
    from ..config import Settings


def add_worker(sub: Subcommands) -> None:
    w = subcommand(
        sub,
        "worker",
        "run an RQ worker on parkway's queue: it runs the nodes of every run",
        cmd_worker,
        "Prints one line to stderr when it starts (queue, Redis, workflow modules, pid, workers), then works\n"
        "until stopped (Ctrl-C), or with --burst until the queue is empty. It also reconciles every second.\n"
        "exit status: 0 stopped or queue empty, 1 error (no Redis, Redis unreachable, another PARKWAY_SECRET,\n"
        "or RQ's loop quit on an error: restart it)",
        redis="the Redis to work for (required; default $PARKWAY_REDIS_URL)",
        imports=True,
    )
    w.add_argument("--burst", action="store_true", help="exit once the queue is empty (default: run until stopped)")
    w.add_argument("--workers", type=integer(1), default=1, metavar="N",
                   help="number of worker processes (default 1; more runs an RQ worker pool)")
    w.add_argument("--shard", type=integer(0), default=None, metavar="K",
                   help="with PARKWAY_SHARDS: the shard (0-based, in the variable's order) this worker serves")
    w.add_argument("--queue", default=None, metavar="NAME",
                   help="RQ queue name (default $PARKWAY_QUEUE or 'parkway'; clients must use the same)")


def cmd_worker(args: argparse.Namespace) -> int:
    from ..adapters.redis.connection.errors import translated
    from ..workers.worker import run_worker

    settings = settings_of(args, queue=args.queue)
    if settings.redis_url is None:
        raise ParkwayError("parkway worker needs a Redis: set PARKWAY_REDIS_URL or pass --redis-url")
    if settings.shards is not None and len(settings.shards) > 1:
        settings = _shard_of(settings, args.shard, redis_url_of(args))
    elif args.shard is not None:
        raise ConfigError("--shard needs PARKWAY_SHARDS (more than one shard)")
    print(_worker_line(settings, args.workers), file=sys.stderr, flush=True)
    with translated():
        return run_worker(settings, burst=args.burst, workers=args.workers)


def _shard_of(settings: Settings, shard: int | None, given: str | None) -> Settings:
    """A worker's settings for shard ``shard`` of ``settings.shards`` (it serves that shard alone),
    once the shard is checked to hold this process's bucket -> shard table; ``given``: the URL the
    command line named, which must then be that shard's."""
    from ..adapters.redis.connection.connection import connect
    from ..adapters.redis.connection.shard_table import check_table
    from ..adapters.redis.connection.shards import default_table

    assert settings.shards is not None
    if shard is None or not 0 <= shard < len(settings.shards):
        raise ConfigError(f"with PARKWAY_SHARDS a worker serves one shard: pass --shard K, K from 0 to "
                          f"{len(settings.shards) - 1} (one worker, or --workers N, per shard)")
    url = settings.shards[shard]
    if given is not None and given != url:
        raise ConfigError(f"--redis-url {given} is not shard {shard} ({url}): pass that shard's URL, "
                          "or leave --redis-url out (--shard K picks it from PARKWAY_SHARDS)")
    client = connect(url)
    try:
        check_table(client, shard, default_table(len(settings.shards)))
    finally:
        client.close()
    print(f"parkway worker: shard {shard} of {len(settings.shards)}", file=sys.stderr, flush=True)
    return settings.with_(redis_url=url, shards=None, shard=shard)


def _worker_line(settings: Settings, workers: int) -> str:
    assert settings.redis_url is not None
    modules = ", ".join(settings.workflows) if settings.workflows else "the application's own modules"
    return (
        f"parkway worker: queue {settings.queue!r} on {without_password(settings.redis_url)}, "
        f"workflows from {modules}, pid {os.getpid()}, {workers} worker{'s' if workers > 1 else ''}"
    )


def add_serve(sub: Subcommands) -> None:
    s = subcommand(
        sub,
        "serve",
        "serve the HTTP API, the live page and answer links (needs the http extra)",
        cmd_serve,
        "API keys come hashed from PARKWAY_API_KEYS (<sha256 of the key>=<system|machine|user>[:owner[:tenant]],\n"
        "comma-separated); `parkway serve --hash-key KEY` prints a key's hash. Without keys it refuses to\n"
        "start unless --no-auth. It needs --workflows (or PARKWAY_WORKFLOWS): callers start workflows of\n"
        "those modules only, and it imports no other module on a caller's request.\n"
        "Routes: /v1/runs, /v1/interrupts, /v1/resume, /ui, /a/<link>, /healthz, /metrics, /openapi.json.\n"
        "exit status: 0 stopped, 1 error (no Redis, no keys, no --workflows)",
        imports=True,
    )
    s.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    s.add_argument("--port", type=integer(1, 65535), default=8080, help="port to listen on (default 8080)")
    s.add_argument("--no-auth", action="store_true",
                   help="serve without API keys (only for a server that only this machine can reach)")
    s.add_argument("--hash-key", metavar="KEY", default=None,
                   help="print the hash of KEY for PARKWAY_API_KEYS, and exit")


def cmd_serve(args: argparse.Namespace) -> int:
    if args.hash_key is not None:
        from ..http.app import hash_key

        print(hash_key(args.hash_key))
        return 0
    try:
        import uvicorn

        from ..http.app import app_from_env
    except ImportError as exc:
        raise ParkwayError(f"parkway serve needs the http extra: pip install 'parkway[http]' ({exc})") from None
    url = redis_url_of(args)
    if url:
        os.environ["PARKWAY_REDIS_URL"] = url  # the app reads its settings as uvicorn's factory does
        os.environ.pop("PARKWAY_REDIS_SENTINELS", None)  # the command line's choice wins over these
        os.environ.pop("PARKWAY_REDIS_MASTER", None)
    if args.no_auth:
        os.environ["PARKWAY_API_NO_AUTH"] = "1"
    if args.workflows:
        os.environ["PARKWAY_WORKFLOWS"] = args.workflows
    app = app_from_env()
    app.state.surface.pw.announce_formats("server")  # the stored formats it reads (`parkway upgrade --check`)
    print(f"parkway serve: http://{args.host}:{args.port} (/openapi.json, live page at /ui)", file=sys.stderr)
    uvicorn.run(app, host=args.host, port=args.port, log_level="info" if args.verbose else "warning")
    return 0


def add_reconcile(sub: Subcommands) -> None:
    subcommand(
        sub,
        "reconcile",
        "run one reconciler pass (workers run it every second by themselves)",
        cmd_reconcile,
        "Re-enqueues runs whose job was lost, recovers attempts of dead workers, expires every interrupt past\n"
        "its TTL (batch after batch, beside the workers' reconcilers), keeps the records of the runs of an\n"
        "expiry backlog alive, drops what no run holds any more;\n"
        "prints the run ids it touched as JSON {recovered, failed, redispatched, expired, escalated}.\n"
        "With PARKWAY_SHARDS: one pass on every shard, in turn (the ids of all of them).\n"
        "exit status: 0, 1 error",
    )


def cmd_reconcile(args: argparse.Namespace) -> int:
    from dataclasses import asdict

    from ..workers.reconciler import reconcile_once

    with open_client(args) as pw:
        # with PARKWAY_SHARDS: one pass on each shard, with that shard's own store and queue
        stores = getattr(pw.store, "stores", None)
        dispatchers = getattr(pw.backend.dispatcher, "dispatchers", None)
        shards = list(zip(stores, dispatchers, strict=True)) if stores and dispatchers else [
            (pw.store, pw.backend.dispatcher)]
        total: dict[str, list[str]] = {}
        for store, dispatcher in shards:
            report = reconcile_once(store, dispatcher, max_lost=pw.settings.max_lost_attempts,
                                    grace_ms=pw.settings.limits.expiry_grace_ms)
            for name, run_ids in asdict(report).items():
                total.setdefault(name, []).extend(run_ids)
        print(as_json(total))
        return 0


def add_status(sub: Subcommands) -> None:
    c = subcommand(
        sub,
        "status",
        "show the deployment now: workers, what runs and waits to run, runs ended, pending interrupts",
        cmd_status,
        "Workers are those RQ has registered on parkway's queue. `rq info` shows them too, but not what they\n"
        "run: parkway's worker begins a job with one round trip and keeps none of RQ's per-job records\n"
        "(started, finished and failed registries, busy state), so `rq info` shows them idle with no jobs.\n"
        "Here, 'running now' counts the runs holding a lease (an activation executing), and a failed run is\n"
        "a run with status failed (`parkway show RUN`), not a job in RQ's failed registry.\n"
        "exit status: 0, 1 error",
    )
    c.add_argument("--json", action="store_true", help="print one JSON object (camelCase)")


def cmd_status(args: argparse.Namespace) -> int:
    with open_client(args) as pw:
        status = pw.status()
        formats = pw.formats()
    if args.json:
        print(as_json(dump(status)))
        return 0
    now = now_ms()
    print(f"queue {status.queue}: {status.queued} job(s) waiting; {status.outstanding} enqueued and not yet begun"
          + (f", the oldest for {span(status.oldest_outstanding_ms)}" if status.oldest_outstanding_ms else ""))
    print(f"running now: {status.running} activation(s)")
    print(f"workers registered with RQ: {len(status.workers)}")
    for w in status.workers:
        beat = f"heartbeat {span(now - w.heartbeat_at)} ago" if w.heartbeat_at else "no heartbeat yet"
        print(f"  {w.name}  {w.host or '?'} pid {w.pid or '?'}  {beat}")
    ended = ", ".join(f"{n} {s}" for s, n in status.runs_finished.items())
    print(f"runs ended: {ended}; attempts {status.attempts}, recovered from stopped workers {status.recovered}")
    pending = ", ".join(f"{wf} {n}" for wf, n in sorted(status.pending.items()) if n) or "none"
    print(f"pending interrupts: {pending}")
    if status.notices or status.notices_dead:
        print(f"notifications: {status.notices} to deliver, {status.notices_dead} dead letters"
              " (parkway.channels.dead_letters)")
    print(describe(formats)[0])
    return 0


def add_failover(sub: Subcommands) -> None:
    c = subcommand(
        sub,
        "failover",
        "switch the Sentinel master to a replica, losing no acknowledged write (a fenced switchover)",
        cmd_failover,
        "Pauses writes on the primary, waits until its online replicas have its replication offset, sends\n"
        "SENTINEL FAILOVER, waits until the sentinels name the new master, then on the old primary: REPLICAOF\n"
        "the new one, closes its clients' connections (they reconnect to the new master) and unpauses.\n"
        "Prints one line per step. Writes wait for the switch (1-3 s on loopback); reads go on. A bare\n"
        "SENTINEL FAILOVER instead leaves the old primary writable for seconds, and what is written there is lost.\n"
        "exit status: 0 switched, 1 stopped (writes unpaused, the master unchanged) or an error",
        redis="a redis+sentinel:// URL (default: $PARKWAY_REDIS_URL, or the sentinels' flags and variables)",
    )
    c.add_argument("--pause-ms", type=integer(1000), default=15_000, metavar="MS",
                   help="the longest writes stay paused on the old primary if this command dies (default 15000)")
    c.add_argument("--timeout", type=float, default=10.0, metavar="SECONDS",
                   help="how long to wait for the replicas' offset, and again for the new master (default 10)")


def cmd_failover(args: argparse.Namespace) -> int:
    from ..adapters.redis.connection.sentinel import is_sentinel_url, parse_sentinel_url
    from ..adapters.redis.connection.switchover import SwitchoverError, switchover
    from ..config import sentinel_url

    env = os.environ
    url = redis_url_of(args) or env.get("PARKWAY_REDIS_URL") or sentinel_url(
        env.get("PARKWAY_REDIS_SENTINELS"), env.get("PARKWAY_REDIS_MASTER"), env.get("PARKWAY_REDIS_PASSWORD"),
        env.get("PARKWAY_REDIS_SENTINEL_PASSWORD"))
    if not url or not is_sentinel_url(url):
        raise ConfigError("parkway failover needs Redis under Sentinel: --redis-sentinels with --redis-master, "
                          "or a redis+sentinel:// URL")
    started = time.monotonic()

    def say(line: str) -> None:
        print(f"[{time.monotonic() - started:6.2f}s] {line}", flush=True)

    try:
        done = switchover(parse_sentinel_url(url), pause_ms=args.pause_ms, timeout_s=args.timeout, say=say)
    except SwitchoverError as exc:
        say(f"failed: {exc}")
        return 1
    assert done.new is not None
    say(f"done: master is {done.new[0]}:{done.new[1]}")
    return 0


def add_check_deploy(sub: Subcommands) -> None:
    r = subcommand(
        sub,
        "check-deploy",
        "check a parked run against the code you have now, committing nothing",
        cmd_check_deploy,
        "Replays the run's current node against WORKFLOW: every hook must find what it recorded; the check\n"
        "stops at the first hook with nothing recorded (no step function runs, nothing is written). Prints\n"
        "{runId, node, step, outcome, recorded, detail} as JSON.\n"
        "exit status: 0 consistent, 3 nondeterministic (a resume would fail), 1 error (the node raised, or\n"
        "no such run)\n"
        "(parkway replay, its name before, still works: replay is the re-run a resume makes)",
        imports=True,
        aliases=("replay",),
    )
    r.add_argument("run_id", metavar="RUN", help="a waiting or queued run")
    r.add_argument("--against", required=True, metavar="MODULE:ATTRIBUTE",
                   help="the workflow as deployed now (e.g. myapp.flows:approval)")


def cmd_check_deploy(args: argparse.Namespace) -> int:
    with open_client(args) as pw:
        report = pw.check_deploy(args.run_id, args.against)
        print(as_json({"runId": report.run_id, "node": report.node, "step": report.step, "outcome": report.outcome,
                     "recorded": report.recorded, "detail": report.detail}))
        return {"consistent": 0, "nondeterministic": 3}.get(report.outcome, 1)
