"""``/a/{link}``: one-click answer links (``Parkway.answer_links``). The GET shows a confirmation page,
only its POST answers; the pages run no script and post only to themselves. A link is a
capability: the access log masks it (:data:`MASK_LINKS`)."""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from html import escape
from typing import Any

from fastapi import APIRouter
from fastapi.responses import HTMLResponse

from ...client.sync import Parkway
from ...problems import responses
from ...runtime import kinds, links, tokens
from ...runtime.clock import now_ms
from ...runtime.errors import InterruptNotFound, MalformedResume, StoreUnavailable, ValidationError
from ...runtime.protocol import Interrupt, ResumeOutcome, ResumeResult
from ..deps import Client, House
from .ui import PAGE_HEADERS

router = APIRouter(prefix="/a", tags=["answer links"])
_LINK_CSP = ("default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; base-uri 'none'; "
             "frame-ancestors 'none'")
"""an answer link's page: no script at all, its one form posts back to itself, never framed"""

_LINK_PAGES: dict[int | str, dict[str, Any]] = {
    404: {"description": "a page: not a valid link, or no such question"},
    409: {"description": "a page: the question was already answered"},
    410: {"description": "a page: the link, or its question, expired"},
}
"""what an answer link's pages answer besides 200 (HTML, as the 200 is)"""

_LINK_OUTCOMES = {
    ResumeOutcome.ALREADY_RESOLVED: ("Already answered", "<p>This question was already answered.</p>", 409),
    ResumeOutcome.EXPIRED: ("Expired", "<p>This question is no longer open: it expired.</p>", 410),
    ResumeOutcome.UNKNOWN: ("Unknown", "<p>There is no such question.</p>", 404),
}


@router.get("/{link}", response_class=HTMLResponse, responses={**_LINK_PAGES, **responses(503, html=True)})
def link_page(link: str, pw: Client) -> HTMLResponse:
    """Show what the link answers, with a button that POSTs it; a GET never answers."""
    found = _link_state(pw, link)
    if isinstance(found, HTMLResponse):
        return found
    interrupt, answer = found
    label = next((o.label for o in interrupt.asked().options if o.id == answer.option), answer.option)
    return _page(
        "Confirm your answer",
        f"<p>{escape(interrupt.asked().question or 'Your answer')}</p>"
        f"<form method='post'><button type='submit'>Answer “{escape(label)}”</button></form>",
    )


@router.post("/{link}", response_class=HTMLResponse,
             responses={**_LINK_PAGES, 422: {"description": "a page: the answer does not fit"},
                        **responses(503, html=True)})
def link_answer(link: str, house: House) -> HTMLResponse:
    pw = house.pw
    found = _link_state(pw, link)
    if isinstance(found, HTMLResponse):
        return found
    interrupt, answer = found
    token = tokens.mint(pw.backend.options.secret, answer.run_id, answer.request_id)
    asked = interrupt.asked()
    try:
        result = pw.resume(token, request_id=answer.request_id, responder=answer.responder or "answer-link",
                           **kinds.get(asked.kind).link_answer(asked, answer.option))
    except ValidationError as exc:
        house.refused.add("invalid")
        return _page("Not recorded", f"<p>{escape(exc.message)}</p>", 422)
    if result.accepted:
        return _page("Thank you", f"<p>Your answer is recorded{_who_when(pw, answer)}.</p>")
    house.refused.add(result.outcome.value)
    if result.outcome is ResumeOutcome.ALREADY_RESOLVED:
        return _ended_page(pw, answer)
    return _page(*_LINK_OUTCOMES[result.outcome])


def _ended(pw: Parkway, answer: links.AnswerLink) -> Interrupt | None:
    """The interrupt a link answers, as its lifecycle record now says; None when it cannot be read."""
    try:
        return pw.get_interrupt(answer.request_id, run_id=answer.run_id)
    except (InterruptNotFound, StoreUnavailable):
        return None


