"""RPO and RTO of the production guide's persistence (docs/guides/backups.md shows the figures).

``python -m bench.restore '{"rpo_rate": 500, "rpo_seconds": 5, "rto_parked": 10000}'``

RPO (``rpo``): a redis-server as compose.yaml runs it (AOF, ``appendfsync everysec``, default RDB
snapshots) holds parked runs; one client answers them at ``rpo_rate`` a second, noting when each
answer was acknowledged (``accepted``); after ``rpo_seconds`` the server is SIGKILLed and started
again from its AOF. An acknowledged answer is lost when its run reads ``waiting`` again; the window
is how long before the kill the oldest lost answer was acknowledged.

RTO (``rto``): ``rto_parked`` runs parked, BGSAVE, dump.rdb copied into an empty directory, the
server gone. Then the guide's restore, timed: a fresh redis-server on the copy with AOF off (load),
``CONFIG SET appendonly yes``, one ``parkway worker`` started, one parked run answered, until that
run completes. Runs are parked with ``bench.populate.bulk_park`` (parkway's own scripts, no
workers), so the dataset is what workers would have written.
"""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from .env import Workers, emit_result, free_port, parkway_worker_argv, parkway_worker_env
from .flows import ANSWER
from .populate import bulk_park, client

PRODUCTION = ["--appendfsync", "everysec", "--save", "3600 1 300 100 60 10000"]


class Server:
    """A redis-server in ``directory`` on a port of its own, started and killed on demand."""

    def __init__(self, directory: Path, *, appendonly: bool) -> None:
        self.dir, self.port, self.appendonly = directory, free_port(), appendonly
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def spawn(self) -> None:
        args = ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--dir", str(self.dir),
                "--appendonly", "yes" if self.appendonly else "no", *PRODUCTION,
                "--logfile", str(self.dir / "redis.log")]
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def ready(self, timeout: float = 120) -> None:
        """Wait until the server answers with its dataset loaded."""
        import redis

        deadline = time.monotonic() + timeout
        with redis.Redis(port=self.port) as r:
            while True:
                try:
                    if not int(r.info("persistence")["loading"]):
                        return
                except (redis.ConnectionError, redis.exceptions.BusyLoadingError):
                    if time.monotonic() > deadline:
                        raise
                time.sleep(0.005)

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(30)


def _tokens(pw: Any) -> dict[str, str]:
    """run id -> resume token of every pending interrupt, a listing page at a time."""
    found: dict[str, str] = {}
    cursor = None
    while True:
        page = pw.list_interrupts(limit=1000, include_tokens=True, cursor=cursor)
        found |= {item.run_id: item.resume_token for item in page.items}
        cursor = page.next_cursor
        if not cursor:
            return found


def rpo(rate: float, seconds: float) -> dict[str, Any]:
    workdir = Path(tempfile.mkdtemp(prefix="pwbench-rpo-"))
    server = Server(workdir, appendonly=True)
    server.spawn()
    server.ready()
    pw = client(server.url)
    try:
        bulk_park(pw, int(rate * seconds * 1.5) + 100)
        tokens = _tokens(pw)
        time.sleep(2)  # the parked runs are on disk: only answers can be lost
        acked: list[tuple[float, str]] = []
        stop = threading.Event()

        def answer() -> None:
            start = time.monotonic()
            for n, (run_id, token) in enumerate(tokens.items()):
                if stop.is_set():
                    return
                time.sleep(max(0.0, start + n / rate - time.monotonic()))
                try:
                    if pw.resume(token, selected=ANSWER).accepted:
                        acked.append((time.time(), run_id))
                except Exception:  # noqa: BLE001 - the server is gone: the run is over
                    return

        thread = threading.Thread(target=answer)
        thread.start()
        time.sleep(seconds)
        stop.set()
        killed_at = time.time()
        server.kill()
        thread.join(30)
        before_kill = [(at, run_id) for at, run_id in acked if at < killed_at]
        server.spawn()
        server.ready()
        lost = [(at, run_id) for at, run_id in before_kill if pw.get_run(run_id).status.value == "waiting"]
        return {
            "rate_per_s": rate, "acked_before_kill": len(before_kill), "lost": len(lost),
            "lost_window_ms": round((killed_at - min(at for at, _ in lost)) * 1000) if lost else 0,
        }
    finally:
        pw.close()
        server.stop()
        shutil.rmtree(workdir, ignore_errors=True)


def rto(parked: int) -> dict[str, Any]:
    workdir = Path(tempfile.mkdtemp(prefix="pwbench-rto-"))
    (workdir / "live").mkdir()
    (workdir / "restored").mkdir()
    live = Server(workdir / "live", appendonly=True)
    live.spawn()
    live.ready()
    pw = client(live.url)
    try:
        bulk_park(pw, parked - 1)
        before = pw.store.client.lastsave()
        time.sleep(1.05)
        r = pw.store.client
        r.bgsave()
        while r.lastsave() == before or int(r.info("persistence")["rdb_bgsave_in_progress"]):
            time.sleep(0.05)
        rdb_bytes = (live.dir / "dump.rdb").stat().st_size
        shutil.copy(live.dir / "dump.rdb", workdir / "restored" / "dump.rdb")
    finally:
        pw.close()
        live.stop()
    restored = Server(workdir / "restored", appendonly=False)
    workers = Workers(parkway_worker_argv(""), env=parkway_worker_env())
    t0 = time.monotonic()
    restored.spawn()
    try:
        restored.ready()
        loaded = time.monotonic()
        pw = client(restored.url)
        pw.store.client.config_set("appendonly", "yes")
        workers.argv = parkway_worker_argv(restored.url)
        workers.start(pw.store.client)
        started = time.monotonic()
        page = pw.list_interrupts(limit=1)
        pw.resume(_tokens_of(pw, page.items[0].run_id), selected=ANSWER)
        done = pw.wait(page.items[0].run_id, timeout=60)
        completed = time.monotonic()
        listed = len(_tokens(pw))
        pw.close()
        return {
            "parked": parked, "rdb_bytes": rdb_bytes, "listed_after_restore": listed,
            "load_s": round(loaded - t0, 3), "worker_start_s": round(started - loaded, 3),
            "first_completion_s": round(completed - started, 3), "total_s": round(completed - t0, 3),
            "first_status": done.status.value,
        }
    finally:
        workers.stop()
        restored.stop()
        shutil.rmtree(workdir, ignore_errors=True)


def _tokens_of(pw: Any, run_id: str) -> str:
    (item,) = pw.list_interrupts(run_id=run_id, include_tokens=True).items
    return str(item.resume_token)


def main(params: dict[str, Any]) -> dict[str, Any]:
    """Both figures; ``"rpo_seconds": 0`` or ``"rto_parked": 0`` leaves one out."""
    out: dict[str, Any] = {}
    if float(params.get("rpo_seconds", 5)):
        out["rpo"] = rpo(float(params.get("rpo_rate", 500)), float(params.get("rpo_seconds", 5)))
    if int(params.get("rto_parked", 10_000)):
        out["rto"] = rto(int(params.get("rto_parked", 10_000)))
    return out


if __name__ == "__main__":
    emit_result(main(json.loads(sys.argv[1] if len(sys.argv) > 1 else "{}")))
