"""Replica acknowledgement: a commit counts once enough replicas hold it.

Redis replicates asynchronously: a failover promotes a replica that may lack the primary's last
writes, and those are gone, though parkway already said ``accepted``. With ``ReplicaAcks``, every
transition's script is followed, on the same connection and in the same round trip, by
``WAIT <replicas> <ms>``: Redis answers once that many replicas acknowledged the script's writes
(and everything before them), or when the time is up with the count it got. A shortfall means the
outcome is unknown (the write may be on the primary only, and lost if it fails now): the
connection is dropped and the call raises ``StoreUnavailable`` saying so.

So is an acknowledgement that comes too late (``LATE_MARGIN_MS`` past the WAIT's timeout): a
primary frozen (or cut off) while the command was on its way may have been replaced by a replica
meanwhile, and, thawed, still run the command, acknowledged by a second replica that Sentinel has
not yet moved to the new primary; that write is discarded when the old primary is demoted. A
freeze long enough for a failover is longer than ``down-after-milliseconds``, so an answer that
came sooner than that was not given by a replaced primary, unless it came on a connection idle
through the freeze and used just as it thawed: under Sentinel such a connection asks the sentinels
again before it sends (``sentinel.MasterConnection``, ``IDLE_RECHECK_S``). A retry of the same
call is then safe wherever the transition is idempotent (a fence, a consumed token).
"""

from __future__ import annotations

from dataclasses import dataclass

LATE_MARGIN_MS = 1000
"""an acknowledged commit answered more than this after its WAIT's timeout is not trusted; keep
Sentinel's ``down-after-milliseconds`` above it (docs/guides/sentinel.md asks for 1,000 to 5,000)"""


@dataclass(frozen=True)
class ReplicaAcks:
    """Each commit waits for ``replicas`` replicas to acknowledge it, at most ``timeout_ms``."""

    replicas: int
    timeout_ms: int

    def shortfall(self, acknowledged: int, took_ms: float = 0.0) -> str | None:
        """Why ``acknowledged`` replicas, answered ``took_ms`` after the command was sent, are not
        enough, or None when they are. An answer later than ``timeout_ms`` + ``LATE_MARGIN_MS`` is
        not trusted: the primary may have been frozen meanwhile, and replaced, while a replica not
        yet moved to the new primary acknowledged it (see the module's docstring)."""
        if acknowledged < self.replicas:
            return (f"{acknowledged} of {self.replicas} replica(s) acknowledged the write within {self.timeout_ms} "
                    "ms: its outcome is unknown (it may be lost if the primary fails now); retry to learn it")
        if took_ms > self.timeout_ms + LATE_MARGIN_MS:
            return (f"the write was acknowledged {took_ms:.0f} ms after it was sent, too late to trust (the "
                    "primary may have been replaced meanwhile): its outcome is unknown; retry to learn it")
        return None


class ReplicaShortfall(Exception):
    """Fewer replicas than asked acknowledged a commit in time (``translated`` makes it
    ``StoreUnavailable``). Not a redis-py error: no retry of redis-py's repeats the commit."""
