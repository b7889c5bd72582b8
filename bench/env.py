"""What every benchmark shares: a private redis-server, process CPU, timing statistics, machine facts."""

from __future__ import annotations

import json
import os
import platform
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

ROOT = Path(__file__).absolute().parent.parent  # the project folder: tasks and workers run with this cwd
SECRET = "bench-secret-" + "x" * 40
CLK_TCK = os.sysconf("SC_CLK_TCK")
RESULT_MARK = "BENCH-RESULT "


# --- a private redis-server ----------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class RedisServer:
    """A redis-server of our own: no persistence, in a temp dir, stopped by ``stop()``."""

    port: int = 0
    proc: subprocess.Popen[bytes] | None = None
    workdir: str = ""

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> RedisServer:
        exe = shutil.which("redis-server")
        if exe is None:
            raise SystemExit("bench: redis-server is not on PATH")
        self.workdir = tempfile.mkdtemp(prefix="pwbench-redis-")
        self.port = free_port()
        self.proc = subprocess.Popen(
            [
                exe,
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                self.workdir,
                "--daemonize",
                "no",
                "--loglevel",
                "warning",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            cwd=self.workdir,
        )
        import redis

        deadline = time.monotonic() + 10
        while True:
            try:
                redis.Redis(port=self.port).ping()
                return self
            except redis.ConnectionError:
                if time.monotonic() > deadline or self.proc.poll() is not None:
                    raise SystemExit("bench: redis-server did not start") from None
                time.sleep(0.05)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)


def flush(client: Any, timeout: float = 300) -> None:
    """Empty the benchmark's own server without blocking it: FLUSHALL ASYNC, then wait until the
    background free is done (a synchronous flush of millions of keys stalls every client for
    seconds, and memory readings need the free to be over).

    Refuses a server that holds keys in a database other than the client's: that is someone else's
    Redis (a figure module run on a shared server's URL would wipe, say, the test suite's database
    under it). ``python -m bench`` starts a redis-server of its own."""
    own = f"db{client.connection_pool.connection_kwargs.get('db', 0)}"
    others = sorted(name for name in client.info("keyspace") if name != own)
    if others:
        raise RuntimeError(
            f"refusing to empty a redis-server that holds other databases ({', '.join(others)}): the benchmark "
            "needs a redis-server of its own (python -m bench starts one)"
        )
    client.flushall(asynchronous=True)
    deadline = time.monotonic() + timeout
    while int(client.info("memory").get("lazyfree_pending_objects", 0)) > 0:
        if time.monotonic() > deadline:
            raise RuntimeError("redis-server is still freeing the flushed keys")
        time.sleep(0.1)


def redis_cpu(client: Any) -> float:
    """Seconds of CPU the redis-server process has used (INFO cpu, main and other threads)."""
    info = client.info("cpu")
    return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])


def redis_version(client: Any) -> str:
    return str(client.info("server")["redis_version"])


# --- process CPU -------------------------------------------------------------------


def proc_cpu(pid: int) -> float:
    """utime + stime of a process in seconds, from /proc (10 ms ticks)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def self_cpu() -> float:
    t = os.times()
    return t.user + t.system


# --- worker processes --------------------------------------------------------------


@dataclass
class Workers:
    """Worker subprocesses (cwd = project root so ``bench`` imports), stopped by ``stop()``."""

    argv: Sequence[str]
    count: int = 1
    env: dict[str, str] = field(default_factory=dict)
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def start(self, client: Any, registered_key: str = "rq:workers", timeout: float = 30) -> Workers:
        env = {**os.environ, **self.env, "PYTHONPATH": str(ROOT)}
        before = client.scard(registered_key)
        for _ in range(self.count):
            self.procs.append(subprocess.Popen(list(self.argv), cwd=ROOT, env=env, stdin=subprocess.DEVNULL))
        deadline = time.monotonic() + timeout
        while client.scard(registered_key) < before + self.count:
            if time.monotonic() > deadline or any(p.poll() is not None for p in self.procs):
                self.stop()
                raise RuntimeError(f"workers did not start: {' '.join(self.argv)}")
            time.sleep(0.05)
        return self

    def cpu(self) -> float:
        return sum(proc_cpu(p.pid) for p in self.procs if p.poll() is None)

    def stop(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)  # RQ: warm shutdown
        deadline = time.monotonic() + 15
        for p in self.procs:
            try:
                p.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        self.procs.clear()


def parkway_worker_argv(url: str) -> list[str]:
    return [sys.executable, "-m", "parkway.cli", "worker", "--redis-url", url]


def parkway_worker_env() -> dict[str, str]:
    return {"PARKWAY_SECRET": SECRET}


# --- statistics -------------------------------------------------------------------


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100)."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    rank = max(1, min(len(ordered), int(round(q / 100 * len(ordered) + 0.5))))
    return ordered[rank - 1]


def spread(values: Sequence[float]) -> dict[str, float]:
    """median / min / max over runs."""
    return {"median": statistics.median(values), "min": min(values), "max": max(values), "n": len(values)}


# --- subprocess task protocol -----------------------------------------------------


def emit_result(result: dict[str, Any]) -> None:
    sys.stdout.write(RESULT_MARK + json.dumps(result) + "\n")
    sys.stdout.flush()


def run_task(module: str, params: dict[str, Any], timeout: float) -> dict[str, Any]:
    """Run ``python -m bench.<module> '<json params>'`` in its own process group; return its result.

    The task prints one ``BENCH-RESULT {json}`` line. On timeout the whole group (the task
    and the workers it started) is killed and an error is returned.
    """
    cmd = [sys.executable, "-m", f"bench.{module}", json.dumps(params)]
    proc = subprocess.Popen(
        cmd,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        return {"error": f"timed out after {timeout:.0f}s", "stderr": err[-2000:]}
    except BaseException:  # Ctrl-C: take the task and its workers down too
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        raise
    for line in reversed(out.splitlines()):
        if line.startswith(RESULT_MARK):
            return dict(json.loads(line[len(RESULT_MARK) :]))
    return {"error": f"exit {proc.returncode}, no result", "stderr": (err or "")[-3000:]}


# --- machine facts ----------------------------------------------------------------


def version_of(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "not installed"


def machine(redis_client: Any) -> dict[str, str]:
    cpu = platform.processor() or "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = ""
    try:
        kb = int(Path("/proc/meminfo").read_text().split()[1])
        mem = f"{kb / 1024 / 1024:.1f} GiB"
    except (OSError, ValueError, IndexError):
        pass
    return {
        "cpu": cpu,
        "cores": str(os.cpu_count()),
        "memory": mem,
        "kernel": platform.release(),
        "python": platform.python_version(),
        "redis-server": redis_version(redis_client),
        "rq": version_of("rq"),
        "redis-py": version_of("redis"),
        "hiredis": version_of("hiredis"),
        "msgpack": version_of("msgpack"),
        "parkway": version_of("parkway"),
        "langgraph": version_of("langgraph"),
        "langgraph-checkpoint-sqlite": version_of("langgraph-checkpoint-sqlite"),
        "dbos": version_of("dbos"),
        "psycopg": version_of("psycopg"),
    }
