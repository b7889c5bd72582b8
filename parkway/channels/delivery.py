"""Delivering the notification stream: at least once, out of band, retried, then dead-lettered.

Every worker runs one :class:`Delivery` (a service of its own threads, started beside the
reconciler's: see ``parkway.channels.feature``). Its reading thread takes entries of
``keys.notices`` through the consumer group ``layout.NOTICE_GROUP``, so each entry is one worker's;
it also takes over the entries another consumer has held ``notify_claim_s`` without a sign of life
(XAUTOCLAIM: a worker killed mid-delivery loses nothing), and shows its own are alive (XCLAIM of
its own, which resets their idle time). For each entry it reads the interrupt once (the view: the
HTTP API's model plus links) and hands one send per target to each channel's own thread, so a
slow or absent receiver delays neither a job (another thread) nor another channel.

A channel's thread sends in order of due time, at most ``notify_rate`` a second; a failed send is
tried again after ``notify_backoff_s``, twice as long each time (up to a minute), until
``notify_retry_s`` past the entry's writing; then it goes to the dead letters (``keys.dead_notices``:
:func:`dead_letters`, ``parkway status``, ``parkway_notifications_dead``). An entry is acknowledged
and deleted once every send of it is delivered or dead. Sends are at least once: a worker killed
after a send and before the acknowledgement sends again, with the same ``webhook-id``.
"""

from __future__ import annotations

import heapq
import itertools
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import structlog

from ..adapters.redis import keys, layout
from ..runtime.errors import CorruptRecord
from .base import Channel, Notice

log = structlog.get_logger("parkway.channels")

MAX_BACKOFF_S = 60.0
READ_BLOCK_MS = 500
READ_COUNT = 100

View = Callable[[Notice], Mapping[str, Any]]


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def notice_of(entry_id: Any, fields: Mapping[Any, Any]) -> Notice:
    text = layout.notice_fields(fields)
    eid = _text(entry_id)
    return Notice(eid, layout.notice_id(text["q"], text["k"], text["x"]), text["k"], text["r"], text["q"],
                  text["w"], int(text["x"] or 0))


@dataclass(frozen=True)
class Policy:
    retry_s: float = 3600.0
    backoff_s: float = 1.0
    rate: float = 50.0
    claim_s: float = 30.0

    @property
    def owed_s(self) -> int:
        """How long ``pw:notify`` lives past the last sign of a delivering worker (each beat, every
        third of ``claim_s``, renews it): ten beats, so a deployment whose last worker with channels
        is gone stops writing notifications nobody reads within this, not never."""
        return max(1, round(self.claim_s * 10 / 3))


@dataclass(order=True)
class _Send:
    due: float
    seq: int
    notice: Notice = field(compare=False)
    view: Mapping[str, Any] = field(compare=False)
    target: str = field(compare=False)
    tries: int = field(default=0, compare=False)


