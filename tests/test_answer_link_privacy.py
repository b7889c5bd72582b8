"""Answer links are capabilities: opaque in the URL, never whole in a log."""

from __future__ import annotations

import base64
from collections.abc import Iterator

import httpx
import pytest
import redis

from parkway import Parkway, Settings
from parkway.runtime import links
from parkway.runtime.errors import MalformedResume
from tests.conftest import SECRET, Closing
from tests.procs import Worker
from tests.test_api import Server, _api, _token, _wait_status, close_api_clients

KEY = b"k" * 32
LINK = links.AnswerLink("run-visible-123", "i0_abc_run-visible-123", "approve", 2**42, "ana@example.com")


@pytest.fixture(autouse=True)
def _close_clients() -> Iterator[None]:
    yield
    close_api_clients()


def _decoded(text: str) -> bytes:
    """Every part of a link, base64-decoded as far as it decodes."""
    out = b""
    for part in text.split("."):
        out += base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))
    return out


def test_a_link_shows_nothing_of_what_it_carries() -> None:
    """Neither the link nor its base64-decoded parts show the responder, the run or the option; the
    key that made it reads them back; two links of the same answer differ."""
    made = links.mint(KEY, LINK)
    for secret in (b"ana@example.com", b"run-visible-123", b"approve"):
        assert secret not in made.encode() and secret not in _decoded(made)
    assert links.verify(KEY, made) == LINK
    assert links.mint(KEY, LINK) != made


def test_a_changed_or_foreign_link_is_refused() -> None:
    """A link with any character of its payload changed, or made with another key, is not valid."""
    made = links.mint(KEY, LINK)
    payload, signature = made.split(".")
    for i in range(0, len(payload), 7):
        flipped = payload[:i] + ("A" if payload[i] != "A" else "B") + payload[i + 1:]
        with pytest.raises(MalformedResume):
            links.verify(KEY, f"{flipped}.{signature}")
    with pytest.raises(MalformedResume):
        links.verify(b"another deployment's key" * 2, made)


def test_the_access_log_never_holds_a_link(redis_url: str, redis_client: redis.Redis, closing: Closing) -> None:
    """After a link is shown (GET) and used (POST), the server's access log has the requests with
    the link masked: neither the link nor either of its parts."""
    srv, worker = Server(redis_url), Worker(redis_url, SECRET)
    try:
        api = _api(srv)
        pw = closing(Parkway(Settings(redis_url=redis_url, secret=SECRET)))
        run_id = api.post("/v1/runs", json={"workflow": "tests.flows:one_choice", "input": {}}).json()["runId"]
        _wait_status(api, run_id, "waiting")
        url = pw.answer_links(_token(api, run_id)[0], srv.url, responder="ana@example.com")["red"]
        with httpx.Client(timeout=15) as browser:
            assert browser.get(url).status_code == 200
            assert browser.post(url).status_code == 200
        _wait_status(api, run_id, "completed")
    finally:
        worker.stop()
        log = srv.stop()
    link = url.rpartition("/a/")[2]
    assert '"POST /a/' in log and '"GET /a/' in log  # the access log is on, and shows the requests
    for part in (link, *link.split(".")):
        assert part not in log
