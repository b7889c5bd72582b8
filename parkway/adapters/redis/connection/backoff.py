"""The backoff between a failed call's attempts, for the sync and asyncio clients alike."""

from __future__ import annotations

import random

from redis.backoff import EqualJitterBackoff


class Jitter(EqualJitterBackoff):
    """redis-py's equal-jitter backoff (half the exponential step, plus up to as much again), its
    jitter drawn from a generator of its own: redis-py's draws from the ``random`` module, so a
    retry on one of parkway's threads moved the application's random state under it."""

    _draws = random.Random()

    def compute(self, failures: int) -> float:
        half = min(self._cap, self._base * 2**failures) / 2
        return half + self._draws.uniform(0, half)
