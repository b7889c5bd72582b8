"""Slack: a Block Kit message per interrupt posted by the workers, answered from its buttons through
`parkway serve`'s interactivity endpoint (Slack's signature verified, the Slack user mapped to a
parkway caller), and updated in place once answered, by whom and when."""

from __future__ import annotations

import hashlib
import hmac
import itertools
import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlencode

import httpx
import pytest
import redis

from parkway import Parkway, RunStatus
from parkway.adapters.redis import keys
from parkway.config import Settings
from parkway.runtime.errors import ConfigError
from tests import flows
from tests.conftest import SECRET, Harness, all_at_once
from tests.procs import Worker, free_port, wait_for

pytestmark = pytest.mark.slow

SIGNING = "8f742231b10e8888abcd99yyyzzz85a5"
USERS = "U0ANA=user:ana:acme U0BOB=user:bob:other"
CHANNEL = "C0OPS"


class SlackStandIn:
    """Slack's Web API on a local port: records each call (method, arguments) and answers as Slack
    does, ``{"ok": true, "ts": ...}``."""

    def __init__(self) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/api/"
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.on_call: Any = None
        """called with (method, arguments) before each answer: what happens meanwhile elsewhere"""
        stamps = itertools.count(1)
        stand_in = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                raw = self.rfile.read(int(self.headers.get("content-length") or 0)).decode()
                if "json" in (self.headers.get("content-type") or ""):
                    args = json.loads(raw or "{}")
                else:
                    args = {k: v[0] for k, v in parse_qs(raw).items()}
                method = self.path.rsplit("/", 1)[-1]
                stand_in.calls.append((method, args))
                if stand_in.on_call is not None:
                    stand_in.on_call(method, args)
                ts = args.get("ts") or f"1700000000.{next(stamps):06d}"  # an update keeps its message's
                reply = {"ok": True, "channel": args.get("channel"), "ts": ts}
                body = json.dumps(reply).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json; charset=utf-8")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def of(self, method: str) -> list[dict[str, Any]]:
        return [args for m, args in list(self.calls) if m == method]

    def stop(self) -> None:
        self.on_call = None
        self.server.shutdown()
        self.server.server_close()


SLACK_ENV = {"PARKWAY_SLACK_TOKEN": "xoxb-test", "PARKWAY_SLACK_USERS": USERS}


@pytest.fixture(scope="module")
def slack() -> Iterator[SlackStandIn]:
    stand_in = SlackStandIn()
    yield stand_in
    stand_in.stop()


@pytest.fixture(scope="module")
def server(redis_url: str, slack: SlackStandIn) -> Iterator[Any]:
    """`parkway serve` (the app as it builds it) with Slack's signing secret, its users and its API."""
    from tests.test_api import Server

    srv = Server(redis_url, PARKWAY_SLACK_SIGNING_SECRET=SIGNING, PARKWAY_SLACK_API_URL=slack.url, **SLACK_ENV)
    yield srv
    srv.stop()


def signed(payload: dict[str, Any], *, secret: str = SIGNING, at: int | None = None) -> tuple[str, dict[str, str]]:
    """An interactivity request as Slack builds it: the payload as a form field, signed ``v0`` over
    ``v0:{timestamp}:{body}`` with the app's signing secret."""
    body = urlencode({"payload": json.dumps(payload)})
    stamp = str(int(time.time()) if at is None else at)
    digest = hmac.new(secret.encode(), f"v0:{stamp}:{body}".encode(), hashlib.sha256).hexdigest()
    return body, {"content-type": "application/x-www-form-urlencoded", "x-slack-request-timestamp": stamp,
                  "x-slack-signature": f"v0={digest}"}


def click(user: str, button: dict[str, Any], message_ts: str = "1700000000.000001") -> dict[str, Any]:
    """The ``block_actions`` payload Slack sends when ``user`` clicks ``button``."""
    return {"type": "block_actions", "user": {"id": user, "username": user.lower()}, "api_app_id": "A0APP",
            "team": {"id": "T0TEAM"}, "channel": {"id": CHANNEL}, "response_url": "https://hooks.slack.invalid/x",
            "container": {"type": "message", "message_ts": message_ts, "channel_id": CHANNEL},
            "actions": [{"type": "button", "action_id": button["action_id"], "block_id": "b1",
                         "value": button["value"], "action_ts": f"{time.time():.6f}"}]}


