"""Parked runs in bulk, through parkway's own code.

``park_runs`` is the real path minus RQ: ``Parkway.start`` (create.lua and the outbox,
with a dispatcher that only notes the job and a store whose scripts enqueue none), then the job body a
worker would run, ``executor.execute(store, options, run_id, 0, 0)``, in this process:
begin.lua, the node up to ``use_interrupt``, park.lua. Every key and index member is the
one a worker writes; only RQ's own job records (deleted after the job anyway, as parkway
enqueues with ``result_ttl=0``) never exist.

``pipelined=True`` is the same code with one difference: the store's script calls
(``RedisStore.around_scripts``) are queued on a pipeline of 200 runs instead of waiting for each
reply, and the executor gets the replies a real call returned for a template run parked
first (begin's record of the run, park's fence). The scripts, keys and arguments are the
ones the real path sends; every reply in the pipeline is checked for errors afterwards,
and ``shape()`` compares a pipelined run's keys with a really parked run's.

``bulk_park`` (``"bulk": true``) is for the million-run listing: it parks one template run
through the real path above while recording every script call the store makes (name,
keys, arguments: create.lua, begin.lua, park.lua), then replays those calls, pipelined,
for each new run with three values substituted: the run id (``run_`` + 26 base32
characters, as parkway makes them: ``protocol.minted_run_id``), the request id
(``int_<fence>_<run id>``, the run id in it substituted) and the token hash (SHA-256 of the
token minted for the new ids). The substitutes have the template's lengths, so msgpack blobs
stay valid. Everything else (timestamps, input, request) is the template's: all
bulk runs were created in the same millisecond and sort by run id within it. Scripts,
keys and members are parkway's own; ``shape()`` compares a bulk run with the template.

``python -m bench.populate '{"url": ..., "count": N, "ttl_ms": ..., "pipelined": true}'``
parks N runs and reports the rate.
"""

from __future__ import annotations

import contextlib
import json
import re
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

from .env import SECRET, emit_result

WORKFLOW = "bench.flows:cycle"


class NoteDispatcher:
    """A dispatcher that notes jobs instead of enqueuing them."""

    def __init__(self) -> None:
        self.jobs: list[tuple[str, int, int]] = []

    def enqueue(self, run_id: str, step: int, fence: int) -> None:
        self.jobs.append((run_id, step, fence))

    def is_pending(self, run_id: str, fence: int) -> bool:
        return False


def client(url: str, ttl_ms: int | None = None) -> Any:
    from parkway import Parkway, Settings

    quiet_logs()
    settings = Settings(redis_url=url, secret=SECRET)
    if ttl_ms:
        settings = settings.with_(ttl_ms=ttl_ms)
    return Parkway(settings)


def quiet_logs() -> None:
    """Log at WARNING like the worker and the CLI do (the library default is INFO to stderr)."""
    try:
        from parkway import logs

        logs.configure("WARNING")
    except Exception:  # noqa: BLE001 - only a nicety
        pass


def park_runs(pw: Any, count: int, *, pipelined: bool = False, batch: int = 200) -> tuple[int, str]:
    """Start ``count`` runs (ids chosen by parkway, as in production) and carry each to its
    pause in this process; return how many parked and the last run id."""
    _noting(pw)
    with contextlib.ExitStack() as stack:
        pipe = stack.enter_context(_pipelined(pw)) if pipelined else None
        return _park_runs(pw, count, pipe, batch)


def _noting(pw: Any) -> None:
    """Give ``pw`` a dispatcher that notes jobs, and a store whose scripts enqueue none."""
    from parkway.adapters.redis.store.store import RedisStore

    if not isinstance(pw.backend.dispatcher, NoteDispatcher):
        pw.backend.dispatcher = NoteDispatcher()
        pw.store = pw.backend.store = RedisStore(pw.store.client, pw.store.limits)


