"""``/a/{link}``: one-click answer links (``Parkway.answer_links``). The GET shows a confirmation page,
only its POST answers; the pages run no script and post only to themselves. A link is a
capability: the access log masks it (:data:`MASK_LINKS`)."""

from __future__ import annotations

import logging
from html import escape
from typing import Any

from fastapi import APIRouter
from fastapi.responses import HTMLResponse

from ...client.sync import Parkway
from ...problems import responses
from ...runtime import kinds, links, tokens
from ...runtime.clock import now_ms
from ...runtime.errors import MalformedResume, ValidationError
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
        return _page("Thank you", "<p>Your answer is recorded.</p>")
    house.refused.add(result.outcome.value)
    return _page(*_LINK_OUTCOMES[result.outcome])


def _page(title: str, body: str, status: int = 200) -> HTMLResponse:
    html = (
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>"
        "<meta name='viewport' content='width=device-width, initial-scale=1'>"
        f"<meta name='robots' content='noindex'><title>{escape(title)}</title></head>"
        f"<body style='font-family: system-ui, sans-serif; max-width: 32rem; margin: 3rem auto'>"
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
