"""Notifications: tell people a run waits for them, by webhook, e-mail and Slack (invariant 14).

The pause, escalation, expiry and answer scripts write a notification to ``keys.notices`` in their
own atomic step, while the deployment has channels (``keys.notify_on``, set by a worker that has
some: one EXISTS is what a pause pays otherwise). Every ``parkway worker`` delivers them out of
band of its jobs (:mod:`.delivery`); the channels are :mod:`.webhook`, :mod:`.email` and
:mod:`.slack`, each one class that says where a notification goes (its routes, from Settings) and sends it.

    from parkway.channels import dead_letters
    for letter in dead_letters(redis_client): ...
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["Channel", "DeadLetter", "Delivery", "Notice", "Route", "configured", "dead_count", "dead_letters",
           "service", "viewer"]


def __getattr__(name: str) -> Any:
    """The package's names, from ``service.py`` at first use: the feature's entry (``feature.py``) is
    imported with the feature list by every process, and costs none of this until a worker delivers."""
    if name in __all__:
        return getattr(importlib.import_module(f"{__name__}.service"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
