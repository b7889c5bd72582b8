"""Notifications: a pause, an escalation, an expiry and an answer are told to the configured channels
(signed webhooks, e-mail), at least once, by the worker processes, then dead-lettered."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from email import message_from_bytes
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest
import redis
from aiosmtpd.controller import Controller
from standardwebhooks import Webhook

from parkway import Parkway, RunStatus
from parkway.adapters.redis import keys, layout
from parkway.channels import dead_letters
from tests import flows
from tests.conftest import SECRET
from tests.procs import ROOT, Worker, free_port, wait_for
from tests.test_status import _scrape

pytestmark = pytest.mark.slow

WHSEC = "whsec_" + "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
FAST = {"PARKWAY_NOTIFY_BACKOFF_S": "0.2", "PARKWAY_NOTIFY_CLAIM_S": "1"}


class Receiver:
    """A webhook receiver on a port of its own: checks each request's signature with the
    standardwebhooks library (answering 400 to one that fails), keeps (webhook-id, body) of the others.
    ``stop`` closes the port (a receiver down: connections refused), ``start`` opens it again."""

    def __init__(self, port: int | None = None) -> None:
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}/hook"
        self.got: list[tuple[str, dict[str, Any]]] = []
        self.times: list[float] = []
        """when each request came in (``time.monotonic()``, before its body is read)"""
        self.bad = 0
        self.server: ThreadingHTTPServer | None = None

    def start(self) -> Receiver:
        receiver, verifier = self, Webhook(WHSEC)

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                receiver.times.append(time.monotonic())
                body = self.rfile.read(int(self.headers["content-length"]))
                try:
                    verifier.verify(body, {k.lower(): v for k, v in self.headers.items()})
                except Exception:  # noqa: BLE001 - a bad signature: refused, counted
                    receiver.bad += 1
                    self.send_response(400)
                else:
                    receiver.got.append((self.headers["webhook-id"], json.loads(body)))
                    self.send_response(204)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        ThreadingHTTPServer.allow_reuse_address = True
        self.server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
            self.server = None

    def of(self, kind: str) -> list[tuple[str, dict[str, Any]]]:
        return [(i, b) for i, b in self.got if b["type"] == f"interrupt.{kind}"]


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver().start()
    yield r
    r.stop()


def _worker(redis_url: str, **env: str) -> Worker:
    return Worker(redis_url, SECRET, env={"PARKWAY_WEBHOOK_SECRET": WHSEC, **FAST, **env})


def _stopped(worker: Worker) -> None:
    output = worker.stop()
    assert "Traceback" not in output, output[-3000:]


def test_a_pause_and_its_answer_are_posted_signed_with_the_interrupt_and_its_links(
    pw: Parkway, redis_url: str, receiver: Receiver
) -> None:
    """A worker with PARKWAY_WEBHOOK_URL posts interrupt.raised (the interrupt as the HTTP API shows it,
    one answer link per option, the form link) and interrupt.answered, each signed, each with its own id."""
    worker = _worker(redis_url, PARKWAY_WEBHOOK_URL=receiver.url, PARKWAY_PUBLIC_URL="https://pw.example")
    try:
        wait_for(lambda: pw.store.client.exists(keys.notify_on()), 20, "the worker to turn notifications on")
        run_id = pw.start(flows.one_choice, {})
        waiting = pw.wait(run_id, timeout=20)
        assert waiting.interrupt is not None
        raised = wait_for(lambda: receiver.of("raised"), 20, "interrupt.raised")
        event_id, body = raised[0]
        assert body["data"]["requestId"] == waiting.interrupt.request_id and body["data"]["runId"] == run_id
        assert "resumeToken" not in body["data"]
        assert sorted(body["data"]["links"]["answer"]) == ["blue", "red"]
        assert body["data"]["links"]["answer"]["red"].startswith("https://pw.example/a/")
        assert body["data"]["links"]["form"] == "https://pw.example/ui"
        token = pw.list_interrupts(run_id=run_id, include_tokens=True).items[0].resume_token
        assert token is not None and pw.resume(token, selected="red").accepted
        answered = wait_for(lambda: receiver.of("answered"), 20, "interrupt.answered")
        assert answered[0][0] != event_id and answered[0][1]["data"]["requestId"] == waiting.interrupt.request_id
        assert receiver.bad == 0
        wait_for(lambda: pw.store.client.xlen(keys.notices()) == 0, 10, "the delivered entries to go")
    finally:
        _stopped(worker)


class _Inbox:
    def __init__(self) -> None:
        self.mails: list[bytes] = []

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:  # noqa: N802 - aiosmtpd's name
        self.mails.append(envelope.content)
        return "250 OK"


def test_a_mail_carries_one_answer_link_per_option_and_its_link_answers_the_run(
    pw: Parkway, redis_url: str
) -> None:
    """A worker with an SMTP server mails the pause to the audience's address; POSTing the mail's link for
    one option to a real `parkway serve` answers the interrupt, and the run completes with that option."""
    from tests.test_api import Server

    inbox = _Inbox()
    smtp = Controller(inbox, hostname="127.0.0.1", port=free_port())
    smtp.start()
    server = Server(redis_url)
    worker = _worker(redis_url, PARKWAY_SMTP_HOST="127.0.0.1", PARKWAY_SMTP_PORT=str(smtp.port),
                     PARKWAY_SMTP_TO="ops@example.com", PARKWAY_PUBLIC_URL=server.url)
    try:
        wait_for(lambda: pw.store.client.exists(keys.notify_on()), 20, "the worker to turn notifications on")
        run_id = pw.start(flows.one_choice, {})
        wait_for(lambda: inbox.mails, 20, "the mail")
        mail = message_from_bytes(inbox.mails[0])
        assert mail["To"] == "ops@example.com" and "Waiting for you" in mail["Subject"]
        text = mail.get_payload(decode=True).decode().replace("\r\n", "\n")
        links = {label.lower(): url for label, url in re.findall(r"^\s+(\w+): (http://\S+/a/\S+)$", text, re.M)}
        assert sorted(links) == ["blue", "red"] and f"{server.url}/ui" in text
        page = httpx.post(links["blue"], timeout=10)
        assert page.status_code == 200 and "recorded" in page.text
        assert pw.wait(run_id, timeout=20).status is RunStatus.COMPLETED
        assert pw.get_run(run_id).output["painted"] == "blue"
        assert "recorded" not in httpx.post(links["red"], timeout=10).text  # the other link: answered already
    finally:
        _stopped(worker)
        server.stop()
        smtp.stop()


def test_a_delivery_survives_a_worker_killed_and_a_receiver_down_with_the_same_webhook_id(
    pw: Parkway, redis_url: str, redis_client: redis.Redis
) -> None:
    """With the receiver down, a worker takes the notification and retries it; SIGKILLed, it loses
    nothing: another worker takes it over and delivers it once the receiver is back, its webhook-id
    the event's own."""
    receiver = Receiver()  # not started: its port refuses connections
    first = _worker(redis_url, PARKWAY_WEBHOOK_URL=receiver.url)
    second: Worker | None = None
    try:
        wait_for(lambda: redis_client.exists(keys.notify_on()), 20, "the worker to turn notifications on")
        run_id = pw.start(flows.one_choice, {})
        interrupt = pw.wait(run_id, timeout=20).interrupt
        assert interrupt is not None

        def held() -> bool:
            pending = redis_client.xpending(keys.notices(), layout.NOTICE_GROUP)
            return bool(pending["pending"])

        wait_for(held, 20, "the worker to take the notification")
        time.sleep(1.0)  # a few failed sends (backoff 0.2 s, 0.4 s)
        first.kill()
        receiver.start()
        second = _worker(redis_url, PARKWAY_WEBHOOK_URL=receiver.url)
        raised = wait_for(lambda: receiver.of("raised"), 30, "the delivery once the receiver is back")
        expires = str(pw.get_interrupt(interrupt.request_id).expires_at)
        assert {i for i, _ in raised} == {layout.notice_id(interrupt.request_id, "raised", expires)}
        assert receiver.bad == 0
        wait_for(lambda: not redis_client.xrange(keys.notices()), 10, "the entry to be acknowledged")
        assert dead_letters(redis_client) == []
    finally:
        first.stop()
        if second is not None:
            _stopped(second)
        receiver.stop()


