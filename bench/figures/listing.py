"""Figure 5, list_interrupts at scale: first and deep page at 1,000 to 1,000,000 pending.

The measured process is bench/listing.py (filled by bench/populate.py); this module runs it and
writes the figure's section. ``measure`` also returns the raw result, for figure 4's bulk rows.
"""

from __future__ import annotations

from typing import Any

from ..plan import EARLIER_TARGETS, Plan, task
from ..report import Section, Target, cell, fmt, log, med


def measure(plan: Plan, url: str) -> tuple[Section, dict[str, Any] | None]:
    log(
        f"listing: filling to {', '.join(f'{s:,}' for s in plan.listing_sizes)} pending interrupts "
        f"({plan.runs} runs x {plan.listing_queries} calls per page and size)"
    )
    r = task(
        "listing", {"url": url, "sizes": plan.listing_sizes, "queries": plan.listing_queries, "runs": plan.runs}, 3600
    )
    sec = Section(
        "listing",
        "5. list_interrupts at scale (newest first, page of 50)",
        [
            "pending",
            "first page p50 ms",
            "first page p99 ms",
            "deep page p50 ms",
            "deep page p99 ms",
            "Redis memory",
            "fill s",
        ],
    )
    if r:
        for size, p in r["sizes"].items():
            sec.rows.append(
                [
                    f"{int(size):,}",
                    cell([x["p50_ms"] for x in p["first"]], 2),
                    cell([x["p99_ms"] for x in p["first"]], 2),
                    cell([x["p50_ms"] for x in p["deep"]], 2),
                    cell([x["p99_ms"] for x in p["deep"]], 2),
                    f"{p['used_memory_mb']:,.0f} MiB",
                    fmt(p["fill_seconds"], 0),
                ]
            )
        by_size = {int(size): p for size, p in r["sizes"].items()}
        largest = max(by_size)
        if 1_000 in by_size and largest > 1_000:
            for page in ("first", "deep"):
                pairs = zip(by_size[1_000][page], by_size[largest][page], strict=True)
                ratios = [big["p99_ms"] / small["p99_ms"] for small, big in pairs]
                sec.notes.append(f"ratio {page} page p99 at {largest:,} ÷ at 1,000 (within a run): {cell(ratios, 2)}")
                if largest == 1_000_000:
                    sec.targets.append(
                        Target(
                            "listing",
                            f"list_interrupts p99 at 1,000,000 ≤ {EARLIER_TARGETS['listing']:.0f}× at 1,000 ({page} "
                            "page)",
                            fmt(med(ratios), 2) + "×",
                            med(ratios) <= EARLIER_TARGETS["listing"],
                            "a page's p99 must not grow with the number pending: a miss means a step of the page's "
                            "path reads in proportion to the index; figure 5's rows by size say at which size it "
                            "begins",
                            earlier=True,
                        )
                    )
    if 1_000_000 not in plan.listing_sizes:
        sec.notes.append(
            f"largest size capped at {max(plan.listing_sizes):,} (--max-listing); run without --quick for 1,000,000"
        )
    sec.extra += [
        f"p50/p99 of the wall time of one `Parkway.list_interrupts()` call seen by the client ({plan.listing_queries} "
        f"calls per page, size and run; {plan.runs} runs; one call at a time, nothing else running; the client "
        "froze its import-time objects with `gc.freeze()` first, else a 20–35 ms full collection of them lands "
        "in ~1 call in 200 at any size). *First page*: "
        "no cursor. *Deep page*: the cursor a page ending at rank N/2 of the `newest` index returns (member read "
        "with ZREVRANGE, cursor made by parkway's `codec.make_cursor` and sealed as the client seals its "
        "cursors; checked that the page starts at rank N/2+1).",
        "Fill: the benchmark's own redis-server, emptied, then filled in steps by `bench.populate.bulk_park` in two "
        "processes: one template run is parked through the real path (`Parkway.start` + the worker's job body) "
        "while every script call the store makes is recorded (create.lua, begin.lua, park.lua: names, keys, "
        "arguments); the calls are then replayed, pipelined, for each new run with the run id, request id and "
        "token hash (of the token minted for the new ids) substituted — same lengths, so msgpack blobs stay "
        "valid. So the keys, fields, index members and TTLs are park.lua's own (checked: a replayed run has the "
        "same keys, fields, stream entries and index entries as the template); all replayed runs share the "
        "template's timestamps and input.",
    ]
    return sec, r
