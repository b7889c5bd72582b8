"""Figure 4, Redis memory per parked run, parked three ways (plus figure 5's bulk fill).

The measured process is bench/weight.py; this module runs it and writes the figure's section.
``measure`` takes figure 5's result as well: its bulk fill gives this figure its largest rows.
"""

from __future__ import annotations

from typing import Any

from ..plan import TARGET_LABELS, TARGETS, Plan, task
from ..report import Section, Target, cell, fmt, log, med


def measure(plan: Plan, url: str, listing: dict[str, Any] | None) -> Section:
    rows: list[tuple[str, int, list[dict[str, Any]]]] = []
    for via, count, runs in (
        ("workers", plan.weight_workers, plan.count_runs),
        ("executor", plan.weight_executor, plan.count_runs),
        ("pipelined", plan.weight_pipelined, 1),
    ):
        if not count:
            continue
        got = []
        for run in range(runs):
            log(f"weight run {run + 1}/{runs}: {count:,} runs parked via {via}")
            r = task("weight", {"url": url, "via": via, "count": count}, 1800)
            if r:
                got.append(r)
        rows.append((via, count, got))
    sec = Section("weight", "4. Redis memory per parked run", ["parked through", "parked runs", "bytes per run"])
    labels = {
        "workers": "start + a real worker",
        "executor": "start + the job body in-process (executor)",
        "pipelined": "same, script calls pipelined",
    }
    worst: list[float] = []
    for via, count, got in rows:
        if got:
            values = [r["bytes_per_run"] for r in got]
            worst.append(med(values))
            sec.rows.append([labels[via], f"{count:,}", cell(values, 0)])
    if listing:
        for size, point in listing["sizes"].items():
            if int(size) >= 10_000:
                sec.rows.append(
                    [
                        "bulk replay of park's script calls (figure 5's fill)",
                        f"{int(size):,}",
                        fmt(point["bytes_per_pending"], 0),
                    ]
                )
                worst.append(point["bytes_per_pending"])
    worker = next((med([r["bytes_per_run"] for r in got]) for via, _, got in rows if via == "workers" and got), None)
    at_once = [
        f"{labels[via]} {fmt(med([r['bytes_per_run_at_once'] for r in got]), 0)} B"
        for via, _, got in rows
        if got and all("bytes_per_run_at_once" in r for r in got)
    ]
    if at_once:
        sec.notes.append(
            "read once the parked runs' streams are gone (park copies a parked run's few events into its hash and "
            "leaves the stream 1 s more for readers blocked on it; a real worker's reconciler then has Redis drop "
            "it, and in-process a SCAN does the same; the bulk rows are read without either, so some streams "
            "are still there); read at once, with the last second's streams: "
            + ", ".join(at_once)
        )
    sample = next((got[0] for _, _, got in rows if got), None)
    if sample:
        parts = ", ".join(f"`{k}` {v}" for k, v in sorted(sample["by_key"].items(), key=lambda kv: -kv[1]))
        sec.notes.append(f"request size {sample['request_bytes']} bytes (msgpack, as stored)")
        ev, probe = sample["by_key"].get("ev"), sample.get("one_entry_stream_bytes")
        if ev and probe:
            sec.notes.append(
                f"the run's event stream alone is {ev} bytes; a stream holding one tiny entry takes {probe} bytes "
                f"on this server (stream-node-max-bytes = {sample.get('stream_node_max_bytes')}: Redis allocates "
                "a stream's first node at that size)"
            )
        sec.extra.append(
            f"Bytes by key for one parked run (`MEMORY USAGE ... SAMPLES 0`; indexes: bytes ÷ members): {parts}."
        )
    if worker is not None or worst:
        # issue 22's row: a real worker, the parked runs' streams gone; the worst of every row beside it
        value = worker if worker is not None else max(worst)
        shown = fmt(value, 0) + " B" + (
            f" (a real worker; worst row {fmt(max(worst), 0)} B)" if worker is not None and max(worst) > value else ""
        )
        sec.targets.append(
            Target(
                "weight", TARGET_LABELS["weight"], shown, value <= TARGETS["weight"],
                "a parked run is now (stored format 4) its run hash (~730 B with its key: jemalloc's 640 B class "
                "for its listpack, since the park writes no paused field, times and folded ids relative to its "
                "creation, folded events without the head the hash makes again, a trimmed interrupt record), its "
                "summary key (~185 B), two workflow index members and one run index member (~49 B each: in "
                "buckets of at most 128, each a listpack; ~135-150 B each as one big sorted set), its pause feed "
                "entry (~80 B at 1,000 runs; the feed is capped at ~2,000 entries), plus the main and expires "
                "dicts' share (the bytes by key are below figure 4). Under 1 KiB needs the summary out of a key "
                "of its own while the run waits: packed with others' in shared hashes of at most 128 fields "
                "(~150-160 B saved; every script that writes a summary brings it back first, every reader looks "
                "there second, and the reconciler's pw:runs walk prunes it: bench/RESULTS.md's issue-36 section "
                "of 23:20 says why it was not made) and ~100 B more not found yet (the largest part left is the "
                "interrupt's record in the run hash, ~250 B of its listpack)",
            )
        )
    sec.extra += [
        "On the benchmark's own redis-server, emptied first: `used_memory` (INFO memory) after parking minus "
        "before, ÷ pending interrupts (ZCARD of the workflow's `newest` index). Runs are `bench.flows:cycle` with "
        "parkway-chosen run ids (`run_` + 26 base32 characters) and a 6-hour TTL, parked with a ~200-byte choice "
        "request.",
        "*start + a real worker*: `Parkway.start` and one `parkway worker` process; memory read while the worker is "
        "still registered (one-off costs such as Lua scripts loaded on first use are in the delta; they amortize "
        "with more runs). *executor*: `Parkway.start` with a dispatcher that notes the job instead of enqueuing "
        "it, then the worker's job body `executor.execute(store, options, run_id, 0, 0)` in-process (create.lua, "
        "begin.lua, the node up to `use_interrupt`, park.lua) — what a worker writes, minus RQ's job hash, which "
        "`result_ttl=0` deletes anyway. *pipelined*: the same code with `RedisStore.around_scripts` queueing the "
        "scripts on a pipeline (replies for the executor taken from a real template run), two processes. "
        "*bulk replay*: see figure 5.",
    ]
    return sec
