"""A backup taken the way docs/guides/backups.md says (BGSAVE under load, copy dump.rdb) and
restored into a fresh redis-server: what was parked is back and answerable, what was answered after
the backup reads waiting and takes the same answer again, and nothing runs twice."""

from __future__ import annotations

import shutil
import threading
import time
from collections import Counter
from pathlib import Path

import pytest
import redis

from parkway import Parkway, ResumeOutcome, RunNotFound, RunStatus, Settings
from tests import flows_backup
from tests.conftest import SECRET, Closing
from tests.procs import RedisServer, Worker, wait_for

pytestmark = pytest.mark.slow

PRODUCTION = ["--appendfsync", "everysec", "--save", "3600 1 300 100 60 10000"]
"""compose.yaml's persistence: AOF fsynced every second, and Redis's default RDB snapshots"""


def _client(url: str) -> Parkway:
    return Parkway(Settings(redis_url=url, secret=SECRET, lease_ms=1000))


def _token(pw: Parkway, run_id: str) -> str:
    (item,) = pw.list_interrupts(run_id=run_id, include_tokens=True).items
    assert item.resume_token
    return item.resume_token


def _start(pw: Parkway, tag: str) -> str:
    return pw.start(flows_backup.ledgered, {"tag": tag})


def _backup(r: redis.Redis, server: RedisServer, into: Path) -> Path:
    """BGSAVE, wait until that very save is done, copy dump.rdb: the guide's backup."""
    before = int(r.lastsave().timestamp())
    time.sleep(1.05 - time.time() % 1)  # LASTSAVE counts seconds: make this save's stamp a new one
    r.bgsave()
    wait_for(lambda: int(r.lastsave().timestamp()) > before and not r.info("persistence")["rdb_bgsave_in_progress"],
             10, "BGSAVE to finish")
    assert r.info("persistence")["rdb_last_bgsave_status"] == "ok"
    into.mkdir()
    return Path(shutil.copy(server.dir / "dump.rdb", into / "dump.rdb"))


def _ledger(path: Path) -> Counter[tuple[str, str]]:
    """(tag, what) -> how many times the node wrote it."""
    lines = path.read_text().splitlines() if path.exists() else []
    return Counter((line.split(" ", 1)[0], line.split(" ", 1)[1]) for line in lines)


class Load:
    """A client of its own starting runs and answering the ones that wait, until stopped."""

    def __init__(self, url: str) -> None:
        self.pw, self.stopped = _client(url), threading.Event()
        self.runs: list[str] = []
        self.thread = threading.Thread(target=self._go)
        self.errors: list[BaseException] = []

    def _go(self) -> None:
        try:
            i = 0
            while not self.stopped.is_set():
                self.runs.append(_start(self.pw, f"load{i}"))
                i += 1
                for run_id in self.runs[-3:-2]:
                    if self.pw.get_run(run_id).status is RunStatus.WAITING:
                        self.pw.resume(_token(self.pw, run_id), selected="red")
                time.sleep(0.02)
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            self.errors.append(exc)

    def __enter__(self) -> Load:
        self.thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stopped.set()
        self.thread.join(10)
        self.pw.close()


