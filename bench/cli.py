"""``python -m bench``: run the figures, print a table, write bench/RESULTS.md."""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import redis

from . import figures
from .env import ROOT, RedisServer, machine
from .figures import FIGURES
from .plan import Plan
from .report import Section, git_revision, loadavg, log, print_summary, source_digest, text_table, write_results

DEFAULT_PG = "postgresql://postgres@127.0.0.1:5432/test"


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    p.add_argument("--quick", action="store_true", help="fewer cycles and smaller sizes (about 5 minutes)")
    p.add_argument(
        "--only",
        action="append",
        default=[],
        metavar="NAME",
        help=f"run only these figures (repeat or comma-separate): {', '.join(FIGURES)}",
    )
    p.add_argument("--runs", type=int, default=None, help="runs per figure (default 3)")
    p.add_argument("--cycles", type=int, default=None, help="cycles per run for figures 1 and 6 (default 1000)")
    p.add_argument("--resumes", type=int, default=None, help="resumes per run for figure 2 (default 1000)")
    p.add_argument("--window", type=int, default=16, help="runs kept started and not yet resumed (default 16)")
    p.add_argument(
        "--mode",
        choices=("poll", "block"),
        default="poll",
        help="how the cycle client finds paused runs: poll list_interrupts (default) or block on "
        "each run's event stream",
    )
    p.add_argument(
        "--max-listing",
        type=int,
        default=None,
        help="largest pending-interrupt count for figure 5 (default 1,000,000; 100,000 with --quick)",
    )
    p.add_argument(
        "--pg-url",
        default=os.environ.get("BENCH_PG_URL", DEFAULT_PG),
        help=f"PostgreSQL for DBOS (default $BENCH_PG_URL or {DEFAULT_PG})",
    )
    p.add_argument(
        "--out",
        default=str(Path(__file__).resolve().parent / "RESULTS.md"),
        help="where to write the results (default bench/RESULTS.md)",
    )
    return p.parse_args(argv)


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def main(argv: Sequence[str] | None = None) -> int:
    # stop cleanly (tasks, workers, our redis-server) on Ctrl-C or SIGTERM, even when started in the background
    signal.signal(signal.SIGINT, _interrupt)
    signal.signal(signal.SIGTERM, _interrupt)
    args = parse(argv)
    only = [n.strip() for item in args.only for n in item.split(",") if n.strip()]
    unknown = [n for n in only if n not in FIGURES]
    if unknown:
        print(f"bench: unknown figure(s) {', '.join(unknown)}; choose from {', '.join(FIGURES)}", file=sys.stderr)
        return 2
    chosen = only or list(FIGURES)
    plan = Plan.from_args(args)
    if plan.runs < 1:
        print("bench: --runs must be at least 1", file=sys.stderr)
        return 2
    command = "python -m bench" + (
        ""
        if argv is None and len(sys.argv) <= 1
        else " " + " ".join(shlex.quote(a) for a in (sys.argv[1:] if argv is None else argv))
    )
    started = time.time()
    plan.tmp = tempfile.mkdtemp(prefix="pwbench-")
    server = RedisServer().start()
    log(
        f"own redis-server on port {server.port}; figures: {', '.join(chosen)}; runs: {plan.runs}"
        + (" (quick)" if plan.quick else "")
    )
    sections: list[Section] = []
    try:
        client = redis.Redis.from_url(server.url)
        facts = machine(client)
        digest = source_digest()
        facts["parkway source"] = f"{ROOT} (git {git_revision()}, sources {digest})"
        facts["load average at start"] = loadavg()
        listing: dict[str, Any] | None = None
        builders: dict[str, Callable[[], Section]] = {
            "cycles": lambda: figures.cycles.measure(plan, server.url),
            "latency": lambda: figures.latency.measure(plan, server.url),
            "rediscost": lambda: figures.rediscost.measure(plan, server.url),
            "workers": lambda: figures.workers.measure(plan, server.url),
            "profile": lambda: figures.profile.measure(plan, server.url),
            "startup": lambda: figures.startup.measure(plan, server.url),
            "sessions": lambda: figures.sessions.measure(plan, server.url),
        }
        # the listing fill gives figure 4 its bulk rows, so it runs first of the two
        order = [f for f in FIGURES if f in chosen]
        if "weight" in order and "listing" in order:
            order.remove("listing")
            order.insert(order.index("weight"), "listing")
        done: dict[str, Section] = {}
        changed: list[str] = []
        for name in order:
            t0 = time.time()
            if source_digest() != digest:
                changed.append(name)
            if name == "listing":
                done[name], listing = figures.listing.measure(plan, server.url)
            elif name == "weight":
                done[name] = figures.weight.measure(plan, server.url, listing)
            else:
                done[name] = builders[name]()
            log(f"{name} done in {time.time() - t0:.0f} s")
            print("\n" + done[name].title + "\n" + text_table(done[name].headers, done[name].rows), flush=True)
            for n in done[name].notes:
                print("  " + n)
            print()
        sections = [done[f] for f in FIGURES if f in done]
        for name in changed:
            done[name].notes.insert(
                0, "WARNING: parkway's sources changed on disk after this run started; this figure ran on newer ones"
            )
    finally:
        server.stop()
        shutil.rmtree(plan.tmp, ignore_errors=True)
    print_summary(sections)
    facts["load average at end"] = loadavg()
    end_digest = source_digest()
    if end_digest != facts["parkway source"].rsplit("sources ", 1)[1].rstrip(")"):
        facts["parkway source at end"] = f"git {git_revision()}, sources {end_digest} (CHANGED during the run)"
    out = Path(args.out)
    write_results(out, sections, facts, command, started, plan)
    print(f"\nwrote {out} ({(time.time() - started) / 60:.1f} minutes)")
    return 0
