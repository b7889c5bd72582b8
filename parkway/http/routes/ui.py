"""``/ui``: the inbox page (pending interrupts, one run's timeline, one session), one static page
served with a fresh nonce on its scripts and styles, and the files it loads beside it (``/ui/assets/``:
the interrupt table, its keys and bulk answers, the run page's tree and confirmations). Not in the
OpenAPI document."""

from __future__ import annotations

import secrets
from importlib import resources

from fastapi import APIRouter
from fastapi.responses import HTMLResponse, Response

router = APIRouter(prefix="/ui", include_in_schema=False)
_STATIC = resources.files("parkway.http").joinpath("static")
_UI = _STATIC.joinpath("ui.html").read_text()
_ASSETS = {"inbox.js": "text/javascript; charset=utf-8", "inbox.css": "text/css; charset=utf-8"}
"""the files the page loads from /ui/assets/ (each with the page's nonce), by name and type"""
PAGE_HEADERS = {"Cache-Control": "no-store", "Referrer-Policy": "no-referrer", "X-Frame-Options": "DENY"}
"""what every page parkway serves says: never cached, no referrer, never framed"""


def _ui_page() -> HTMLResponse:
    """The live page with a fresh nonce on its scripts and styles (inline, and the files it loads
    from /ui/assets/): the CSP runs those and nothing else (no other inline script, nothing from
    elsewhere), and forbids framing."""
    nonce = secrets.token_urlsafe(18)
    html = (_UI.replace("<script", f'<script nonce="{nonce}"').replace("<style>", f'<style nonce="{nonce}">', 1)
            .replace('<link rel="stylesheet"', f'<link nonce="{nonce}" rel="stylesheet"'))
    csp = (f"default-src 'none'; script-src 'nonce-{nonce}'; style-src 'nonce-{nonce}'; connect-src 'self'; "
           "base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
    return HTMLResponse(html, headers={**PAGE_HEADERS, "Content-Security-Policy": csp})


@router.get("", response_class=HTMLResponse)
@router.get("/runs", response_class=HTMLResponse)
@router.get("/runs/{run_id}", response_class=HTMLResponse)
@router.get("/sessions/{session_id}", response_class=HTMLResponse)
def live_page(run_id: str | None = None, session_id: str | None = None) -> HTMLResponse:
    """The inbox page: pending interrupts to answer, one run (its timeline over its event stream),
    or one session (its message tree and open interrupts). It calls the API with a key the person
    enters (kept in the tab), and acts with that key's role."""
    return _ui_page()


@router.get("/assets/{name}")
def asset(name: str) -> Response:
    """One of the page's own files (its script and style beside ``ui.html``); nothing else is served."""
    kind = _ASSETS.get(name)
    if kind is None:
        return Response(status_code=404, headers=PAGE_HEADERS)
    return Response(_STATIC.joinpath(name).read_bytes(), media_type=kind,
                    headers={**PAGE_HEADERS, "X-Content-Type-Options": "nosniff"})
