"""What a channel is: a name, which notifications it wants (its routes), a rate, and a send.

A channel is one object with ``send(notice, view)``: the delivery loop (:mod:`.delivery`) owns
reading, retrying, rate-limiting and dead-lettering, so a new channel (Slack) is one more module
with one class and one line in :func:`parkway.channels.configured`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from ..runtime.errors import ConfigError

SELECTORS = ("workflow", "audience", "tenant")


@dataclass(frozen=True)
class Notice:
    """One notification owed: an interrupt ``kind`` (raised, escalated, expired, cancelled, answered)."""

    entry_id: str
    """its entry in the notification stream"""
    event_id: str
    """its stable id (``webhook-id``): the same at every delivery"""
    kind: str
    run_id: str
    request_id: str
    workflow: str
    expires_at: int

    @property
    def written_ms(self) -> int:
        """When the transition wrote it (its stream entry's time): where its retry bound starts."""
        return int(self.entry_id.split("-")[0])


@dataclass(frozen=True)
class Route:
    """Whom a target is for: every notification (``selector`` None) or those of one workflow,
    audience or tenant."""

    target: str
    selector: str | None = None
    value: str = ""

    @classmethod
    def parse(cls, text: str, what: str) -> Route:
        """``target`` or ``<workflow|audience|tenant>:<name>=<target>``."""
        head, sep, target = text.partition("=")
        if not sep:
            return cls(text)
        selector, colon, value = head.partition(":")
        if not colon or selector not in SELECTORS or not value or not target:
            raise ConfigError(f"{what}: {text!r} is not <target> or <workflow|audience|tenant>:<name>=<target>")
        return cls(target, selector, value)

    def wants(self, view: Mapping[str, Any], notice: Notice) -> bool:
        if self.selector is None:
            return True
        if self.selector == "workflow":
            return notice.workflow == self.value
        return view.get(self.selector) == self.value


class Channel(Protocol):
    """A way to reach people. ``send`` raises on failure (the loop retries it); it must bound its
    own time (a timeout), since a channel's sends run one after the other on its own thread."""

    name: str

    def targets(self, view: Mapping[str, Any], notice: Notice) -> Sequence[str]:
        """Where this notification goes on this channel (none: not this channel's)."""
        ...

    def send(self, notice: Notice, view: Mapping[str, Any], target: str) -> None: ...


def routes(texts: Sequence[str], what: str) -> tuple[Route, ...]:
    return tuple(Route.parse(t, what) for t in texts)