class _Lane:
    """One channel's thread: its sends by due time, at its rate."""

    def __init__(self, channel: Channel, policy: Policy, done: Callable[[Notice, str, str | None], None]) -> None:
        self.channel, self.policy, self.done = channel, policy, done
        self.heap: list[_Send] = []
        self.cond = threading.Condition()
        self.seq = itertools.count()
        self.stopping = False
        self.next_slot = 0.0
        self.thread = threading.Thread(target=self._run, name=f"parkway-notify-{channel.name}", daemon=True)

    def put(self, notice: Notice, view: Mapping[str, Any], target: str) -> None:
        with self.cond:
            heapq.heappush(self.heap, _Send(time.monotonic(), next(self.seq), notice, view, target))
            self.cond.notify()

    def stop(self) -> None:
        with self.cond:
            self.stopping = True
            self.cond.notify()

    def _next(self) -> _Send | None:
        with self.cond:
            while not self.stopping:
                now = time.monotonic()
                if self.heap and self.heap[0].due <= now and self.next_slot <= now:
                    self.next_slot = max(self.next_slot, now) + 1.0 / self.policy.rate
                    return heapq.heappop(self.heap)
                wait = max(self.heap[0].due if self.heap else now + 1.0, self.next_slot) - now
                self.cond.wait(min(max(wait, 0.001), 1.0))
            return None

    def _run(self) -> None:
        while (send := self._next()) is not None:
            try:
                self.channel.send(send.notice, send.view, send.target)
            except Exception as exc:  # noqa: BLE001 - a receiver's failure is retried, never raised
                self._failed(send, exc)
            else:
                log.debug("notification_sent", channel=self.channel.name, event_id=send.notice.event_id)
                self.done(send.notice, self.channel.name, None)

    def _failed(self, send: _Send, exc: Exception) -> None:
        error = f"{type(exc).__name__}: {exc}"[:500]
        elapsed = time.time() - send.notice.written_ms / 1000
        wait = min(self.policy.backoff_s * 2 ** send.tries, MAX_BACKOFF_S)
        if elapsed + wait > self.policy.retry_s:
            log.warning("notification_dead", channel=self.channel.name, event_id=send.notice.event_id, error=error)
            self.done(send.notice, self.channel.name, error)
            return
        log.info("notification_retry", channel=self.channel.name, event_id=send.notice.event_id, error=error,
                 wait_s=wait)
        with self.cond:
            send.due, send.tries = time.monotonic() + wait, send.tries + 1
            heapq.heappush(self.heap, send)
            self.cond.notify()


