"""A parked run's hash in format 4 (issue 36, move 4): written only once every live process reads format
4, without the fields a reader can make again (``paused``, the spent ``fresh``, the heads of its folded
events, whole times), and read back the same as format 3's; a reader of formats up to 3 refuses it."""

from __future__ import annotations

from typing import Any

import pytest
import redis

from bench.flows import cycle
from parkway.adapters.redis import formats, keys, layout
from parkway.adapters.redis.layout import records
from parkway.runtime.clock import now_ms
from parkway.runtime.errors import FormatTooNew
from parkway.runtime.protocol import RunStatus
from parkway.runtime.store import InterruptRecord, StoredEvent
from tests import flows, flows_model
from tests.conftest import Harness


def _client(harness: Harness) -> Any:
    return harness.pw.store.client  # type: ignore[attr-defined]


def _writing(harness: Harness, fmt: int) -> None:
    """Make the store write ``fmt``: a live format-3-only reader holds it at 3; without one it writes 4."""
    client = _client(harness)
    if fmt == 3:
        client.hset(keys.readers(), "format-3-worker", formats.announcement((1, 2, 3), "worker", now_ms() + 60_000))
    else:
        client.hdel(keys.readers(), "format-3-worker")
    assert harness.pw.store.formats.refresh().writes == fmt  # type: ignore[attr-defined]


def _shape(events: list[StoredEvent]) -> list[tuple[str, dict[str, Any]]]:
    """Events without what differs from one run to the next (ids, times, request ids, expiries)."""
    out = []
    for e in events:
        data = {k: v for k, v in e.data.items() if k not in ("requestId", "expiresAt", "createdAt", "input")}
        out.append((e.type, data))
    return out


def test_a_parked_run_of_format_4_holds_no_spare_field_and_reads_back_as_format_3s(harness: Harness) -> None:
    """The same run parked in format 3 and in format 4: format 4's hash has no ``paused``, no ``fresh``,
    ``updated`` in ms after ``cr``, its folded node.started and interrupt event without the head the hash
    makes again, and its record trimmed; get_run, its interrupt and its events read the same as format
    3's, before and after the answer (the resume puts the events back in the stream with their ids and
    data), and both end."""
    client = _client(harness)
    parked = {}
    for fmt in (3, 4):
        _writing(harness, fmt)
        parked[fmt] = harness.start_and_run(flows.two_questions)
    old, new = (client.hgetall(keys.run(parked[f])) for f in (3, 4))
    assert old[b"fmt"] == b"3" and new[b"fmt"] == b"4"
    assert old[b"paused"].startswith(b"0 ") and b"paused" not in new
    assert b"fresh" not in new and b"fresh" not in old  # spent: deleted in either format
    assert int(old[b"updated"]) > layout.RELATIVE_MS and int(new[b"updated"]) < layout.RELATIVE_MS
    assert int(new[b"~0"].split(b" ")[0]) < layout.RELATIVE_MS <= int(old[b"~0"].split(b" ")[0].split(b"-")[0])
    assert [new[f][new[f].index(b" ") + 2] for f in (b"~1", b"~2")] == [
        layout.FOLDED_TYPES.index("node.started") + 129, layout.FOLDED_TYPES.index("interrupt") + 129]
    if harness.kind == "redis":  # (the embedded worker's gate decides apart from the client's, within REFRESH_S)
        assert len(b"".join(new[f] for f in new if f[:1] == b"r" and f[1:].isdigit())) < len(
            b"".join(old[f] for f in old if f[:1] == b"r" and f[1:].isdigit()))
    runs = {f: harness.pw.store.get_run(parked[f], 0) for f in (3, 4)}
    for f in (3, 4):
        run = runs[f]
        assert run is not None and run.status is RunStatus.WAITING and run.paused_version is not None
        assert run.created_at <= run.updated_at <= now_ms()
    assert runs[3].paused_version == runs[4].paused_version  # type: ignore[union-attr]
    interrupts = {f: layout.latest_record(parked[f], client.hgetall(keys.run(parked[f]))) for f in (3, 4)}
    assert all(isinstance(i, InterruptRecord) for i in interrupts.values())
    first, second = interrupts[3], interrupts[4]
    assert first is not None and second is not None
    assert (first.request, first.version, first.capture, first.expires_at - first.created_at) == (
        second.request, second.version, second.capture, second.expires_at - second.created_at)
    for f in (3, 4):  # the streams park left for FOLD_WAKE_MS gone: the events are the hash's alone
        client.delete(keys.events(parked[f]))
    events = {f: harness.pw.store.read_events(parked[f], "0", None, 100) for f in (3, 4)}
    assert _shape(events[3]) == _shape(events[4])
    for f in (3, 4):  # the second question: a replay's pause (its node.started says replay)
        assert harness.pw.resume(harness.token(parked[f]), value="Ada").accepted
        harness.run_jobs()
    assert _shape(harness.pw.store.read_events(parked[3], "0", None, 100)) == _shape(
        harness.pw.store.read_events(parked[4], "0", None, 100))
    for f in (3, 4):
        kept = harness.pw.store.read_events(parked[f], "0", None, 100)
        assert kept[: len(events[f])] == events[f]  # put back by the resume's script, ids and data
        assert harness.pw.resume(harness.token(parked[f]), selected="red").accepted
        harness.run_jobs()
        assert harness.pw.wait(parked[f], timeout=10).status is RunStatus.COMPLETED