def test_a_receiver_down_past_the_retry_bound_lands_in_the_dead_letters(
    pw: Parkway, redis_url: str, redis_client: redis.Redis
) -> None:
    """A notification still undelivered past PARKWAY_NOTIFY_RETRY_S is a dead letter (its event, its
    channel, the last error), and leaves the stream."""
    receiver = Receiver()  # never started
    worker = _worker(redis_url, PARKWAY_WEBHOOK_URL=receiver.url, PARKWAY_NOTIFY_RETRY_S="1")
    try:
        wait_for(lambda: redis_client.exists(keys.notify_on()), 20, "the worker to turn notifications on")
        run_id = pw.start(flows.one_choice, {})
        interrupt = pw.wait(run_id, timeout=20).interrupt
        assert interrupt is not None
        dead = wait_for(lambda: dead_letters(redis_client), 20, "the dead letter")
        assert [(d.kind, d.request_id, d.channel) for d in dead] == [("raised", interrupt.request_id, "webhook")]
        assert "Connection refused" in dead[0].error or "URLError" in dead[0].error
        wait_for(lambda: not redis_client.xrange(keys.notices()), 10, "the entry to leave the stream")
        assert (pw.status().notices, pw.status().notices_dead) == (0, 1)
        assert _scrape(pw)["parkway_notifications_dead"] == 1
        env = {"PARKWAY_SECRET": SECRET, "PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}
        shown = subprocess.run([sys.executable, "-m", "parkway.cli", "status", "--redis-url", redis_url],
                               cwd=ROOT, env=env, capture_output=True, text=True, timeout=30)
        assert "notifications: 0 to deliver, 1 dead letters" in shown.stdout, shown.stderr
    finally:
        _stopped(worker)
