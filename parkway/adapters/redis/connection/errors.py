"""redis-py's errors, as parkway's: the one place that reads them (STYLE "Translate at the boundary")."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager

import redis.exceptions as rex

from ....runtime.errors import FormatTooNew, RunGone, StaleFence, StoreError, StoreUnavailable, ValidationError
from .replicas import ReplicaShortfall


@contextmanager
def translated(run_id: str | None = None) -> Iterator[None]:
    """Turn redis-py errors into parkway errors."""
    try:
        yield
    except (rex.ConnectionError, rex.TimeoutError) as exc:
        raise StoreUnavailable(f"Redis is unreachable: {exc}", run_id=run_id) from exc
    except ReplicaShortfall as exc:
        raise StoreUnavailable(f"Redis replicas did not confirm a commit: {exc}", run_id=run_id) from exc
    except rex.ResponseError as exc:
        text = str(exc)
        if "STALE" in text:
            reason = text.split("STALE", 1)[1].strip()
            if reason.startswith("GONE "):  # _common.lua's gone(): no run under that id
                raise RunGone(f"run {run_id}: {reason[5:]}", run_id=run_id) from exc
            raise StaleFence(f"run {run_id}: {reason}", run_id=run_id) from exc
        if "FORMAT " in text:  # _common.lua's format_refused: `FORMAT run <id> <found> <reads>`
            record, found, reads = re.search(r"FORMAT (\S+ \S+) (\d+) (\d+)", text).groups()  # type: ignore[union-attr]
            raise FormatTooNew(
                f"{record} is in stored format {found}, and this version of parkway reads formats up to {reads}: "
                "a later version wrote it (upgrade this process; the record is left as it is)",
                record=record, found=int(found), reads=int(reads), run_id=run_id,
            ) from exc
        if "EXISTS" in text:
            raise ValidationError(f"run {run_id} already exists", run_id=run_id) from exc
        raise StoreError(f"Redis refused a command: {text}", run_id=run_id) from exc
    except rex.RedisError as exc:
        raise StoreError(f"Redis error: {exc}", run_id=run_id) from exc