def _park_runs(pw: Any, count: int, pipe: Any, batch: int) -> tuple[int, str]:
    from parkway.runtime import executor

    notes = pw.backend.dispatcher
    parked, run_id = 0, ""
    for first in range(0, count, batch):
        for i in range(first, min(count, first + batch)):
            run_id = pw.start(WORKFLOW, {"i": i})
        for job in notes.jobs:
            end = executor.execute(pw.store, pw.backend.options, *job)
            if str(getattr(end, "value", end)) != "waiting":
                raise RuntimeError(f"run {job[0]} ended the job as {end}, not waiting")
            parked += 1
        notes.jobs.clear()
        if pipe is not None:
            for reply in pipe.execute(raise_on_error=False):
                if isinstance(reply, Exception):
                    raise RuntimeError(f"a pipelined script failed: {reply}")
    return parked, run_id


@contextlib.contextmanager
def _pipelined(pw: Any) -> Iterator[Any]:
    """Park a template run for real, recording each script's reply; then, inside the block, queue
    script calls on the pipeline it yields and hand the executor the recorded replies."""
    store = pw.store
    canned: dict[str, Any] = {}

    def recording(call: Any, run: Callable[[], Any]) -> Any:
        canned[call.name] = run()
        return canned[call.name]

    with store.around_scripts(recording):
        _park_runs(pw, 1, None, 200)
    pipe = store.client.pipeline(transaction=False)

    def queued(call: Any, run: Callable[[], Any]) -> Any:
        store.queue_script(pipe, call)
        return canned[call.name]

    with store.around_scripts(queued):
        yield pipe


def shape(r: Any, run_id: str) -> dict[str, Any]:
    """A run's keys with what they hold, names only (run id and token hash taken out)."""
    out: dict[str, Any] = {}
    for raw in r.scan_iter(match=f"*{{{run_id}}}*", count=1000):
        key = raw.decode()
        kind = r.type(raw).decode()
        name = key.split("}", 1)[1]
        if kind == "hash":
            fields = sorted(f.decode() for f in r.hkeys(raw))
            fields = [
                "r:<req>"
                if f.startswith("r:")
                else "s:<req>"
                if f.startswith("s:")
                else "t:<hash>"
                if f.startswith("t:")
                else f
                for f in fields
            ]
            what: Any = sorted(fields)
        elif kind == "stream":
            what = [e[1][b"t"].decode() for e in r.xrange(raw)]
        else:
            what = kind
        out[name] = (kind, what, r.pttl(raw) > 0)
    for raw in r.scan_iter(match="pw:ix:*", count=1000):
        if r.type(raw) != b"zset":  # a bucketed index's companion hash (keys.bucket_count)
            continue
        found = [m for m in r.zrangebylex(raw, "-", "+") if m.endswith(run_id.encode())]
        if found:  # a bucket's id is the index's, not the run's: named alike for every run
            out[re.sub(r"/d:[0-9]+$", "/d:<id>", raw.decode())] = ("zset", len(found), False)
    return out


