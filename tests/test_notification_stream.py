"""The notification stream: each transition that raises, escalates, expires, cancels or answers an
interrupt writes its notification in its own atomic step, only while the deployment has channels."""

from __future__ import annotations

import time
from typing import Any

from parkway.adapters.redis import keys
from parkway.channels.delivery import notice_of
from parkway.workers.reconciler import reconcile_once
from tests import flows, flows_escalate
from tests.conftest import Harness

ONE_STEP = {"escalate": {"to": ["team:leads"], "ttl_ms": 1000, "then": "expire"}}


def _notices(harness: Harness) -> list[Any]:
    client = harness.pw.store.client  # type: ignore[attr-defined]
    return [notice_of(i, f) for i, f in client.xrange(keys.notices())]


def _past_deadline(harness: Harness, run_id: str) -> None:
    expires = harness.pw.get_run(run_id).expires_at
    assert expires is not None
    time.sleep(max(0.0, expires / 1000 - time.time()) + 0.05)
    reconcile_once(harness.pw.store, harness.pw.backend.dispatcher)


def test_without_channels_a_pause_and_its_answer_write_no_notification(harness: Harness) -> None:
    """With no pw:notify (no worker with channels), the pause and the answer write nothing to pw:notices."""
    run_id = harness.start_and_run(flows.one_choice, {})
    assert harness.pw.resume(harness.token(run_id), selected="red").accepted
    assert harness.pw.store.client.exists(keys.notices()) == 0  # type: ignore[attr-defined]


def test_a_pause_its_escalation_and_its_expiry_each_write_a_notification_of_their_own(harness: Harness) -> None:
    """raised, escalated (to the next audience), expired: one entry each, in order, with the request, the
    run and the workflow, each with an id of its own."""
    harness.pw.store.client.set(keys.notify_on(), 1)  # type: ignore[attr-defined]
    run_id = harness.start_and_run(flows_escalate.escalating, {"audience": "team:ops", "policy": ONE_STEP})
    _past_deadline(harness, run_id)
    _past_deadline(harness, run_id)
    got = _notices(harness)
    assert [n.kind for n in got] == ["raised", "escalated", "expired"]
    assert {(n.run_id, n.workflow) for n in got} == {(run_id, "escalating")}
    assert len({n.request_id for n in got}) == 1 and len({n.event_id for n in got}) == 3
    assert got[1].expires_at > got[0].expires_at and got[2].expires_at == got[1].expires_at


def test_an_answer_and_a_cancellation_write_their_notification(harness: Harness) -> None:
    """An accepted answer writes `answered`; a cancelled interrupt `cancelled`; a refused answer nothing."""
    harness.pw.store.client.set(keys.notify_on(), 1)  # type: ignore[attr-defined]
    answered = harness.start_and_run(flows.one_choice, {})
    token = harness.token(answered)
    assert harness.pw.resume(token, selected="red").accepted
    assert not harness.pw.resume(token, selected="blue").accepted
    cancelled = harness.start_and_run(flows_escalate.escalating, {})
    harness.pw.cancel_interrupt(harness.token(cancelled))
    got = [(n.kind, n.run_id) for n in _notices(harness)]
    assert got == [("raised", answered), ("answered", answered), ("raised", cancelled), ("cancelled", cancelled)]


def _delivered_by(harness: Harness, channel: Any, rate: float = 1000.0) -> Any:
    """A running Delivery (the class every worker runs) of this database's stream to ``channel``."""
    from parkway.adapters.redis.connection.connection import connect
    from parkway.channels import Delivery, viewer
    from parkway.channels.delivery import Policy

    assert harness.settings.redis_url is not None
    delivery = Delivery(connect(harness.settings.redis_url), [channel], viewer(harness.pw, "https://pw.example"),
                        "test", Policy(rate=rate, backoff_s=0.1))
    delivery.start()
    return delivery


def test_webhook_routes_send_each_notification_to_its_workflow_audience_and_tenant_only(
    pw: Any, redis_client: Any, redis_url: str
) -> None:
    """A route for an audience gets that audience's interrupts, one for another workflow gets none, a
    route without a selector gets all; each receiver checks the signature."""
    from parkway import Settings
    from parkway.channels import configured
    from tests.conftest import SECRET
    from tests.procs import wait_for
    from tests.test_notifications import WHSEC, Receiver

    everyone, ops, other = Receiver().start(), Receiver().start(), Receiver().start()
    settings = Settings(redis_url=redis_url, secret=SECRET, webhook_url=everyone.url, webhook_secret=WHSEC,
                        webhook_routes=f"audience:team:ops={ops.url} workflow:one_choice={other.url}")
    harness = Harness("redis", pw, settings, redis_client)
    delivery = _delivered_by(harness, configured(settings)[0])
    try:
        run_id = harness.start_and_run(flows_escalate.escalating, {"audience": "team:ops", "ttl_ms": 60_000})
        wait_for(lambda: everyone.got and ops.got, 10, "both routes' deliveries")
        assert [b["data"]["runId"] for _, b in everyone.got] == [run_id] == [b["data"]["runId"] for _, b in ops.got]
        assert everyone.got[0][0] == ops.got[0][0]  # one event, one webhook-id, wherever it goes
        wait_for(lambda: not redis_client.xlen(keys.notices()), 10, "the entry acknowledged")
        assert other.got == [] and everyone.bad == ops.bad == 0
    finally:
        delivery.stop()
        for r in (everyone, ops, other):
            r.stop()


