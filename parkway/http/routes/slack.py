"""``/slack/interactions``: Slack's interactivity endpoint, where a click on a message's button answers.

Slack POSTs ``application/x-www-form-urlencoded`` with a ``payload`` field (JSON), signed with the
app's signing secret (``X-Slack-Signature``: ``v0=`` HMAC-SHA256 of ``v0:{timestamp}:{body}``,
``X-Slack-Request-Timestamp``); ``slack-sdk``'s ``SignatureVerifier`` checks both, and the
timestamp's freshness (5 minutes): 401 otherwise, and nothing is read. No API key: the signature
is the door, and the caller is the one the clicking Slack user is mapped to
(``PARKWAY_SLACK_USERS``); an unmapped user is refused and told so. The answer then goes through
the same authority check and resume as ``POST /v1/interrupts/{id}/answer``. The person is told
what did not happen (an ephemeral message); the message itself is updated by the workers when the
answer's notification is delivered (``parkway.channels.slack``). Off (404) without
``PARKWAY_SLACK_SIGNING_SECRET``.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import parse_qs

import anyio
import structlog
from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from ...channels.slack import ACTION_PREFIX, web_client, when
from ...client.sync import Parkway
from ...problems import problem, responses
from ...runtime import tokens
from ...runtime.authority import Caller
from ...runtime.errors import InvalidAnswer, MalformedResume, RunNotFound, ValidationError
from ...runtime.protocol import ResumeOutcome
from ..deps import House, Surface

router = APIRouter(prefix="/slack", tags=["slack"])
log = structlog.get_logger("parkway.http.slack")


@router.post("/interactions", responses=responses(401, 404, 413, 422, 503))
async def interaction(request: Request, house: House) -> JSONResponse:
    """A click from a Slack message (signed by Slack): answers as the clicking user's caller."""
    settings = house.pw.settings
    if not settings.slack_signing_secret:
        return problem(404, "NotFound", "Slack interactivity is off here (no PARKWAY_SLACK_SIGNING_SECRET)")
    from slack_sdk.signature import SignatureVerifier  # the channels extra: only where Slack is on

    body = await request.body()
    stamp = request.headers.get("x-slack-request-timestamp", "")
    signature = request.headers.get("x-slack-signature")
    verifier = SignatureVerifier(settings.slack_signing_secret)
    if not stamp.isdigit() or not verifier.is_valid(body, stamp, signature):
        return problem(401, "BadSignature", "not signed by Slack with this app's signing secret, or too old")
    try:
        payload = json.loads(parse_qs(body.decode())["payload"][0])
        user = str(payload["user"]["id"])
        where = str((payload.get("channel") or {}).get("id") or (payload.get("container") or {}).get("channel_id"))
        action = next((a for a in payload.get("actions") or []
                       if str(a.get("action_id", "")).startswith(ACTION_PREFIX)), None)
        picked = json.loads(action["value"]) if action is not None else None
    except (KeyError, IndexError, TypeError, ValueError, AttributeError):
        return problem(422, "MalformedPayload", "a Slack interactivity request carries a JSON payload field")
    if picked is None:  # another interaction (a link's click): nothing to answer
        return JSONResponse({"outcome": "ignored"})
    return await anyio.to_thread.run_sync(lambda: _answer(house, user, where, picked))


def _answer(house: Surface, user: str, where: str, picked: Any) -> JSONResponse:
    """Answer ``picked`` (``{run, request, option}``) as Slack user ``user``'s caller, and tell them
    what did not happen in channel ``where`` (counted as the answer route counts refusals)."""
    pw = house.pw
    who = pw.settings.slack_callers.get(user)
    if who is None:
        log.warning("slack_user_unmapped", slack_user=user)
        _tell(pw, where, user, "Nothing was recorded: your Slack account is not mapped to a parkway caller "
              "(PARKWAY_SLACK_USERS).")
        return JSONResponse({"outcome": "refused", "detail": "this Slack user is not mapped to a parkway caller"})
    try:
        run_id, request_id, option = str(picked["run"]), str(picked["request"]), str(picked["option"])
        outcome = _resume(pw, who, run_id, request_id, option)
    except (KeyError, TypeError):
        return problem(422, "MalformedPayload", "this button does not name an interrupt and an option")
    except (InvalidAnswer, MalformedResume, ValidationError) as exc:
        house.refused.add("invalid")
        _tell(pw, where, user, f"Nothing was recorded: {exc.message}")
        return JSONResponse({"outcome": "invalid", "detail": exc.message})
    log.info("slack_answer", run_id=run_id, request_id=request_id, outcome=outcome.value, caller=who.name)
    if outcome is not ResumeOutcome.ACCEPTED:
        house.refused.add(outcome.value)
        _tell(pw, where, user, _why(pw, outcome, run_id, request_id))
    return JSONResponse({"outcome": outcome.value})


def _resume(pw: Parkway, who: Caller, run_id: str, request_id: str, option: str) -> ResumeOutcome:
    """What ``POST /v1/interrupts/{id}/answer`` does for ``who``: the run's authority, then the resume."""
    try:
        pw.check_run(run_id, who, "answer")
    except RunNotFound:
        return ResumeOutcome.UNKNOWN
    token = tokens.mint(pw.backend.options.secret, run_id, request_id)
    return pw.resume(token, selected=option, request_id=request_id, responder=who.name).outcome


def _why(pw: Parkway, outcome: ResumeOutcome, run_id: str, request_id: str) -> str:
    if outcome is ResumeOutcome.UNKNOWN:
        return "Nothing was recorded: this question is gone, or not yours to answer."
    try:
        life = pw.get_interrupt(request_id, run_id=run_id).lifecycle
    except Exception:  # noqa: BLE001 - what it says is only less precise
        life = None
    if outcome is ResumeOutcome.EXPIRED or (life is not None and life.status == "expired"):
        return f"Nothing was recorded: this question expired{'' if life is None else ' at ' + when(life.ended_at)}."
    if life is None:
        return "Nothing was recorded: this question was already answered."
    ended = "already cancelled" if life.status == "cancelled" else "already answered"
    return f"Nothing was recorded: this question was {ended} by {life.responder or 'someone'} at {when(life.ended_at)}."


def _tell(pw: Parkway, where: str, user: str, text: str) -> None:
    """An ephemeral message to ``user`` in ``where`` (only they see it); a failure is logged only."""
    if not pw.settings.slack_token:
        return
    try:
        web_client(pw.settings).chat_postEphemeral(channel=where, user=user, text=text)
    except Exception as exc:  # noqa: BLE001 - the answer stands (or not) whatever Slack says
        log.warning("slack_tell_error", error=f"{type(exc).__name__}: {exc}"[:300])
