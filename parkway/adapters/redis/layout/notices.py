"""The notifications stream (``keys.notices``): its entries' fields and ids."""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Mapping
from typing import Any

from ....runtime.errors import CorruptRecord

# --- notifications (keys.notices; written by the ``notice`` function of _common.lua) ------------

NOTICE_FIELDS = ("k", "r", "q", "w", "x")
"""a notification's fields: kind (raised | escalated | expired | cancelled | answered), run id, request
id, workflow, the interrupt's expiry (ms) when it was written"""
NOTICE_GROUP = "deliver"
"""the consumer group of the workers that deliver notifications"""


def notice_fields(fields: Mapping[Any, Any]) -> dict[str, str]:
    """A notification's fields as text (an entry of ``keys.notices`` as redis-py reads it)."""
    out = {(k.decode() if isinstance(k, bytes) else str(k)): (v.decode() if isinstance(v, bytes) else str(v))
           for k, v in fields.items()}
    missing = [name for name in NOTICE_FIELDS if name not in out]
    if missing:
        raise CorruptRecord(f"notification without {', '.join(missing)}")
    return out


def notice_id(request_id: str, kind: str, expires: str) -> str:
    """A notification's stable id (a webhook's ``webhook-id``): the same for every delivery of one
    event, whichever worker makes it; another for each escalation (a new expiry)."""
    digest = hashlib.sha256(f"{request_id}\0{kind}\0{expires}".encode()).digest()
    return "msg_" + base64.b32encode(digest[:15]).decode().lower()
