"""parkway's one clock: wall time in epoch milliseconds (what runs, journals and leases record)."""

from __future__ import annotations

import time


def now_ms() -> int:
    return int(time.time() * 1000)