def test_a_channel_sends_at_most_its_rate(pw: Any, redis_client: Any, redis_url: str) -> None:
    """Six notifications to a channel limited to 4 a second: five slots of 0.25 s from the first send to the
    last, so the receiver takes them in over at least a second (1.25 s less what each request's own way
    can vary under the suite's load: 0.1 s was seen; unlimited, the six arrive within tens of ms). Each
    time is the receiver's, taken as the request comes in."""
    from parkway import Settings
    from parkway.channels import configured
    from tests.conftest import SECRET
    from tests.procs import wait_for
    from tests.test_notifications import WHSEC, Receiver

    receiver = Receiver().start()
    settings = Settings(redis_url=redis_url, secret=SECRET, webhook_url=receiver.url, webhook_secret=WHSEC)
    harness = Harness("redis", pw, settings, redis_client)
    redis_client.set(keys.notify_on(), 1)
    for _ in range(6):
        pw.start(flows.one_choice, {})
    harness.run_jobs()
    delivery = _delivered_by(harness, configured(settings)[0], rate=4.0)
    try:
        wait_for(lambda: len(receiver.times) == 6, 15, "six deliveries", interval=0.01)
        arrived = receiver.times
        assert arrived[-1] - arrived[0] >= 1.0, arrived
    finally:
        delivery.stop()
        receiver.stop()


def test_an_unreadable_notification_is_a_dead_letter_and_delivery_goes_on(
    pw: Any, redis_client: Any, redis_url: str
) -> None:
    """An entry of pw:notices without a notification's fields is dead-lettered at once (channel "-"),
    and the pause written after it is still delivered."""
    from parkway import Settings
    from parkway.channels import configured, dead_letters
    from tests.conftest import SECRET
    from tests.procs import wait_for
    from tests.test_notifications import WHSEC, Receiver

    receiver = Receiver().start()
    settings = Settings(redis_url=redis_url, secret=SECRET, webhook_url=receiver.url, webhook_secret=WHSEC)
    harness = Harness("redis", pw, settings, redis_client)
    redis_client.set(keys.notify_on(), 1)
    redis_client.xadd(keys.notices(), {"junk": "1"})
    run_id = harness.start_and_run(flows.one_choice, {})
    delivery = _delivered_by(harness, configured(settings)[0])
    try:
        wait_for(lambda: receiver.got, 10, "the pause's delivery")
        assert [b["data"]["runId"] for _, b in receiver.got] == [run_id]
        dead = dead_letters(pw)
        assert [(d.channel, d.kind) for d in dead] == [("-", "")] and "notification without" in dead[0].error
        wait_for(lambda: not redis_client.xlen(keys.notices()), 10, "both entries to leave the stream")
    finally:
        delivery.stop()
        receiver.stop()


def test_notification_settings_refuse_what_cannot_work_with_a_clear_error() -> None:
    """A webhook without a secret, a route whose selector is not workflow, audience or tenant, and a
    retry bound of 0 are refused, each naming the setting; routes from the environment split on spaces."""
    import pytest

    from parkway import ConfigError, Settings
    from parkway.channels import configured

    with pytest.raises(ConfigError, match="PARKWAY_WEBHOOK_SECRET"):
        Settings(webhook_url="https://h.example/hook")
    with pytest.raises(ConfigError, match="PARKWAY_WEBHOOK_ROUTES"):
        configured(Settings(webhook_secret="whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
                            webhook_routes="team:ops=https://h.example/hook"))
    with pytest.raises(ConfigError, match="PARKWAY_NOTIFY_RETRY_S"):
        Settings(notify_retry_s=0)
    env = Settings.from_env({"PARKWAY_SMTP_HOST": "mail", "PARKWAY_SMTP_TO": "a@x.example audience:fin=b@x.example"})
    channel = configured(env)[0]
    assert channel.name == "email" and env.smtp_to == ("a@x.example", "audience:fin=b@x.example")


def test_notifications_stop_being_owed_once_no_worker_delivers_them(pw: Any, redis_client: Any, redis_url: str) -> None:
    """``pw:notify`` (what makes every pause write a notification) lives only while a worker's delivery
    renews it: with the last delivering worker gone, it lapses and pauses stop writing entries nobody
    reads; while one runs, its beat keeps it."""
    from parkway import Settings
    from parkway.adapters.redis.connection.connection import connect
    from parkway.channels import Delivery, configured, viewer
    from parkway.channels.delivery import Policy
    from tests.conftest import SECRET
    from tests.procs import wait_for
    from tests.test_notifications import WHSEC, Receiver

    receiver = Receiver().start()
    settings = Settings(redis_url=redis_url, secret=SECRET, webhook_url=receiver.url, webhook_secret=WHSEC)
    policy = Policy(claim_s=0.3)  # a beat every 0.1 s; owed for 1 s past the last
    assert policy.owed_s == 1
    delivery = Delivery(connect(redis_url), configured(settings), viewer(pw, "https://pw.example"), "test", policy)
    delivery.start()
    try:
        assert 0 < redis_client.ttl(keys.notify_on()) <= 1
        time.sleep(1.5)
        assert redis_client.exists(keys.notify_on()), "a delivering worker's beat renews it"
    finally:
        delivery.stop()
        receiver.stop()
    wait_for(lambda: not redis_client.exists(keys.notify_on()), 5, "pw:notify to lapse")
    before = redis_client.xlen(keys.notices()) if redis_client.exists(keys.notices()) else 0
    harness = Harness("redis", pw, settings, redis_client)
    harness.start_and_run(flows.one_choice, {})
    after = redis_client.xlen(keys.notices()) if redis_client.exists(keys.notices()) else 0
    assert after == before
