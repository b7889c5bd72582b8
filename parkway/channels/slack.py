"""Slack: one Block Kit message per interrupt, answered from its buttons, updated in place when it ends.

A raised interrupt is posted (``chat.postMessage``) to the Slack channels its routes name: the
question, its context (workflow, audience, expiry), one button per option and the form link
(``/ui``). The message's ``ts`` is kept per interrupt and channel (``keys.slack_messages``), so
the escalation, answer, expiry and cancel notifications update that message (``chat.update``):
who answered or cancelled it, when. A click reaches ``parkway serve``'s interactivity endpoint
(``parkway.http.routes.slack``), which verifies Slack's signature and answers as the caller the
clicking Slack user is mapped to (``Settings.slack_users``); the buttons carry :func:`button_value`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from ..adapters.redis import keys
from ..config import Settings
from .base import Notice, Route

if TYPE_CHECKING:
    from slack_sdk import WebClient

TIMEOUT_S = 10
KEEP_PAST_EXPIRY_S = 86_400
"""how long a message's ts is kept past its interrupt's expiry (its expiry notice comes after it)"""
ENDED_FIRST = "-"
"""the ts field of a channel where the interrupt ended before its message was posted: not posted late"""
ACTION_PREFIX = "parkway.answer."
MAX_BUTTONS = 25  # one actions block holds 25 elements

_ENDED = {"answered": "Answered", "expired": "Expired", "cancelled": "Cancelled"}


def web_client(settings: Settings) -> WebClient:
    """The Web API client for ``settings`` (its token, its base URL: Slack's own unless set)."""
    from slack_sdk import WebClient  # the channels extra: imported only where Slack is used

    base = settings.slack_api_url.rstrip("/") + "/" if settings.slack_api_url else WebClient.BASE_URL
    return WebClient(token=settings.slack_token, timeout=TIMEOUT_S, base_url=base)


def button_value(run_id: str, request_id: str, option: str) -> str:
    """What a button carries back in its click: which interrupt, which option (no token)."""
    return json.dumps({"run": run_id, "request": request_id, "option": option}, separators=(",", ":"))


def when(ms: int | None) -> str:
    """An epoch-ms time as people read it, in UTC."""
    if not ms:
        return "-"
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


class SlackChannel:
    name = "slack"

    def __init__(self, routes: Sequence[Route], client: WebClient, redis: Any,
                 people: Mapping[str, str] | None = None) -> None:
        self.routes, self.client, self.redis = tuple(routes), client, redis
        self.people = dict(people or {})
        """a caller's name -> the Slack user mapped to it (who answered, shown as a mention)"""

    def targets(self, view: Mapping[str, Any], notice: Notice) -> Sequence[str]:
        return list(dict.fromkeys(r.target for r in self.routes if r.wants(view, notice)))

    def send(self, notice: Notice, view: Mapping[str, Any], target: str) -> None:
        key = keys.slack_messages(notice.run_id, notice.request_id)
        ended = notice.kind in _ENDED
        ts = self._kept(key, target)
        if ts is None and ended:
            if self._keep(key, target, ENDED_FIRST, notice.expires_at):
                return  # never posted here (its post still retrying): it will not be posted late
            ts = self._kept(key, target)  # posted meanwhile, by another worker
        if ts == ENDED_FIRST:
            return
        blocks, text = self.ended(notice, view) if ended else self.open(notice, view)
        if ts is not None:
            self.client.chat_update(channel=target, ts=ts, text=text, blocks=blocks)
            return
        posted = self.client.chat_postMessage(channel=target, text=text, blocks=blocks)
        if not self._keep(key, target, str(posted["ts"]), notice.expires_at):
            # something was kept meanwhile: its end, told by another worker that found no ts (this
            # message would ask forever), or another delivery's post (this one is a duplicate)
            self.client.chat_delete(channel=target, ts=str(posted["ts"]))

    def _kept(self, key: str, target: str) -> str | None:
        found = self.redis.hget(key, target)
        return found.decode() if isinstance(found, bytes) else found

    def _keep(self, key: str, target: str, ts: str, expires_at: int) -> bool:
        """Keep ``ts`` for ``target``, unless something is kept there already (False)."""
        left_s = max(expires_at // 1000 - int(datetime.now(tz=UTC).timestamp()), 0)
        pipe = self.redis.pipeline(transaction=True)
        pipe.hsetnx(key, target, ts)
        pipe.expire(key, left_s + KEEP_PAST_EXPIRY_S)
        return bool(pipe.execute()[0])

    def open(self, notice: Notice, view: Mapping[str, Any]) -> tuple[list[dict[str, Any]], str]:
        """An open interrupt's message: question, context, a button per option, the form link."""
        question = _question(notice, view)
        blocks = [_section(f"*{_escaped(question)}*"), _context(notice, view)]
        options = [o for o in (view.get("request") or {}).get("options") or [] if isinstance(o, Mapping)]
        for start in range(0, len(options), MAX_BUTTONS):
            blocks.append({"type": "actions", "elements": [
                {"type": "button", "action_id": f"{ACTION_PREFIX}{start + i}",
                 "text": {"type": "plain_text", "text": str(o.get("label") or o["id"])[:75]},
                 "value": button_value(notice.run_id, notice.request_id, str(o["id"]))}
                for i, o in enumerate(options[start:start + MAX_BUTTONS])]})
        form = (view.get("links") or {}).get("form")
        if form:
            blocks.append(_section(f"<{form}|Open the form>" if not options else f"Or <{form}|open the form>"))
        return blocks, f"Waiting for you: {question}"

    def ended(self, notice: Notice, view: Mapping[str, Any]) -> tuple[list[dict[str, Any]], str]:
        """An ended interrupt's message: what it asked, and how it ended, by whom, when."""
        question = _question(notice, view)
        life = view.get("lifecycle") or {}
        said = f"{_ENDED[notice.kind]} at {when(life.get('endedAt'))}"
        if notice.kind != "expired":
            said = f"{_ENDED[notice.kind]} by {self._who(life.get('responder'))} at {when(life.get('endedAt'))}"
        if notice.kind == "answered" and life.get("answer") is not None:
            said += f": `{_escaped(json.dumps(life['answer']))[:200]}`"
        if notice.kind == "cancelled" and life.get("reason"):
            said += f" ({_escaped(str(life['reason']))[:200]})"
        return [_section(f"~{_escaped(question)}~"), _context(notice, view), _section(said)], f"{said}: {question}"

    def _who(self, responder: Any) -> str:
        if not responder:
            return "someone"
        user = self.people.get(str(responder))
        return f"{_escaped(str(responder))} (<@{user}>)" if user else _escaped(str(responder))


def _question(notice: Notice, view: Mapping[str, Any]) -> str:
    return str((view.get("request") or {}).get("question") or notice.request_id)[:2000]


def _escaped(text: str) -> str:
    """Text as Slack's mrkdwn shows it literally (its three control characters escaped)."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _section(text: str) -> dict[str, Any]:
    return {"type": "section", "text": {"type": "mrkdwn", "text": text}}


def _context(notice: Notice, view: Mapping[str, Any]) -> dict[str, Any]:
    parts = [f"workflow *{_escaped(notice.workflow)}*"]
    if view.get("audience"):
        parts.append(f"for *{_escaped(str(view['audience']))}*")
    parts.append(f"expires {when(view.get('expiresAt') or notice.expires_at)}")
    return {"type": "context", "elements": [{"type": "mrkdwn", "text": " · ".join(parts)}]}


def slack_channel(settings: Settings, routes: Sequence[Route]) -> SlackChannel:
    """The Slack channel of a worker's ``settings`` (its Redis keeps the messages' ts)."""
    from ..adapters.redis.connection.connection import connect
    from ..runtime.errors import ConfigError

    if settings.redis_url is None:
        raise ConfigError("the Slack channel keeps its messages in Redis: set PARKWAY_REDIS_URL")
    people = {caller.name: user for user, caller in settings.slack_callers.items()}
    return SlackChannel(routes, web_client(settings), connect(settings.redis_url), people)
