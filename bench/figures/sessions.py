"""Figure 9, a session's turn as the conversation grows: ``send()`` time and Redis time, round trips,
memory per turn beyond the message text, at 1, 100 and 1,000 messages.

The measured process is bench/sessions.py (its docstring says what each column counts)."""

from __future__ import annotations

from typing import Any

from ..plan import TARGET_LABELS, TARGETS, Plan, task
from ..report import Section, Target, cell, fmt, med

LEVELS = (1, 100, 1000)
SEND_RATIO = TARGETS["send_ratio"]
"""issue 22: send() at message 1,000 at most 1.5x its time at message 1"""
BEYOND_TEXT = TARGETS["beyond_text"]
"""issue 22: a turn's memory beyond its messages' text, bytes"""


def measure(plan: Plan, url: str) -> Section:
    samples = 8 if plan.quick else 25
    sec = Section(
        "sessions",
        "9. a session's turn as the conversation grows",
        ["messages", "send() p50 ms", "÷ at 1", "Redis µs per send", "round trips per send",
         "parkway's round trips to the model call", "bytes per turn beyond text (window)",
         "same, averaged over the session"],
    )
    results: list[dict[str, Any]] = []
    for _ in range(plan.runs):
        r = task("sessions", {"url": url, "levels": list(LEVELS), "samples": samples}, 1800)
        if r:
            results.append(r)
    if not results:
        return sec
    for i, n in enumerate(LEVELS):
        rows = [r["rows"][i] for r in results]

        def col(key: str, digits: int = 1, rows: list[dict[str, Any]] = rows) -> str:
            return cell([float(row[key]) for row in rows if key in row], digits)

        sec.rows.append([f"{n:,}", col("send_ms", 2), col("send_ratio", 2), col("send_redis_us", 0),
                         col("send_trips", 0), col("trips_to_model_parkway", 0), col("beyond_text", 0),
                         col("avg_beyond_text", 0)])
    last = [r["rows"][-1] for r in results]
    ratio = med([row["send_ratio"] for row in last])
    redis_ratio = med([row["redis_ratio"] for row in last if "redis_ratio" in row])
    sec.targets.append(Target(
        "send_ratio", TARGET_LABELS["send_ratio"], f"{ratio:.2f}×", ratio <= SEND_RATIO,
        f"send()'s Redis time grows {fmt(redis_ratio, 2)}× from message 1 to {LEVELS[-1]:,} (the Redis µs column) "
        "with the same round trips: something a send reads or walks still grows with the conversation, in Redis "
        "or in the client; issue 22's way in: the active path and whether its leaf is parked kept up to date by "
        "the scripts that change them, so a send reads only what it appends to",
    ))
    beyond = med([row.get("avg_beyond_text", row.get("beyond_text", float("nan"))) for row in last])
    sec.targets.append(Target(
        "beyond_text", TARGET_LABELS["beyond_text"], f"{beyond:,.0f} B", beyond <= BEYOND_TEXT,
        f"{fmt(beyond - BEYOND_TEXT, 0)} B less per turn, kept for as long as the session lives (message events "
        "already name their message, an ended reply run keeps only its summary, folded into the session's hash "
        "of ended runs, the active path is a list, and a session's records keep its runs' ids past the "
        "session's). Per turn at 300 turns: the message records ~490 B (200 of it the text), their events "
        "~305 B, the `up` hash ~205 B, the folded summary ~96 B, the path ~38 B. Ways in: `up` in "
        "listpack-sized buckets, or each message's parent carried in its record (~150 B)",
    ))
    sec.extra.append(
        f"One session per level grown to that many messages (a turn: the user's message and the agent's "
        f"reply, 100 bytes of text each), parkway's worker running each turn's job in the measuring process, "
        f"then {samples} more turns measured; level 1 is a fresh session's first message. Redis µs are "
        "Redis's own time in send()'s commands (INFO commandstats); memory is MEMORY USAGE of the session's "
        "keys and its branch runs' (one hash tag). Medians over runs, (min–max)."
    )
    return sec
