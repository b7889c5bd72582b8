"""Webhooks as the Standard Webhooks specification says: a JSON POST with ``webhook-id`` (the
notification's stable id: receivers drop duplicates by it), ``webhook-timestamp`` and
``webhook-signature`` (HMAC-SHA256 under the ``whsec_`` secret), signed with the
``standardwebhooks`` library. The body: ``type`` (``interrupt.raised``, ...), ``timestamp`` and
``data``, the interrupt as ``GET /v1/interrupts/{id}`` shows it plus its ``links``."""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from .base import Notice, Route

TIMEOUT_S = 5.0


class WebhookChannel:
    name = "webhook"

    def __init__(self, routes: Sequence[Route], secret: str, timeout_s: float = TIMEOUT_S) -> None:
        from standardwebhooks import Webhook

        self.routes, self.timeout_s = tuple(routes), timeout_s
        self.signer = Webhook(secret)

    def targets(self, view: Mapping[str, Any], notice: Notice) -> Sequence[str]:
        return list(dict.fromkeys(r.target for r in self.routes if r.wants(view, notice)))

    def send(self, notice: Notice, view: Mapping[str, Any], target: str) -> None:
        now = datetime.now(tz=UTC)
        body = json.dumps({"type": f"interrupt.{notice.kind}", "timestamp": now.isoformat(), "data": view},
                          separators=(",", ":"))
        headers = {
            "content-type": "application/json",
            "webhook-id": notice.event_id,
            "webhook-timestamp": str(int(now.timestamp())),
            "webhook-signature": self.signer.sign(notice.event_id, now, body),
        }
        request = urllib.request.Request(target, data=body.encode(), headers=headers, method="POST")
        with urllib.request.urlopen(request, timeout=self.timeout_s) as response:  # noqa: S310 - the operator's URL
            response.read(1024)  # a 2xx is delivered; urlopen raises on the others
