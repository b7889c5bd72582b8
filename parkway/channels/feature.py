"""The channels feature as the core meets it (``parkway.runtime.features``): a service each
``parkway worker`` runs beside its jobs, delivering the notifications the pause, escalate, expire and
resume scripts write. Listed at the top (``parkway/extensions.py``); the delivery code is imported
when a worker first asks for its service."""

from __future__ import annotations

from typing import Any

from ..runtime.features import Feature, Service


def _service(settings: Any, consumer: str) -> Service | None:
    from .service import service

    return service(settings, consumer)


CHANNELS = Feature("channels", service=_service)
