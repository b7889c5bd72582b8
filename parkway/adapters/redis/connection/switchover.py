"""A planned switch of the Sentinel master that loses no acknowledged write: ``parkway failover``.

A bare ``SENTINEL FAILOVER`` leaves the old primary writable for seconds after the switch: clients
still connected to it commit there (a second replica may even acknowledge their ``WAIT``), and all
of it is discarded when the old primary is demoted (issue 24 measured 61-101 acknowledged resumes
lost). The fenced switchover closes that window:

1. pause writes on the primary (``CLIENT PAUSE <ms> WRITE``: scripts that write wait; reads go on);
2. wait until every online replica has the primary's replication offset (whichever is promoted
   holds everything acknowledged);
3. ``SENTINEL FAILOVER`` and wait until the sentinels name that master;
4. on the old primary: ``REPLICAOF`` the new one, ``CLIENT KILL TYPE normal`` (the paused clients
   reconnect, asking the sentinels, and send their writes to the new master), ``CLIENT UNPAUSE``.

The pause lapses by itself after ``pause_ms`` if this process dies half way; on a failure before the
switch the pause is lifted and nothing else changed. Each step reports through ``say``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import redis

from .sentinel import SENTINEL_TIMEOUT_S, SentinelSpec

PAUSE_MS = 15_000
"""the longest the old primary holds writes (a lapsed pause before the switch only delays them)"""


class SwitchoverError(RuntimeError):
    """The switchover stopped: what was done so far is in the message (writes were unpaused)."""


@dataclass
class Switchover:
    """What a switchover did: the old and new masters, the offset waited for, and its timings (s)."""

    old: tuple[str, int]
    new: tuple[str, int] | None = None
    offset: int = 0
    paused_s: float = 0.0
    steps: list[str] = field(default_factory=list)


def switchover(spec: SentinelSpec, *, pause_ms: int = PAUSE_MS, timeout_s: float = 10.0,
               say: Callable[[str], None] = lambda _: None) -> Switchover:
    """Switch ``spec``'s master to a replica with every write it acknowledged (see the module)."""
    sentinels = [_sentinel(spec, host, port) for host, port in spec.sentinels]
    try:
        old = _master(sentinels, spec.master)
        done = Switchover(old)

        def step(text: str) -> None:
            done.steps.append(text)
            say(text)

        step(f"master {spec.master!r} is {old[0]}:{old[1]}")
        primary = _server(spec, *old)
        started = time.monotonic()
        _cmd(primary, "CLIENT", "PAUSE", pause_ms, "WRITE")
        step(f"writes paused on {old[0]}:{old[1]} (for at most {pause_ms} ms)")
        try:
            done.offset, caught_up = _wait_for_replica(primary, timeout_s)
            step(f"replica(s) {caught_up} have the primary's offset {done.offset}")
            _ask(sentinels, "SENTINEL", "FAILOVER", spec.master)
            step("SENTINEL FAILOVER sent")
            done.new = _wait_for_new_master(spec, sentinels, old, timeout_s)
            step(f"the sentinels name {done.new[0]}:{done.new[1]} master")
        except BaseException:
            _cmd(primary, "CLIENT", "UNPAUSE")
            say(f"switchover stopped: writes unpaused on {old[0]}:{old[1]}, which is still the master")
            raise
        _cmd(primary, "REPLICAOF", *done.new)
        killed = _cmd(primary, "CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes")
        _cmd(primary, "CLIENT", "UNPAUSE")
        done.paused_s = round(time.monotonic() - started, 3)
        step(f"{old[0]}:{old[1]} now replicates {done.new[0]}:{done.new[1]}; {killed} client connection(s) "
             f"closed (they reconnect to the new master); writes unpaused after {done.paused_s} s")
        primary.close()
        return done
    finally:
        for s in sentinels:
            s.close()


def _cmd(client: redis.Redis, *command: Any) -> Any:
    return client.execute_command(*command)  # type: ignore[no-untyped-call]


def _sentinel(spec: SentinelSpec, host: str, port: int) -> redis.Redis:
    auth: dict[str, Any] = {}
    if spec.sentinel_password is not None:
        auth = {"username": spec.sentinel_username, "password": spec.sentinel_password}
    return redis.Redis(host=host, port=port, socket_timeout=SENTINEL_TIMEOUT_S * 4,
                       socket_connect_timeout=SENTINEL_TIMEOUT_S, decode_responses=True, **auth)


def _server(spec: SentinelSpec, host: str, port: int) -> redis.Redis:
    return redis.Redis(host=host, port=port, username=spec.username, password=spec.password, socket_timeout=5,
                       socket_connect_timeout=2, decode_responses=True)


def _ask(sentinels: list[redis.Redis], *command: Any) -> Any:
    """The first answer from a sentinel that answers."""
    errors = []
    for s in sentinels:
        try:
            return _cmd(s, *command)
        except redis.RedisError as exc:
            errors.append(f"{s.connection_pool.connection_kwargs.get('port')}: {exc}")
    raise SwitchoverError(f"no sentinel answered {' '.join(map(str, command))}: {'; '.join(errors)}")


def _master(sentinels: list[redis.Redis], name: str) -> tuple[str, int]:
    found = _ask(sentinels, "SENTINEL", "GET-MASTER-ADDR-BY-NAME", name)
    if not found:
        raise SwitchoverError(f"the sentinels know no master {name!r}")
    return str(found[0]), int(found[1])


def _wait_for_replica(primary: redis.Redis, timeout_s: float) -> tuple[int, str]:
    """The primary's offset once writes are paused, and the replicas that have reached it: every
    online one (whichever the sentinels promote then has every write the primary acknowledged)."""
    deadline = time.monotonic() + timeout_s
    while True:
        info = primary.info("replication")
        offset = int(info["master_repl_offset"])
        online = [v for k, v in info.items() if k.startswith("slave") and isinstance(v, dict)
                  and v.get("state") == "online"]
        if not online:
            raise SwitchoverError("the primary has no online replica to switch to")
        if all(int(r.get("offset", -1)) >= offset for r in online):
            return offset, ", ".join(f"{r['ip']}:{r['port']}" for r in online)
        if time.monotonic() > deadline:
            raise SwitchoverError(f"the replicas did not reach the primary's offset {offset} within {timeout_s} s")
        time.sleep(0.01)


def _wait_for_new_master(spec: SentinelSpec, sentinels: list[redis.Redis], old: tuple[str, int],
                         timeout_s: float) -> tuple[str, int]:
    """The master the sentinels name instead of ``old``, once it says it is one."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            now = _master(sentinels, spec.master)
            if now != old:
                with _server(spec, *now) as new:
                    if _cmd(new, "ROLE")[0] == "master":
                        return now
        except (SwitchoverError, redis.RedisError):
            pass
        time.sleep(0.05)
    raise SwitchoverError(f"the sentinels named no new master within {timeout_s} s")