def test_a_backup_taken_under_load_restores_every_parked_run_and_runs_nothing_twice(
    tmp_path: Path, closing: Closing
) -> None:
    """BGSAVE under load (both workers inside a node, a client starting and answering runs), dump.rdb
    copied, restored into a fresh redis-server: runs completed before the backup stay completed, runs
    parked at it are back and answerable, runs answered after it read waiting and accept the same
    answer again with the same token, runs whose answer the backup holds finish from the restored
    queue (their jobs twice in it, run once), attempts running at the backup are replayed once, the
    functions came with the RDB, and the node's own ledger shows each answer handled exactly once in
    the restored world."""
    live = RedisServer(tmp_path / "live", extra=PRODUCTION)
    live.dir.mkdir()
    live.start()
    r = closing(redis.Redis.from_url(live.url))
    assert r.config_get("appendfsync") == {"appendfsync": "everysec"} and r.config_get("save")["save"]
    pw = closing(_client(live.url))
    live_ledger = tmp_path / "ledger-live"
    env = {"PARKWAY_LEDGER": str(live_ledger)}
    workers = [Worker(live.url, SECRET, env=env) for _ in range(2)]
    try:
        groups = {g: {f"{g}{i}": _start(pw, f"{g}{i}") for i in range(n)}
                  for g, n in (("done", 4), ("parked", 6), ("later", 6), ("held", 4))}
        every = {tag: run_id for group in groups.values() for tag, run_id in group.items()}
        wait_for(lambda: all(pw.get_run(x).status is RunStatus.WAITING for x in every.values()), 30, "parked runs")
        tokens = {tag: _token(pw, run_id) for tag, run_id in every.items()}
        for tag in groups["done"]:
            assert pw.resume(tokens[tag], selected="red").accepted
        wait_for(lambda: all(pw.get_run(x).status is RunStatus.COMPLETED for x in groups["done"].values()),
                 30, "runs answered before the backup to complete")
        gate = tmp_path / "gate"
        gate.touch()
        busy = {f"busy{i}": pw.start(flows_backup.busy, {"tag": f"busy{i}", "gate": str(gate)}) for i in range(2)}
        wait_for(lambda: all(_ledger(live_ledger)[t, "began"] for t in busy), 30, "both workers to be busy")
        with Load(live.url) as load:
            time.sleep(0.3)
            for tag in groups["held"]:  # no worker free: these answers are in the backup, their jobs queued
                assert pw.resume(tokens[tag], selected="blue").accepted
            backup = _backup(r, live, tmp_path / "backup")
            gate.unlink()
            for tag in groups["later"]:
                assert pw.resume(tokens[tag], selected="blue").accepted
            newer = [_start(pw, f"new{i}") for i in range(3)]
            time.sleep(0.3)
        assert load.errors == []
        answered_tags = [*groups["held"], *groups["later"]]
        answered_live = [every[t] for t in answered_tags] + list(busy.values())
        wait_for(lambda: all(pw.get_run(x).status is RunStatus.COMPLETED for x in answered_live),
                 30, "the live world to finish the runs answered around the backup")
    finally:
        logs = [w.stop() for w in workers]
        pw.close()  # while its server answers (closing takes its announcement away); again at teardown: a no-op
        live.kill()
    assert not any("Traceback" in log for log in logs), logs
    in_live = _ledger(live_ledger)
    assert {t: in_live[t, "answered blue"] for t in answered_tags} == dict.fromkeys(answered_tags, 1)

    # Redis's own trap: a server started with --appendonly yes and no AOF ignores dump.rdb
    naive = RedisServer(tmp_path / "naive", extra=PRODUCTION)
    naive.dir.mkdir()
    shutil.copy(backup, naive.dir / "dump.rdb")
    naive.start()
    try:
        with redis.Redis(port=naive.port) as n:
            assert n.dbsize() == 0
    finally:
        naive.stop()

    # the guide's restore: load the RDB with AOF off, then turn AOF on (it rewrites from memory)
    restored = RedisServer(tmp_path / "restored", appendonly=False, extra=PRODUCTION)
    restored.dir.mkdir()
    shutil.copy(backup, restored.dir / "dump.rdb")
    restored.start()
    try:
        r2 = closing(redis.Redis.from_url(restored.url))
        libraries = r2.function_list(library="pw_*")
        assert libraries, "the RDB carried no parkway functions"
        assert r2.config_set("appendonly", "yes")
        wait_for(lambda: r2.info("persistence")["aof_rewrite_in_progress"] == 0
                 and r2.info("persistence")["aof_enabled"] == 1, 10, "the AOF to be written")
        restored.stop()  # and from here on it is the production shape: a restart reads the AOF
        restored.appendonly = True
        restored.start()
        assert len(r2.function_list(library="pw_*")) == len(libraries)
        pw2 = closing(_client(restored.url))
        status = {tag: pw2.get_run(run_id).status for tag, run_id in every.items()}
        assert {status[t] for t in groups["done"]} == {RunStatus.COMPLETED}
        assert {status[t] for t in groups["parked"]} == {RunStatus.WAITING}
        assert {status[t] for t in groups["later"]} == {RunStatus.WAITING}
        assert {t: _token(pw2, every[t]) for t in groups["later"]} == {t: tokens[t] for t in groups["later"]}
        assert {status[t] for t in groups["held"]} == {RunStatus.QUEUED}
        assert {pw2.get_run(x).status for x in busy.values()} == {RunStatus.RUNNING}  # lease and all
        for run_id in newer:
            with pytest.raises(RunNotFound):
                pw2.get_run(run_id)
        queue = "rq:queue:parkway"
        queued = r2.lrange(queue, 0, -1)
        assert len(queued) >= len(groups["held"])
        r2.rpush(queue, *queued)  # each job the backup holds, twice: fences let one copy run
        loaded = [x for x in load.runs if _exists(pw2, x)]
        assert loaded, "the backup holds none of the runs started under load"
        open_at_restore = {x for x in loaded if not pw2.get_run(x).status.finished}
        env2 = {"PARKWAY_LEDGER": str(tmp_path / "ledger-restored"), "PARKWAY_LEASE_MS": "1000"}
        workers2 = [Worker(restored.url, SECRET, env=env2) for _ in range(2)]
        try:
            for tag in groups["parked"]:
                assert pw2.resume(tokens[tag], selected="red").outcome is ResumeOutcome.ACCEPTED
            for tag in groups["later"]:  # the same answer, the same token, sent again
                assert pw2.resume(tokens[tag], selected="blue").outcome is ResumeOutcome.ACCEPTED
            for tag in groups["held"]:  # the backup holds this answer: sent again it is a retry, another is late
                assert pw2.resume(tokens[tag], selected="blue").outcome is ResumeOutcome.ACCEPTED
                assert pw2.resume(tokens[tag], selected="red").outcome is ResumeOutcome.ALREADY_RESOLVED
            for run_id in loaded:
                if pw2.wait(run_id, timeout=20).status is RunStatus.WAITING:
                    assert pw2.resume(_token(pw2, run_id), selected="red").accepted
            rest = [every[t] for t in every if t not in groups["done"]] + loaded + list(busy.values())
            wait_for(lambda: all(pw2.get_run(x).status is RunStatus.COMPLETED for x in rest), 30,
                     "every restored run to complete")
            wait_for(lambda: r2.llen(queue) == 0, 10, "the workers to take every copy of every job")
        finally:
            logs2 = [w.stop() for w in workers2]
        assert not any("Traceback" in log for log in logs2), logs2
        # held and later ran their answer in the live world too: a restore rewinds, it does not dedupe
        ledger = _ledger(tmp_path / "ledger-restored")
        answered = Counter(tag for tag, what in ledger.elements() if what.startswith("answered"))
        expected = {tag: 1 for tag in every if tag not in groups["done"]}
        expected |= {f"load{load.runs.index(x)}": 1 for x in open_at_restore}
        assert dict(answered) == expected
        # an attempt running at the backup is replayed in the restored world, once
        assert {t: ledger[t, "passed"] for t in busy} == dict.fromkeys(busy, 1)
        for tag in groups["later"]:
            assert pw2.get_run(every[tag]).output == {"tag": tag, "color": "blue"}
        for tag in groups["done"]:
            assert pw2.get_run(every[tag]).output == {"tag": tag, "color": "red"}
    finally:
        restored.stop()


def _exists(pw: Parkway, run_id: str) -> bool:
    try:
        pw.get_run(run_id)
    except RunNotFound:
        return False
    return True