class Delivery:
    """A worker's delivery of the notification stream to ``channels`` (see the module's docstring)."""

    def __init__(self, redis: Any, channels: Sequence[Channel], view: View, consumer: str, policy: Policy) -> None:
        self.redis, self.view, self.consumer, self.policy = redis, view, consumer, policy
        self.lanes = {c.name: _Lane(c, policy, self._done) for c in channels}
        self.channels = list(channels)
        self.open: dict[str, dict[str, Any]] = {}  # entry id -> {"left": sends not ended, "dead": [...]}
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, name="parkway-notify", daemon=True)

    def start(self) -> None:
        self._group()
        for lane in self.lanes.values():
            lane.thread.start()
        self.thread.start()

    def _group(self) -> None:
        """Say notifications are owed (for ``policy.owed_s``: each beat says it again), and make the
        stream and its group (if no worker has yet)."""
        self.redis.set(keys.notify_on(), 1, ex=self.policy.owed_s)
        try:
            self.redis.xgroup_create(keys.notices(), layout.NOTICE_GROUP, id="0", mkstream=True)
        except Exception as exc:  # noqa: BLE001 - BUSYGROUP: another worker made it
            if "BUSYGROUP" not in str(exc):
                raise

    def stop(self) -> None:
        self.stopping.set()
        for lane in self.lanes.values():
            lane.stop()

    def _run(self) -> None:
        claim_ms = int(self.policy.claim_s * 1000)
        last_beat = 0.0
        while not self.stopping.is_set():
            try:
                now = time.monotonic()
                if now - last_beat >= self.policy.claim_s / 3:
                    last_beat = now
                    self._beat(claim_ms)
                reply = self.redis.xreadgroup(layout.NOTICE_GROUP, self.consumer, {keys.notices(): ">"},
                                              count=READ_COUNT, block=READ_BLOCK_MS)
                for _, entries in reply or []:
                    self._take(entries)
            except Exception as exc:  # noqa: BLE001 - Redis away: try again, never stop the worker
                if self.stopping.is_set():
                    return
                log.warning("notification_read_error", error=f"{type(exc).__name__}: {exc}"[:300])
                self.stopping.wait(1.0)
                if "NOGROUP" in str(exc):  # the stream was deleted (a Redis emptied, restarted without data)
                    try:
                        self._group()
                    except Exception:  # noqa: BLE001 - Redis still away: the next pass tries again
                        pass

    def _beat(self, claim_ms: int) -> None:
        """Say notifications are still owed, keep this worker's entries its own (reset their idle
        time), then take over a lost worker's."""
        self.redis.set(keys.notify_on(), 1, ex=self.policy.owed_s)
        with self.lock:
            mine = list(self.open)
        if mine:
            self.redis.xclaim(keys.notices(), layout.NOTICE_GROUP, self.consumer, 0, mine, justid=True)
        start = "0-0"
        while True:
            reply = self.redis.xautoclaim(keys.notices(), layout.NOTICE_GROUP, self.consumer, claim_ms,
                                          start_id=start, count=READ_COUNT)
            start, entries = reply[0], reply[1]
            with self.lock:
                held = set(self.open)
            self._take([(i, f) for i, f in entries if f and _text(i) not in held])
            if start in (b"0-0", "0-0"):
                return

    def _take(self, entries: Sequence[tuple[Any, Mapping[Any, Any]]]) -> None:
        for entry_id, fields in entries:
            try:
                notice = notice_of(entry_id, fields)
            except CorruptRecord as exc:  # an entry that cannot be read is a dead letter at once
                self._bury(_text(entry_id), fields, "-", exc.message)
                self._end(_text(entry_id))
                continue
            try:
                view = self.view(notice)
                sends = [(c, t) for c in self.channels for t in c.targets(view, notice)]
            except Exception as exc:  # noqa: BLE001 - Redis away: left pending, taken again after claim_s
                log.warning("notification_view_error", event_id=notice.event_id,
                            error=f"{type(exc).__name__}: {exc}"[:300])
                continue
            if not sends:
                self._end(notice.entry_id)
                continue
            with self.lock:
                self.open[notice.entry_id] = {"left": len(sends), "fields": fields}
            for channel, target in sends:
                self.lanes[channel.name].put(notice, view, target)

    def _done(self, notice: Notice, channel: str, error: str | None) -> None:
        with self.lock:
            held = self.open.get(notice.entry_id)
            if held is None:
                return
            held["left"] -= 1
            ended = held["left"] == 0
            if ended:
                del self.open[notice.entry_id]
        if error is not None:
            self._bury(notice.entry_id, held["fields"], channel, error)
        if ended:
            self._end(notice.entry_id)

    def _bury(self, entry_id: str, fields: Mapping[Any, Any], channel: str, error: str) -> None:
        try:
            self.redis.xadd(keys.dead_notices(), {**dict(fields), "id": entry_id, "ch": channel, "err": error},
                            maxlen=keys.NOTICES_MAXLEN, approximate=True)
        except Exception as exc:  # noqa: BLE001 - the entry stays pending: taken over and tried again
            log.warning("notification_bury_error", error=str(exc)[:300])

    def _end(self, entry_id: str) -> None:
        try:
            pipe = self.redis.pipeline(transaction=True)
            pipe.xack(keys.notices(), layout.NOTICE_GROUP, entry_id)
            pipe.xdel(keys.notices(), entry_id)
            pipe.execute()
        except Exception as exc:  # noqa: BLE001 - left pending: delivered again (at least once)
            log.warning("notification_ack_error", error=str(exc)[:300])


@dataclass(frozen=True)
class DeadLetter:
    """A notification given up on: its event, the channel and the last error."""

    entry_id: str
    event_id: str
    kind: str
    run_id: str
    request_id: str
    workflow: str
    channel: str
    error: str


def dead_letters(source: Any, count: int = 100) -> list[DeadLetter]:
    """The newest ``count`` dead letters, newest first; ``source`` is a ``Parkway`` client or a redis
    client of its Redis."""
    redis = source.store.client if hasattr(source, "store") else source
    out = []
    for _, fields in redis.xrevrange(keys.dead_notices(), count=count):
        text = {_text(k): _text(v) for k, v in fields.items()}
        kind, request_id = text.get("k", ""), text.get("q", "")  # an unreadable entry is buried as it was
        out.append(DeadLetter(text.get("id", ""), layout.notice_id(request_id, kind, text.get("x", "")), kind,
                              text.get("r", ""), request_id, text.get("w", ""), text.get("ch", ""),
                              text.get("err", "")))
    return out


def dead_count(redis: Any) -> int:
    return int(redis.xlen(keys.dead_notices()))
