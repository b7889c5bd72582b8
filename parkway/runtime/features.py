"""The features' extension point: what a feature (sessions) adds to the core, and the list of them.

A :class:`Feature` is named, and gives the core up to four parts, each asked for by the core
without importing the feature::

    extension   its entry in the executor (``observers.Extension``): the observers of its runs
    client      ``pw.<name>`` on :class:`parkway.Parkway`: its operations, built over the client
    aclient     ``pw.<name>`` on :class:`parkway.AsyncParkway`: the same, awaited
    service     ``(settings, worker name) -> Service | None``: work a ``parkway worker`` runs beside its
                jobs (its own threads), started with the worker's reconciler and stopped with it
    tracer      the process's tracer (``runtime.tracing``): what the store asks when a run's
                trace crosses Redis (the first feature that gives one)

The list is assembled at the top (``parkway/extensions.py``) and handed here by the package's
root (``parkway/__init__.py``, which every import of a parkway module runs first) as a function
that imports it when first asked for: a process that never runs a node nor opens a feature
(``parkway --help``) loads none of them. Workers, the embedded worker and the client read it here
(``extensions()``, ``facet()``), so every process runs the same features.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from .errors import ConfigError
from .tracing import NO_TRACER, Tracer

if TYPE_CHECKING:
    from .observers import Extension


class Service(Protocol):
    """A feature's background work in a worker (its own threads; ``stop`` returns at once)."""

    def start(self) -> None: ...

    def stop(self) -> None: ...


@dataclass(frozen=True)
class Feature:
    """One feature's parts (see the module's docstring)."""

    name: str
    extension: Extension | None = None
    client: Callable[[Any], Any] | None = None
    aclient: Callable[[Any], Any] | None = None
    service: Callable[[Any, str], Service | None] | None = None
    tracer: Tracer | None = None


_assembly: Callable[[], tuple[Feature, ...]] | None = None
_features: tuple[Feature, ...] | None = None
_lock = threading.Lock()


def assemble(load: Callable[[], tuple[Feature, ...]]) -> None:
    """Make ``load()`` (called when the features are first asked for) the feature list."""
    global _assembly, _features
    with _lock:
        _assembly, _features = load, None


def features() -> tuple[Feature, ...]:
    """The features of this process, in the order their observers run (none before ``assemble``)."""
    global _features
    with _lock:
        if _features is None:
            _features = _assembly() if _assembly is not None else ()
        return _features


def extensions() -> tuple[Extension, ...]:
    """The features' entries in the executor (``executor.Options.extensions``)."""
    return tuple(f.extension for f in features() if f.extension is not None)


def worker_services(settings: Any, consumer: str) -> list[Service]:
    """The services a worker named ``consumer`` runs under ``settings`` (a feature's None: nothing to do)."""
    made = (f.service(settings, consumer) for f in features() if f.service is not None)
    return [service for service in made if service is not None]
_traced: tuple[tuple[Feature, ...], Tracer] = ((), NO_TRACER)


def tracer() -> Tracer:
    """This process's tracer (``runtime.tracing``): the first a feature gives, else the no-op one
    (looked up again only when the features were assembled anew)."""
    global _traced
    assembled, found = _traced
    current = features()
    if current is not assembled:
        found = next((f.tracer for f in current if f.tracer is not None), NO_TRACER)
        _traced = (current, found)
    return found


def facet(name: str, host: Any, *, awaited: bool = False) -> Any:
    """Feature ``name``'s operations on the client ``host`` (``awaited``: on the asyncio client)."""
    for feature in features():
        build = feature.aclient if awaited else feature.client
        if feature.name == name and build is not None:
            return build(host)
    raise ConfigError(f"no feature {name!r} in this process (parkway/extensions.py lists them)")
