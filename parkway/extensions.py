"""The features that observe runs in the executor (``parkway.runtime.observers``), in the order
their hooks run: what every worker and every embedded deployment gives ``executor.Options``; and
the services a worker runs beside its jobs (each started with the worker's reconciler, stopped
with it)."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from .runtime.observers import Extension
from .sessions.branch import BranchRuns

if TYPE_CHECKING:
    from .config import Settings

EXTENSIONS: tuple[Extension, ...] = (BranchRuns(),)


class Service(Protocol):
    """A worker's background work of a feature's (its own threads; ``stop`` returns at once)."""

    def start(self) -> None: ...

    def stop(self) -> None: ...


WORKER_SERVICES: tuple[str, ...] = ("parkway.channels:service",)
"""the features' worker services, each a function ``(settings, worker name) -> Service | None`` (None:
nothing to do), named, not imported: a feature may use the client, which imports the workers"""


def worker_services(settings: Settings, consumer: str) -> list[Service]:
    """The services a worker named ``consumer`` runs under ``settings``."""
    out = []
    for name in WORKER_SERVICES:
        module, _, attribute = name.partition(":")
        make: Callable[[Settings, str], Service | None] = getattr(importlib.import_module(module), attribute)
        if (service := make(settings, consumer)) is not None:
            out.append(service)
    return out