def bulk_park(pw: Any, count: int, batch: int = 500) -> tuple[int, str]:
    """Replay a real park's script calls for ``count`` new runs (see the module docstring)."""
    import os

    from parkway.adapters.redis import layout
    from parkway.runtime import tokens
    from parkway.runtime.protocol import minted_run_id

    _noting(pw)
    store = pw.store
    calls: list[Any] = []

    def recording(call: Any, run: Callable[[], Any]) -> Any:
        calls.append(call)
        return run()

    with store.around_scripts(recording):
        _, template = park_runs(pw, 1)
    run = pw.get_run(template)
    if run.interrupt is None:
        raise RuntimeError(f"template run {template} is {run.status.value}, not waiting")
    request_id = run.interrupt.request_id
    secret = pw.backend.options.secret
    token_hash = tokens.hash_token(tokens.mint(secret, template, request_id))
    if not any(isinstance(a, str) and layout.token_field(token_hash) in a for call in calls for a in call.args):
        raise RuntimeError("the template's token hash is not in its arguments: the token scheme changed")

    def substitute(value: Any, pairs: list[tuple[str, str]], bpairs: list[tuple[bytes, bytes]]) -> Any:
        if isinstance(value, str):
            for old, new in pairs:
                value = value.replace(old, new)
        elif isinstance(value, bytes):
            for bold, bnew in bpairs:
                value = value.replace(bold, bnew)
        return value

    import dataclasses

    from parkway.adapters.redis.scripts.scripts import Args
    from parkway.adapters.redis.store.store import ScriptCall

    def renamed(params: Any, pairs: list[tuple[str, str]], bpairs: list[tuple[bytes, bytes]]) -> Any:
        """The call's typed arguments for the new ids, blocks too. A park's record (rq, its request
        id, rn, its count, then each part: a 64-byte split may cut an id in two) is joined,
        substituted and split again."""
        changes: dict[str, Any] = {}
        for field in dataclasses.fields(params):
            value = getattr(params, field.name)
            if isinstance(value, Args):
                value = renamed(value, pairs, bpairs)
            elif isinstance(value, list):
                value = [renamed(v, pairs, bpairs) if isinstance(v, Args) else substitute(v, pairs, bpairs)
                         for v in value]
            else:
                value = substitute(value, pairs, bpairs)
            changes[field.name] = value
        if params.script == "park":
            record = params.record
            if record[0] != layout.RECORD_LATEST or record[2] != layout.RECORD_PARTS:
                raise RuntimeError("park's record changed shape: the bulk writer needs updating")
            parts = layout.split(substitute(b"".join(record[5::2]), pairs, bpairs))
            held = substitute(record[1], pairs, bpairs)
            changes["record"] = [layout.RECORD_LATEST, held, layout.RECORD_PARTS, len(parts)]
            for n, part in enumerate(parts):
                changes["record"] += [layout.record_field(n), part]
        return dataclasses.replace(params, **changes)

    pipe = store.client.pipeline(transaction=False)
    last = template
    for first in range(0, count, batch):
        for _ in range(first, min(count, first + batch)):
            rid = minted_run_id()
            # a minted request id carries its run id (int_<fence>_<run id>): substituted with it
            minted = template in request_id
            req = request_id.replace(template, rid) if minted else "int_" + os.urandom(12).hex()
            new_hash = tokens.hash_token(tokens.mint(secret, rid, req))
            cut = layout.TOKEN_FIELD_HEX
            pairs = [(template, rid), (request_id, req), (token_hash[:cut], new_hash[:cut]),
                     (layout.token_field(token_hash), layout.token_field(new_hash))]
            if any(len(a) != len(b) for a, b in pairs):
                raise RuntimeError("ids changed length: the bulk writer needs same-length substitutes")
            bpairs = [(a.encode(), b.encode()) for a, b in pairs]
            for call in calls:
                store.queue_script(pipe, ScriptCall.of(rid, renamed(call.params, pairs, bpairs)))
            last = rid
        for reply in pipe.execute(raise_on_error=False):
            if isinstance(reply, Exception):
                raise RuntimeError(f"a bulk script call failed: {reply}")
    bulk_park.template = template  # type: ignore[attr-defined]
    return count + 1, last


def main(params: dict[str, Any]) -> dict[str, Any]:
    pw = client(params["url"], params.get("ttl_ms"))
    t0 = time.perf_counter()
    if params.get("bulk"):
        parked, last = bulk_park(pw, int(params["count"]))
        out = {"parked": parked, "last_run_id": last, "seconds": time.perf_counter() - t0}
        if params.get("check"):  # scans the whole keyspace and indexes: only on a small database
            template = bulk_park.template  # type: ignore[attr-defined]
            out["same_shape"] = shape(pw.store.client, last) == shape(pw.store.client, template)
        return out
    parked, last = park_runs(pw, int(params["count"]), pipelined=bool(params.get("pipelined")))
    return {"parked": parked, "last_run_id": last, "seconds": time.perf_counter() - t0}


if __name__ == "__main__":
    emit_result(main(json.loads(sys.argv[1])))
