"""``/ui``: the inbox page (pending interrupts, one run's timeline, one session), one static page
served with a fresh nonce on its one script and its one style element. Not in the OpenAPI document."""

from __future__ import annotations

import secrets
from importlib import resources

from fastapi import APIRouter
from fastapi.responses import HTMLResponse

router = APIRouter(prefix="/ui", include_in_schema=False)
_UI = resources.files("parkway.http").joinpath("static/ui.html").read_text()
PAGE_HEADERS = {"Cache-Control": "no-store", "Referrer-Policy": "no-referrer", "X-Frame-Options": "DENY"}
"""what every page parkway serves says: never cached, no referrer, never framed"""


def _ui_page() -> HTMLResponse:
    """The live page with a fresh nonce on its one script and its one style element: the CSP runs
    those and nothing else (no other inline script, nothing from elsewhere), and forbids framing."""
    nonce = secrets.token_urlsafe(18)
    html = _UI.replace("<script>", f'<script nonce="{nonce}">', 1).replace("<style>", f'<style nonce="{nonce}">', 1)
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
