"""The channels' delivery as a worker runs it, and what the package exports (``parkway.channels``
re-exports these names, importing this module at first use)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import structlog

from ..adapters.redis import keys
from ..config import Settings
from ..runtime.errors import ConfigError, InterruptNotFound, ValidationError
from .base import Channel, Notice, Route, routes
from .delivery import DeadLetter, Delivery, Policy, dead_count, dead_letters

if TYPE_CHECKING:
    from ..client.sync import Parkway

__all__ = ["Channel", "DeadLetter", "Delivery", "Notice", "Route", "configured", "dead_count", "dead_letters",
           "service", "viewer"]

log = structlog.get_logger("parkway.channels")


def configured(settings: Settings) -> list[Channel]:
    """The channels ``settings`` name (none: notifications are off)."""
    out: list[Channel] = []
    hooks = ([settings.webhook_url] if settings.webhook_url else []) + list(settings.webhook_routes)
    if hooks:
        if not settings.webhook_secret:
            raise ConfigError("webhooks need PARKWAY_WEBHOOK_SECRET (whsec_...) to sign with")
        from .webhook import WebhookChannel

        out.append(WebhookChannel(routes(hooks, "PARKWAY_WEBHOOK_ROUTES"), settings.webhook_secret))
    if settings.smtp_host and settings.smtp_to:
        from .email import EmailChannel

        out.append(EmailChannel(routes(settings.smtp_to, "PARKWAY_SMTP_TO"), settings.smtp_host,
                                settings.smtp_port, settings.smtp_from))
    if settings.slack_channels:
        from .slack import slack_channel

        out.append(slack_channel(settings, routes(settings.slack_channels, "PARKWAY_SLACK_CHANNELS")))
    return out


def viewer(pw: Parkway, public_url: str | None) -> Callable[[Notice], Mapping[str, Any]]:
    """What a notification shows: the interrupt as ``GET /v1/interrupts/{id}`` does (without its
    token), plus ``links``: one signed answer link per option and the form (while it is open and
    ``public_url`` is set)."""
    from ..runtime import links

    def view(notice: Notice) -> Mapping[str, Any]:
        try:
            found = pw.get_interrupt(notice.request_id, run_id=notice.run_id)
        except (InterruptNotFound, ValidationError):  # its records are gone: what the notification says
            return {"requestId": notice.request_id, "runId": notice.run_id, "workflow": notice.workflow,
                    "links": {}}
        data = found.model_dump(mode="json", by_alias=True)
        data.pop("resumeToken", None)
        out: dict[str, Any] = {}
        if public_url and notice.kind in ("raised", "escalated"):
            base, secret = public_url.rstrip("/"), pw.backend.options.secret
            out["form"] = f"{base}/ui"
            out["answer"] = {
                o.id: f"{base}/a/" + links.mint(secret, links.AnswerLink(notice.run_id, notice.request_id, o.id,
                                                                         notice.expires_at))
                for o in found.asked().options
            }
        return data | {"links": out}

    return view


class _Service:
    """A worker's delivery, with the client it reads interrupts through."""

    def __init__(self, settings: Settings, channels: list[Channel], consumer: str) -> None:
        from ..adapters.redis.connection.connection import connect
        from ..client.sync import Parkway

        assert settings.redis_url is not None
        self.pw = Parkway(settings)
        policy = Policy(settings.notify_retry_s, settings.notify_backoff_s, settings.notify_rate,
                        settings.notify_claim_s)
        self.delivery = Delivery(connect(settings.redis_url), channels, viewer(self.pw, settings.public_url),
                                 consumer, policy)

    def start(self) -> None:
        self.delivery.start()

    def stop(self) -> None:
        self.delivery.stop()


def service(settings: Settings, consumer: str) -> _Service | None:
    """The worker service that delivers notifications, or None when ``settings`` name no channel
    (or the deployment is embedded: nothing outlives the process to deliver from)."""
    if settings.redis_url is None:
        return None
    channels = configured(settings)
    if not channels:
        return None
    log.info("notifications_on", channels=[c.name for c in channels], consumer=consumer)
    return _Service(settings, channels, consumer)


def notifications_owed(redis: Any) -> bool:
    """Whether the pause scripts write notifications on this Redis."""
    return bool(redis.exists(keys.notify_on()))
