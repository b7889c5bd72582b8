"""Real processes for tests: a private redis-server (restartable, with AOF) and parkway workers."""

from __future__ import annotations

import http.client
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlsplit

import redis

ROOT = Path(__file__).resolve().parent.parent
WORKFLOWS = ",".join(f"tests.{path.stem}" for path in sorted((ROOT / "tests").glob("*flows*.py")))
"""the test servers' PARKWAY_WORKFLOWS: every module of tests that holds workflows, each by name (a
package listed would not admit its submodules)"""


def free_port() -> int:
    """A port free now, for a server the test starts next. Under pytest-xdist each worker takes
    ports from its own share (port // 2 modulo the worker count: Linux hands bind() ports of one
    parity), so two workers never pick the same port for servers they start at the same time."""
    share = int(os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw"))
    shares = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = int(s.getsockname()[1])
        if port // 2 % shares == share:
            return port


def answers(url: str, path: str = "/healthz") -> bool:
    """Whether the HTTP server at ``url`` answers GET ``path`` with 200 (a server starting: not yet).
    Plain http.client: an httpx client per poll spends ~30 ms of CPU building its TLS context, dozens
    of times while a server starts, on a machine whose cores the parallel tests share."""
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port, timeout=1)
    try:
        conn.request("GET", path)
        return conn.getresponse().status == 200
    except (OSError, http.client.HTTPException):
        return False
    finally:
        conn.close()


def parkway_script() -> list[str]:
    """The command that runs this interpreter's own ``parkway`` script: the one installed beside
    ``sys.executable`` (a stale one earlier on PATH, from another install, would test that one), else
    the first on PATH, else the script's entry point run by this interpreter."""
    beside = Path(sys.executable).parent / "parkway"
    if beside.is_file() and os.access(beside, os.X_OK):
        return [str(beside)]
    found = shutil.which("parkway")
    return [found] if found else [sys.executable, "-c", "import sys; from parkway.cli import main; sys.exit(main())"]