def _who_when(pw: Parkway, answer: links.AnswerLink) -> str:
    """' by WHO at <time>' as the interrupt's record says (empty when it cannot be read)."""
    found = _ended(pw, answer)
    life = found.lifecycle if found else None
    if life is None or life.status == "pending":
        return ""
    who = f" by {escape(life.responder)}" if life.responder else ""
    return who + (f" at {_time(life.ended_at)}" if life.ended_at else "")


def _ended_page(pw: Parkway, answer: links.AnswerLink) -> HTMLResponse:
    """The question was answered (or cancelled) already: by whom and when, as its record says."""
    found = _ended(pw, answer)
    life = found.lifecycle if found else None
    if found is None or life is None or life.status == "pending":
        return _page(*_LINK_OUTCOMES[ResumeOutcome.ALREADY_RESOLVED])
    verb = "cancelled" if life.status == "cancelled" else "answered"
    asked = found.asked() if found.request is not None else None
    said = ""
    if life.status == "resolved" and isinstance(life.answer, str) and asked is not None:
        label = next((o.label for o in asked.options if o.id == life.answer), life.answer)
        said = f" with “{escape(label)}”"
    question = f"<p>{escape(asked.question)}</p>" if asked is not None and asked.question else ""
    return _page(f"Already {verb}",
                 f"{question}<p>This question was already {verb}{said}{_who_when(pw, answer)}.</p>", 409)


def _time(ms: int) -> str:
    """A moment as a <time> element, shown in UTC to the second."""
    at = datetime.fromtimestamp(ms / 1000, tz=UTC)
    return f"<time datetime='{at.isoformat(timespec='seconds')}'>{at:%Y-%m-%d %H:%M:%S} UTC</time>"


_LINK_STYLE = (
    "*{box-sizing:border-box}"
    "body{font-family:system-ui,sans-serif;line-height:1.45;color:#1d2433;max-width:32rem;"
    "margin:2rem auto;padding:0 1.25rem;overflow-wrap:anywhere}"
    "h1{font-size:1.4rem}button{font:inherit;padding:.7rem 1rem;width:100%;max-width:100%;border-radius:6px;"
    "border:1px solid #1a4fa0;background:#1a4fa0;color:#fff;cursor:pointer}"
    "button:focus-visible{outline:3px solid #e0a100;outline-offset:2px}"
)
"""readable on a phone (390 px) with margins: one column, a full-width button"""


def _page(title: str, body: str, status: int = 200) -> HTMLResponse:
    html = (
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>"
        "<meta name='viewport' content='width=device-width, initial-scale=1'>"
        f"<meta name='robots' content='noindex'><title>{escape(title)}</title><style>{_LINK_STYLE}</style></head>"
        "<body>"
        f"<h1>{escape(title)}</h1>{body}</body></html>"
    )
    return HTMLResponse(html, status_code=status, headers={**PAGE_HEADERS, "Content-Security-Policy": _LINK_CSP})


def _link_state(pw: Parkway, text: str) -> tuple[Interrupt, links.AnswerLink] | HTMLResponse:
    """The open interrupt a valid, unexpired link answers, or the page that says why there is none."""
    try:
        answer = links.verify(pw.backend.options.secret, text)
    except MalformedResume:
        return _page("Not a valid link", "<p>This answer link is not valid.</p>", 404)
    if answer.expires_at <= now_ms():
        return _page("Expired", "<p>This answer link has expired.</p>", 410)
    found = pw.lookup(tokens.mint(pw.backend.options.secret, answer.run_id, answer.request_id))
    if isinstance(found, ResumeResult):
        if found.outcome is ResumeOutcome.ALREADY_RESOLVED:
            return _ended_page(pw, answer)
        return _page(*_LINK_OUTCOMES[found.outcome])
    return found, answer


class _MaskLinks(logging.Filter):
    """Masks answer links in access log lines: a logged link would answer as its responder."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if isinstance(args, tuple) and len(args) > 2 and isinstance(args[2], str):
            record.args = (*args[:2], links.mask(args[2]), *args[3:])  # uvicorn's: client, method, path, ...
        return True


MASK_LINKS = _MaskLinks()
"""the filter the app puts on uvicorn's access log while it runs"""