def buttons(message: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """A posted message's buttons, by the option id each carries."""
    blocks = message["blocks"] if isinstance(message["blocks"], list) else json.loads(message["blocks"])
    found = [e for b in blocks if b["type"] == "actions" for e in b["elements"]]
    return {json.loads(e["value"])["option"]: e for e in found}


def _paused(pw: Parkway, redis_client: redis.Redis, redis_url: str) -> tuple[str, str, dict[str, dict[str, Any]]]:
    """A run of tenant acme waiting on its color question (run by an in-process burst worker), and
    its buttons as the Slack channel builds them (the same values a posted message carries)."""
    from parkway.channels.base import Notice
    from parkway.channels.slack import SlackChannel

    harness = Harness("redis", pw, Settings(redis_url=redis_url, secret=SECRET), redis_client)
    run_id = harness.start_and_run(flows.one_choice, {}, tenant="acme")
    interrupt = pw.list_interrupts(run_id=run_id).items[0]
    notice = Notice("1-0", "e", "raised", run_id, interrupt.request_id, "one_choice", interrupt.expires_at)
    view = interrupt.model_dump(mode="json", by_alias=True)
    blocks, _ = SlackChannel((), None, None).open(notice, view)  # type: ignore[arg-type]
    return run_id, interrupt.request_id, buttons({"blocks": blocks})


def test_a_pause_is_posted_answered_from_its_button_and_updated_with_who_and_when(
    pw: Parkway, redis_url: str, redis_client: redis.Redis, slack: SlackStandIn, server: Any
) -> None:
    """A worker posts the pause (question, workflow, audience, expiry, a button per option, the form
    link); a signed click by a mapped Slack user answers as its caller and the run completes; the
    message is updated in place (chat.update with the posted ts) saying who answered and when; a
    second click is told the question was already answered."""
    slack.calls.clear()
    worker = Worker(redis_url, SECRET, env={**SLACK_ENV, "PARKWAY_SLACK_CHANNELS": CHANNEL,
                                            "PARKWAY_SLACK_API_URL": slack.url, "PARKWAY_PUBLIC_URL": server.url})
    try:
        wait_for(lambda: redis_client.exists(keys.notify_on()), 20, "the worker to turn notifications on")
        run_id = pw.start(flows.one_choice, {}, tenant="acme")
        posted = wait_for(lambda: slack.of("chat.postMessage"), 20, "the message")[0]
        assert posted["channel"] == CHANNEL
        shown = json.dumps(posted["blocks"])
        assert "one_choice" in shown and "expires" in shown and f"{server.url}/ui" in shown
        options = buttons(posted)
        assert sorted(options) == ["blue", "red"]
        kept = redis_client.hget(keys.slack_messages(run_id, json.loads(options["red"]["value"])["request"]), CHANNEL)
        assert kept is not None and kept.startswith(b"1700000000.")  # the ts Slack answered with
        ts = kept.decode()

        body, headers = signed(click("U0ANA", options["red"], ts))
        answered = httpx.post(f"{server.url}/slack/interactions", content=body, headers=headers, timeout=10)
        assert answered.status_code == 200 and answered.json() == {"outcome": "accepted"}, answered.text
        assert pw.wait(run_id, timeout=20).status is RunStatus.COMPLETED
        assert pw.get_run(run_id).output["painted"] == "red"

        update = wait_for(lambda: slack.of("chat.update"), 20, "the message updated")[0]
        assert (update["channel"], update["ts"]) == (CHANNEL, ts)
        said = json.dumps(update["blocks"])
        assert "Answered by user:ana (<@U0ANA>) at " in said and " UTC" in said and "actions" not in said

        body, headers = signed(click("U0ANA", options["blue"], ts))
        again = httpx.post(f"{server.url}/slack/interactions", content=body, headers=headers, timeout=10)
        assert again.json() == {"outcome": "already_resolved"}
        told = wait_for(lambda: slack.of("chat.postEphemeral"), 10, "the clicker told")[-1]
        assert told["user"] == "U0ANA" and "already answered by user:ana at" in told["text"]
        assert pw.get_run(run_id).output["painted"] == "red"
    finally:
        output = worker.stop()
        assert "Traceback" not in output, output[-3000:]


def test_a_cancelled_and_an_expired_pause_update_their_messages_in_place(
    pw: Parkway, redis_url: str, redis_client: redis.Redis, slack: SlackStandIn
) -> None:
    """A cancelled interrupt's message is updated to say who cancelled it, when and why; an expired
    one's to say it expired and when; each through chat.update on the ts it was posted with, without
    its buttons."""
    slack.calls.clear()
    worker = Worker(redis_url, SECRET, env={**SLACK_ENV, "PARKWAY_SLACK_CHANNELS": CHANNEL,
                                            "PARKWAY_SLACK_API_URL": slack.url})
    try:
        wait_for(lambda: redis_client.exists(keys.notify_on()), 20, "the worker to turn notifications on")
        cancelled = pw.start(flows.one_choice, {})
        expiring = pw.start(flows.one_choice, {"ttl_ms": 1500})
        wait_for(lambda: len(slack.of("chat.postMessage")) == 2, 20, "both messages")
        posted = {pw.list_interrupts(run_id=r).items[0].request_id: r for r in (cancelled,)}
        token = pw.list_interrupts(run_id=cancelled, include_tokens=True).items[0].resume_token
        assert token is not None
        assert pw.cancel_interrupt(token, reason="wrong colour scheme", responder="system:ops").accepted
        updates = wait_for(lambda: slack.of("chat.update") if len(slack.of("chat.update")) == 2 else None, 40,
                           "both messages updated")
        texts = {u["ts"]: json.dumps(u["blocks"]) for u in updates}
        kept = {r: redis_client.hget(keys.slack_messages(r, q), CHANNEL) for q, r in posted.items()}
        said = texts[kept[cancelled].decode()]  # type: ignore[union-attr]
        assert "Cancelled by system:ops at " in said and "wrong colour scheme" in said and "actions" not in said
        other = next(t for ts, t in texts.items() if ts != kept[cancelled].decode())  # type: ignore[union-attr]
        assert "Expired at " in other and " UTC" in other and "actions" not in other
        assert pw.get_run(expiring).status is RunStatus.EXPIRED
    finally:
        output = worker.stop()
        assert "Traceback" not in output, output[-3000:]


def test_a_forged_signature_is_refused_with_401_and_answers_nothing(
    pw: Parkway, redis_url: str, redis_client: redis.Redis, server: Any
) -> None:
    """A click signed with another secret, or unsigned, gets 401 and the interrupt stays open."""
    run_id, request_id, options = _paused(pw, redis_client, redis_url)
    body, headers = signed(click("U0ANA", options["red"]), secret="not-the-apps-signing-secret")
    forged = httpx.post(f"{server.url}/slack/interactions", content=body, headers=headers, timeout=10)
    assert forged.status_code == 401
    unsigned = httpx.post(f"{server.url}/slack/interactions", content=body,
                          headers={"content-type": "application/x-www-form-urlencoded"}, timeout=10)
    assert unsigned.status_code == 401
    assert pw.get_interrupt(request_id, run_id=run_id).lifecycle.status == "pending"  # type: ignore[union-attr]


def test_a_stale_timestamp_is_refused_even_when_its_signature_is_right(
    pw: Parkway, redis_url: str, redis_client: redis.Redis, server: Any
) -> None:
    """A click signed rightly over a timestamp ten minutes old (a replay) gets 401; nothing is answered."""
    run_id, request_id, options = _paused(pw, redis_client, redis_url)
    body, headers = signed(click("U0ANA", options["red"]), at=int(time.time()) - 600)
    stale = httpx.post(f"{server.url}/slack/interactions", content=body, headers=headers, timeout=10)
    assert stale.status_code == 401
    assert pw.get_interrupt(request_id, run_id=run_id).lifecycle.status == "pending"  # type: ignore[union-attr]


def test_an_unmapped_slack_user_is_refused_and_told_so(
    pw: Parkway, redis_url: str, redis_client: redis.Redis, slack: SlackStandIn, server: Any
) -> None:
    """A signed click by a Slack user no caller is mapped to answers nothing, and that user is told
    (an ephemeral message) that their account is not mapped."""
    run_id, request_id, options = _paused(pw, redis_client, redis_url)
    slack.calls.clear()
    body, headers = signed(click("U0EVE", options["red"]))
    refused = httpx.post(f"{server.url}/slack/interactions", content=body, headers=headers, timeout=10)
    assert refused.status_code == 200 and refused.json()["outcome"] == "refused"
    told = wait_for(lambda: slack.of("chat.postEphemeral"), 10, "the clicker told")
    assert told[0]["user"] == "U0EVE" and "not mapped" in told[0]["text"]
    assert pw.get_interrupt(request_id, run_id=run_id).lifecycle.status == "pending"  # type: ignore[union-attr]


def test_a_mapped_user_of_another_tenant_answers_nothing(
    pw: Parkway, redis_url: str, redis_client: redis.Redis, server: Any
) -> None:
    """The answer goes through the run's authority as the mapped caller: a user of tenant other
    clicking on tenant acme's question gets `unknown`, and it stays open."""
    run_id, request_id, options = _paused(pw, redis_client, redis_url)
    body, headers = signed(click("U0BOB", options["red"]))
    outside = httpx.post(f"{server.url}/slack/interactions", content=body, headers=headers, timeout=10)
    assert outside.json() == {"outcome": "unknown"}
    assert pw.get_interrupt(request_id, run_id=run_id).lifecycle.status == "pending"  # type: ignore[union-attr]


def test_clicks_racing_on_one_question_answer_it_once(
    pw: Parkway, redis_url: str, redis_client: redis.Redis, server: Any
) -> None:
    """Eight signed clicks at once, on both buttons, by a mapped user: one option wins (its clicks read
    accepted: the same answer again, committed once), every click on the other is told it was already
    answered, and the run goes on with the winning option."""
    run_id, _, options = _paused(pw, redis_client, redis_url)

    def one(i: int) -> tuple[str, str]:
        option = ("red", "blue")[i % 2]
        body, headers = signed(click("U0ANA", options[option]))
        reply = httpx.post(f"{server.url}/slack/interactions", content=body, headers=headers, timeout=20)
        return reply.json()["outcome"], option

    outcomes = all_at_once(one, 8)
    won = {option for outcome, option in outcomes if outcome == "accepted"}
    assert len(won) == 1, outcomes
    assert {outcome for outcome, option in outcomes if option not in won} == {"already_resolved"}, outcomes
    Harness("redis", pw, Settings(redis_url=redis_url, secret=SECRET), redis_client).run_jobs()
    assert pw.get_run(run_id).output["painted"] == won.pop()


def _channel(pw: Parkway, redis_url: str, redis_client: redis.Redis, slack: SlackStandIn) -> tuple[Any, Any, Any]:
    """The Slack channel a worker builds (its client on the stand-in, its Redis), and the raised and
    answered notices of a paused run with its view."""
    from parkway.channels import configured, viewer
    from parkway.channels.base import Notice

    run_id, request_id, _ = _paused(pw, redis_client, redis_url)
    settings = Settings(redis_url=redis_url, secret=SECRET, slack_token="xoxb-test", slack_channels=(CHANNEL,),
                        slack_api_url=slack.url)
    channel = configured(settings)[0]
    expires = pw.get_interrupt(request_id, run_id=run_id).expires_at
    raised, answered = (Notice("1-0", f"e-{kind}", kind, run_id, request_id, "one_choice", expires)
                        for kind in ("raised", "answered"))
    return channel, (raised, viewer(pw, None)(raised)), (answered, viewer(pw, None)(answered))


def test_an_end_delivered_before_the_post_keeps_the_question_from_being_posted_late(
    pw: Parkway, redis_url: str, redis_client: redis.Redis, slack: SlackStandIn
) -> None:
    """An interrupt's end delivered while its post is still retrying (no message yet) posts nothing,
    and the post's later retry posts nothing either: no question is left asking after its end."""
    channel, (raised, view), (answered, ended_view) = _channel(pw, redis_url, redis_client, slack)
    slack.calls.clear()
    channel.send(answered, ended_view, CHANNEL)
    channel.send(raised, view, CHANNEL)
    assert slack.calls == []
    assert redis_client.hget(keys.slack_messages(raised.run_id, raised.request_id), CHANNEL) == b"-"


def test_a_post_racing_its_end_on_another_worker_is_taken_back(
    pw: Parkway, redis_url: str, redis_client: redis.Redis, slack: SlackStandIn
) -> None:
    """When another worker delivers the end (finding no message) while this one posts the question,
    the posted message is deleted (chat.delete with its ts) rather than left asking."""
    channel, (raised, view), (answered, ended_view) = _channel(pw, redis_url, redis_client, slack)
    other = type(channel)(channel.routes, channel.client, channel.redis)  # another worker's, on the same Redis
    slack.calls.clear()

    def meanwhile(method: str, args: dict[str, Any]) -> None:
        if method == "chat.postMessage":  # the other worker's end, between this one's read and keep
            slack.on_call = None
            other.send(answered, ended_view, CHANNEL)

    slack.on_call = meanwhile
    try:
        channel.send(raised, view, CHANNEL)
    finally:
        slack.on_call = None
    assert [m for m, _ in slack.calls] == ["chat.postMessage", "chat.delete"]
    assert slack.calls[1][1]["ts"].startswith("1700000000.")


def test_the_slack_settings_refuse_channels_without_a_token_and_a_mapping_that_does_not_read() -> None:
    """PARKWAY_SLACK_CHANNELS without a bot token, and a user mapping that is not
    <user>=<role>[:owner[:tenant]] (or a user without tenant), are refused naming the setting."""
    with pytest.raises(ConfigError, match="PARKWAY_SLACK_TOKEN"):
        Settings(slack_channels=("C0OPS",))
    for bad in ("U0ANA", "U0ANA=boss", "U0ANA=user:ana"):
        with pytest.raises(ConfigError, match="PARKWAY_SLACK_USERS"):
            Settings(slack_users=(bad,))
    assert Settings(slack_users="U1=user:ana:acme U2=machine").slack_callers["U1"].name == "user:ana"