class RedisServer:
    """A redis-server of the test's own, on a free port, persisting to a temporary directory."""

    def __init__(self, directory: Path, *, appendonly: bool = True, extra: Sequence[str] = ()) -> None:
        if shutil.which("redis-server") is None:
            raise RuntimeError("redis-server is not installed (apt-get install redis-server)")
        self.dir, self.port, self.appendonly, self.extra = directory, free_port(), appendonly, list(extra)
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        """Start the server (again) and wait until it answers. The port was free when chosen, but a
        test running in parallel (pytest-xdist) may take it first: then this server cannot bind and
        exits, and it starts again on another free port (a restart keeps its port otherwise)."""
        for _ in range(5):
            if self._start_on_port():
                return
            self.port = free_port()
        raise RuntimeError(f"redis-server would not start: see {self.dir / 'redis.log'}")

    def _start_on_port(self) -> bool:
        args = ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--dir", str(self.dir),
                "--save", "", "--appendonly", "yes" if self.appendonly else "no", "--appendfsync", "always",
                "--logfile", str(self.dir / "redis.log"), *self.extra]
        self.proc = proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        with redis.Redis(port=self.port) as client:
            deadline = time.time() + 10
            while True:
                try:
                    answering = int(client.info("server")["process_id"])
                    if answering == proc.pid:
                        return True
                    # another test's server on this port: this one cannot bind and exits
                    if proc.poll() is None:
                        proc.terminate()
                    proc.wait(10)
                    return False
                except redis.exceptions.BusyLoadingError:
                    pass
                except redis.ConnectionError:
                    if proc.poll() is not None:
                        return False
                    if time.time() > deadline:
                        raise
                time.sleep(0.05)

    def kill(self) -> None:
        """SIGKILL: no shutdown, no final save."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)


class Worker:
    """`parkway worker` in a process of its own."""

    def __init__(self, url: str, secret: str, *extra: str, env: dict[str, str] | None = None) -> None:
        self.output = tempfile.TemporaryFile()  # a file, not a pipe: a chatty worker must never block
        full_env = {**os.environ, "PARKWAY_SECRET": secret, "PYTHONPATH": str(ROOT), **(env or {})}
        full_env.pop("PARKWAY_REDIS_URL", None)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "parkway.cli", "worker", "--redis-url", url, *extra],
            cwd=ROOT, env=full_env, stdout=self.output, stderr=subprocess.STDOUT,
        )

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)

    def stop(self) -> str:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self.output.seek(0)
        out = self.output.read().decode(errors="replace")
        self.output.close()
        return out


def wait_for(predicate, timeout: float, what: str, interval: float = 0.05):  # type: ignore[no-untyped-def]
    deadline = time.time() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.time() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


@contextmanager
def sent_commands(this_thread: bool = False) -> Iterator[list[bytes]]:
    """Record what this process sends to Redis: one entry per round trip (a command, or a
    whole pipeline), as the bytes on the wire. Not counted: what goes to an in-process Redis
    (an embedded Parkway left over from another test may still be working there), and the stored-format
    announcements a thread of each process refreshes every few seconds (adapters/redis/formats.py: a
    process's cost, not a job's). With ``this_thread``, only what the calling thread sends (a client's
    own calls, not a thread another test left working)."""
    from fakeredis import FakeRedisConnection
    from redis.connection import AbstractConnection

    sent: list[bytes] = []
    original = AbstractConnection.send_packed_command
    caller = threading.current_thread()

    def recording(self, command, check_health=True):  # type: ignore[no-untyped-def]
        current = threading.current_thread()
        if this_thread and current is not caller:
            return original(self, command, check_health)
        if not isinstance(self, FakeRedisConnection) and current.name != "parkway-formats":
            sent.append(command if isinstance(command, bytes) else b"".join(bytes(p) for p in command))
        return original(self, command, check_health)

    AbstractConnection.send_packed_command = recording  # type: ignore[method-assign]
    try:
        yield sent
    finally:
        AbstractConnection.send_packed_command = original  # type: ignore[method-assign]


def open_fds(pid: int) -> int:
    """How many file descriptors process ``pid`` holds (Linux)."""
    return len(os.listdir(f"/proc/{pid}/fd"))


def redis_connections(pid: int, redis_port: int) -> int:
    """How many TCP connections process ``pid`` holds to ``redis_port`` on this machine (Linux: its
    socket fds matched against /proc/net/tcp)."""
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue  # closed meanwhile
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    count = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as f:
            next(f)
            for line in f:
                fields = line.split()
                remote_port, state, inode = int(fields[2].rsplit(":", 1)[1], 16), fields[3], fields[9]
                if inode in inodes and remote_port == redis_port and state == "01":  # ESTABLISHED
                    count += 1
    return count


class SentinelGroup:
    """A primary, its replicas and ``redis-server --sentinel`` processes watching it as master
    ``name``, all on free loopback ports under ``directory``; quick to notice a dead primary
    (``down_after_ms``). No persistence: a primary restarted on its port comes back empty."""

    def __init__(self, directory: Path, *, replicas: int = 1, sentinels: int = 1, down_after_ms: int = 1000,
                 name: str = "pw") -> None:
        self.dir, self.name, self.down_after_ms = directory, name, down_after_ms
        (directory / "primary").mkdir()
        quick = ["--repl-diskless-sync-delay", "0"]  # a replica's first sync now, not in 5 s
        self.primary = RedisServer(directory / "primary", appendonly=False, extra=quick)
        self.replicas: list[RedisServer] = []
        for i in range(replicas):
            (directory / f"replica{i}").mkdir()
            self.replicas.append(RedisServer(directory / f"replica{i}", appendonly=False,
                                             extra=[*quick, "--replicaof", "127.0.0.1", str(self.primary.port)]))
        self.sentinel_ports = [free_port() for _ in range(sentinels)]
        self.sentinel_procs: list[subprocess.Popen[bytes]] = []

    @property
    def url(self) -> str:
        hosts = ",".join(f"127.0.0.1:{p}" for p in self.sentinel_ports)
        return f"redis+sentinel://{hosts}/{self.name}/0"

    def start(self) -> None:
        self.primary.start()
        for replica in self.replicas:
            replica.start()
        for port in self.sentinel_ports:
            self.sentinel_procs.append(self._sentinel_process(port))
        try:  # a sentinel learns of replicas from the primary's INFO every 10 s, of its peers every 2 s
            wait_for(self._watched, 60, "the sentinels to see the replicas in sync")
        except BaseException:  # started servers are stopped here: the caller's cleanup never began
            self.stop()
            raise

    def _sentinel_process(self, port: int) -> subprocess.Popen[bytes]:
        quorum = len(self.sentinel_ports) // 2 + 1
        conf = self.dir / f"sentinel-{port}.conf"
        conf.write_text(
            f"port {port}\nbind 127.0.0.1\ndir {self.dir}\nlogfile {self.dir}/sentinel-{port}.log\n"
            f"sentinel monitor {self.name} 127.0.0.1 {self.primary.port} {quorum}\n"
            f"sentinel down-after-milliseconds {self.name} {self.down_after_ms}\n"
            f"sentinel failover-timeout {self.name} 2000\n"
        )
        return subprocess.Popen(["redis-server", str(conf), "--sentinel"], stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)

    def _restart_lost_sentinels(self) -> None:
        """A sentinel that exited at its start (its port taken meanwhile by another process: free_port
        only found it free) starts again on another port."""
        for i, proc in enumerate(self.sentinel_procs):
            if proc.poll() is not None:
                self.sentinel_ports[i] = free_port()
                self.sentinel_procs[i] = self._sentinel_process(self.sentinel_ports[i])

    def sentinel(self, i: int = 0) -> redis.Redis:
        return redis.Redis(port=self.sentinel_ports[i], socket_timeout=2, decode_responses=True)

    def _watched(self) -> bool:
        self._restart_lost_sentinels()
        try:
            for i in range(len(self.sentinel_ports)):
                with self.sentinel(i) as s:
                    seen = s.execute_command("SENTINEL", "REPLICAS", self.name)
                    if len(seen) < len(self.replicas):
                        return False
                    if len(self.sentinel_ports) > 1 and len(s.execute_command("SENTINEL", "SENTINELS", self.name)) \
                            < len(self.sentinel_ports) - 1:
                        return False
            for replica in self.replicas:
                with redis.Redis(port=replica.port, decode_responses=True) as r:
                    if r.info("replication").get("master_link_status") != "up":
                        return False
            return True
        except redis.ConnectionError:
            return False

    def master_port(self) -> int:
        return self.master_port_of(0)

    def wait_for_switch(self, old_port: int, timeout: float = 20) -> int:
        """Wait until the sentinels name a master other than ``old_port``; its port."""
        return int(wait_for(lambda: (p := self.master_port()) != old_port and p, timeout, "the failover"))

    def wait_for_rejoined(self, server: RedisServer, timeout: float = 30) -> int:
        """Wait until every sentinel names one master, ``server`` is its replica in sync, and every
        sentinel has read the replica's priority from the replica itself (until it has, a sentinel
        assumes the default, 100, and may promote a server restarted with priority 0 in a second
        failover, which a loaded machine can start by making the new master seem down); its port."""

        def rejoined() -> int | None:
            masters = {self.master_port_of(i) for i in range(len(self.sentinel_ports))}
            if len(masters) != 1 or server.port in masters:
                return None
            master = masters.pop()
            with redis.Redis(port=server.port, decode_responses=True) as r:
                seen = r.info("replication")
            if seen.get("role") != "slave" or int(seen.get("master_port", 0)) != master \
                    or seen.get("master_link_status") != "up":
                return None
            priority = int(seen.get("slave_priority", 100))
            for i in range(len(self.sentinel_ports)):
                with self.sentinel(i) as s:
                    replicas = s.execute_command("SENTINEL", "REPLICAS", self.name)  # parsed: one dict each
                mine = [e for e in replicas if int(e["port"]) == server.port]
                if not mine or int(mine[0].get("slave-priority", -1)) != priority or "disconnected" in mine[0]["flags"]:
                    return None
            return master

        return int(wait_for(rejoined, timeout, f"{server.port} to rejoin as a replica the sentinels know"))

    def master_port_of(self, i: int) -> int:
        with self.sentinel(i) as s:
            return int(s.execute_command("SENTINEL", "GET-MASTER-ADDR-BY-NAME", self.name)[1])

    def stop(self) -> None:
        for proc in self.sentinel_procs:
            if proc.poll() is None:
                proc.terminate()
                proc.wait(10)
        for srv in (self.primary, *self.replicas):
            srv.stop()