def test_the_version_a_format_4_run_paused_under_reaches_its_replay_without_paused(harness: Harness) -> None:
    """A format-4 run keeps no ``paused``: the begin before its replay carries its latest record, whose
    step and version the worker reads: paused under v1 and replayed under v2, the replay logs the
    mismatch with both (as ``paused`` said it in format 3)."""
    from structlog.testing import capture_logs

    _writing(harness, 4)
    run_id = harness.start_and_run(flows_model.versioned)
    assert not _client(harness).hexists(keys.run(run_id), "paused")
    run = harness.pw.store.get_run(run_id, 0)
    assert run is not None and run.paused_version == "v1"
    flows_model.versioned.version = "v2"
    try:
        with capture_logs() as logs:
            assert harness.pw.resume(harness.token(run_id), selected="red").accepted
            harness.run_jobs()
            harness.pw.wait(run_id, timeout=10)
    finally:
        flows_model.versioned.version = "v1"
    seen = [(e["at"], e["recorded"], e["current"]) for e in logs if e["event"] == "version_mismatch"]
    assert ("replay", "v1", "v2") in seen, logs


def test_a_reader_of_formats_up_to_3_refuses_a_format_4_run_and_leaves_it(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A process that reads formats 1-3 (this code's predecessor) meets a parked format-4 run: get_run
    raises FormatTooNew naming the run, 4 and 3, and the hash is as it was."""
    _writing(harness, 4)
    run_id = harness.start_and_run(flows.one_choice)
    before = _client(harness).hgetall(keys.run(run_id))
    monkeypatch.setattr(records, "READS_FORMATS", (1, 2, 3))
    with pytest.raises(FormatTooNew) as refused:
        harness.pw.get_run(run_id)
    assert (refused.value.found, refused.value.reads, refused.value.record) == (4, 3, f"run {run_id}")
    assert _client(harness).hgetall(keys.run(run_id)) == before


def test_a_trimmed_record_reads_back_whole_in_every_reader(harness: Harness) -> None:
    """An interrupt's record written trimmed (no trailing nils, the default capture, maxLength or meta,
    its expiry after its creation) reads back equal to the record written whole."""
    _writing(harness, 4)
    run_id = harness.start_and_run(flows.one_choice)
    record = layout.latest_record(run_id, _client(harness).hgetall(keys.run(run_id)))
    assert record is not None
    whole, trimmed = records.interrupt_to_blob(record), records.interrupt_to_blob(record, trimmed=True)
    assert len(trimmed) < len(whole)
    for blob in (whole, trimmed):
        read = records.interrupt_from_blob(run_id, record.workflow, record.token_hash, blob, record.request_id,
                                           record.ref)
        assert read == record


@pytest.mark.parametrize("harness", ["redis"], indirect=True)
def test_a_parked_cycle_run_hash_takes_jemallocs_640_byte_class(harness: Harness) -> None:
    """A run of bench.flows:cycle (a ~200-byte choice request) parked in format 4: its hash is a listpack in
    the 640-byte class (MEMORY USAGE: the class plus the key's own object, sds and dict entry); in format 3
    it took the 768-byte class."""
    client: redis.Redis = _client(harness)
    overhead = 16 + 48 + 24  # the value's object, the key's sds (48-byte class), the key's dict entry
    for fmt, limit in ((3, 768), (4, 640)):
        _writing(harness, fmt)
        run_id = harness.start_and_run(cycle)
        assert client.object("encoding", keys.run(run_id)) == b"listpack"
        assert limit - 128 + overhead < client.memory_usage(keys.run(run_id), samples=0) <= limit + overhead
