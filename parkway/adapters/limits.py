"""Bounds a store enforces on what it keeps."""

from __future__ import annotations

from dataclasses import dataclass

DAY_MS = 24 * 3600 * 1000
DEFAULT_TTL_MS = 15 * 60 * 1000
"""how long a run's records and each of its pauses live unless a run or the settings say otherwise"""


@dataclass(frozen=True)
class Limits:
    max_payload_bytes: int = 1 << 20
    """run input, run data, state values and step results, msgpack-encoded"""
    max_answer_bytes: int = 64 << 10
    """one resume answer, msgpack-encoded"""
    max_events: int = 10_000
    """events kept per run stream (older ones are trimmed)"""
    expiry_grace_ms: int = 60_000
    """how long a waiting run's records outlive its interrupt, so its expiry can be recorded
    (``PARKWAY_EXPIRY_GRACE_MS``); a reconciler behind on its expiries keeps them longer, a whole
    grace at a time, until it records each (``parkway.workers.reconciler.watch_backlog``)"""
    retention_ms: int = 7 * DAY_MS
    """how long a run's summary outlives its TTL, so it reads `expired`, not unknown"""
