"""Replica acknowledgement: a commit counts once enough replicas hold it.

Redis replicates asynchronously: a failover promotes a replica that may lack the primary's last
writes, and those are gone, though parkway already said ``accepted``. With ``ReplicaAcks``, every
transition's script is followed, on the same connection and in the same round trip, by
``WAIT <replicas> <ms>``: Redis answers once that many replicas acknowledged the script's writes
(and everything before them), or when the time is up with the count it got. A shortfall means the
outcome is unknown (the write may be on the primary only, and lost if it fails now): the
connection is dropped and the call raises ``StoreUnavailable`` saying so. A retry of the same
call is then safe wherever the transition is idempotent (a fence, a consumed token).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ReplicaAcks:
    """Each commit waits for ``replicas`` replicas to acknowledge it, at most ``timeout_ms``."""

    replicas: int
    timeout_ms: int

    def shortfall(self, acknowledged: int) -> str | None:
        """Why ``acknowledged`` replicas are not enough, or None when they are."""
        if acknowledged >= self.replicas:
            return None
        return (f"{acknowledged} of {self.replicas} replica(s) acknowledged the write within {self.timeout_ms} ms: "
                "its outcome is unknown (it may be lost if the primary fails now); retry to learn it")


class ReplicaShortfall(Exception):
    """Fewer replicas than asked acknowledged a commit in time (``translated`` makes it
    ``StoreUnavailable``). Not a redis-py error: no retry of redis-py's repeats the commit."""
