"""The Redis Store: each transition is one Lua script over the run's keys.

Scripts live beside this module as ``.lua`` files, each opening with its KEYS/ARGV schema; the
loader (:func:`.scripts.library`) adds the shared files and binds the names, making each a Redis
function of its own library, and each is called through its typed arguments (:mod:`.calls`). Redis
loads one when a call finds it missing; calls are sent here (``_send``: translated errors, replica
waits, ``around_scripts``). redis-py errors are translated
into parkway errors by :func:`~parkway.adapters.redis.connection.errors.translated`. ``RedisStore`` is
composed of the transitions (:mod:`.transitions`), the housekeeping (:mod:`.housekeeping`), a
run's records (:mod:`.records`), the interrupt listings (:mod:`.listings`) and the run index
(:mod:`.run_index`).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any, Protocol

import redis
import redis.exceptions as rex

from ...limits import Limits
from ..connection.connection import (
    connect,
    function_missing,
    load_function,
    one_bound,
    ride,
    run_script,
    run_script_then,
    take_rides,
)
from ..connection.errors import translated
from ..connection.replicas import ReplicaAcks
from ..formats import FormatGate
from ..scripts import scripts
from ..scripts.scripts import Args, ScriptCall
from .housekeeping import Housekeeping
from .listings import InterruptListings
from .records import RunRecords
from .run_index import RunIndex
from .transitions import Transitions

READ_ONLY_SCRIPTS = frozenset({"lookup", "page"})
"""scripts that write nothing: no replica acknowledgement is waited for after them"""
_SCRIPTS = (
    "create",
    "begin",
    "write_entry",
    "advance",
    "park",
    "first",
    "finish",
    "lookup",
    "resume",
    "recover",
    "redispatch",
    "expire",
    "escalate",
    "release",
    "spawn",
    "fanout",
    "fork",
    "refuse",
    "close_raced",
    "prune",
    "page",
    "unlist",
)


NO_HAND_OFF = (
    "function hand_off() return 0 end function hand_off_idle() return false end function hand_off_begun() return 0 end"
)
"""``hand_off`` (and format 3's ``hand_off_idle``, ``hand_off_begun``) for a store given no ``NextJob``: it
enqueues nothing (the caller enqueues) and no resume begins its attempt"""


class NextJob(Protocol):
    """The job that carries a transition on, as the scripts that commit a start or a resume write
    it (``hand_off``, declared in ``_common.lua``): one round trip instead of two, and no window
    between the commit and the enqueue. Its format is RQ's, and so is the Lua that writes it:
    ``parkway.workers.rq_internals`` provides both (``JobHash``)."""

    lua: str
    """the Lua that assigns ``hand_off(keys, args, at, step, fence, last)``, loaded with every script"""

    def keys(self) -> list[str]:
        """``hand_off``'s KEYS: the queue, RQ's set of queues."""

    def args(self, run_id: str) -> list[str | bytes]:
        """``hand_off``'s ARGV for a job of ``run_id`` (the script adds the step and fence)."""


class Follow(Protocol):
    """What may follow a script call on the wire (``RedisStore.followed_by``): a worker's next
    dequeue after its job's last commit. Implemented by ``parkway.workers.rq_internals``."""

    def take(self) -> tuple[Any, tuple[tuple[Any, ...], ...]] | None:
        """The connection to send the call on and the commands to send after it, whose replies the
        follower reads later on that connection; None: the call goes alone, on the store's path."""

    def sent(self) -> None:
        """The call and the commands ``take`` gave were written on its connection (a connection
        lost later is dropped by redis-py, and the follower finds it so)."""


class _Scripts(dict[str, scripts.Function]):
    """A store's scripts by name, each built (``scripts.library``: a library of one function, its
    name carrying its text's digest) when first asked for: a process that calls few of them (a
    command that lists) does not build all of them at its start. Redis loads one when a call finds
    it missing (``connection.run_script``); ``loaded`` names those this store had Redis load for a
    pipeline (``queue_script``)."""

    def __init__(self, client: redis.Redis, hand_off_lua: str, names: Iterable[str], read_only: set[str]) -> None:
        super().__init__()
        self.client = client
        self.hand_off_lua = hand_off_lua
        self.names = frozenset(names)
        """the scripts this store may call: its own and those features added (``add_scripts``);
        replaced, never changed in place, so a thread reading it (the reconciler's sweep) never sees
        it change under it"""
        self.read_only = read_only
        self.loaded: set[str] = set()

    def __missing__(self, name: str) -> scripts.Function:
        if name not in self.names:
            raise KeyError(name)
        function = self[name] = scripts.library(name, self.hand_off_lua, name in self.read_only)
        return function


class RedisStore(Transitions, Housekeeping, RunRecords, InterruptListings, RunIndex):
    """Store on a Redis server (or a Redis-compatible one with Lua and streams): the scripts'
    registration and sending here; the transitions (``Transitions``), the housekeeping
    (``Housekeeping``), the reads of a run's records (``RunRecords``) and the interrupt listings
    (``InterruptListings``) in modules of their own, on the connection of ``connection``."""

    def __init__(
        self,
        client: redis.Redis,
        limits: Limits | None = None,
        next_job: NextJob | None = None,
        acks: ReplicaAcks | None = None,
        begin_lease_ms: int | None = None,
    ) -> None:
        # redis-py types replies as unions of sync and async shapes; they are checked where decoded
        self.client: Any = client
        self.limits = limits or Limits()
        self.acks = acks
        """what each committing script waits for (``WAIT`` in its round trip); None: nothing"""
        self.next_job = next_job
        """how ``create_run`` and ``resume`` enqueue the job they call for; None: they enqueue none"""
        self.begin_lease_ms = begin_lease_ms
        """the lease (``Settings.lease_ms``) a resume takes for the attempt it begins when every live
        process reads format 3 and the queue is empty (``Transitions._begin_until``); None: it begins none"""
        self._hand_off_lua = next_job.lua if next_job is not None else NO_HAND_OFF
        self._read_only = set(READ_ONLY_SCRIPTS)
        self._scripts: _Scripts = _Scripts(client, self._hand_off_lua, _SCRIPTS, self._read_only)
        self._around: Callable[[ScriptCall, Callable[[], Any]], Any] | None = None
        self._follow: Follow | None = None
        self.formats = FormatGate(client)

    @classmethod
    def from_url(cls, url: str, limits: Limits | None = None, acks: ReplicaAcks | None = None) -> RedisStore:
        return cls(connect(url), limits, acks=acks)

    def add_scripts(self, names: Iterable[str], read_only: Iterable[str] = ()) -> None:
        """Register a feature's scripts on this store's client, once: ``names`` are scripts of a
        folder the feature gave the loader (``scripts.add_folder``), loaded like the store's own
        (``scripts.source``, with this store's ``hand_off``). ``call_script`` then calls them like
        the store's own (translated errors, replica waits unless ``read_only``, ``around_scripts``)."""
        self._scripts.names = self._scripts.names | frozenset(names)
        self._read_only.update(read_only)

    def function_names(self) -> set[str]:
        """The names of the function libraries this store calls (its scripts' at this version)."""
        return {self._scripts[name].name for name in self._scripts.names}

    def call_script(self, run_id: str | None, params: Args) -> Any:
        """Call ``params``'s script (the store's or one ``add_scripts`` registered) for ``run_id``."""
        return self._script(run_id, params)

    def hand_off(self, run_id: str) -> tuple[list[str], list[Any]]:
        """The keys and arguments a script's ``hand_off`` takes to enqueue a job of ``run_id`` (see
        ``_common.lua``): none and one empty argument when this store enqueues no jobs."""
        return self._hand_off(run_id)

    def _hand_off(self, run_id: str) -> tuple[list[str], list[Any]]:
        """The keys and arguments a script's ``hand_off`` takes (see ``_common.lua``)."""
        if self.next_job is None:
            return [], [""]
        return self.next_job.keys(), self.next_job.args(run_id)

    def _script(self, run_id: str | None, params: Args) -> Any:
        """Call ``params``'s script (its typed arguments: see :mod:`.calls`) for ``run_id``."""
        return self._send(ScriptCall.of(run_id, params))

    def _send(self, call: ScriptCall) -> Any:
        if self._around is not None:
            return self._around(call, lambda: self._run(call))
        return self._run(call)

    def _run(self, call: ScriptCall) -> Any:
        if self._follow is not None:
            followed = self._follow.take()
            if followed is not None:
                return self._run_then(call, *followed)
        with translated(call.run_id):
            acks = None if call.name in self._read_only else self.acks
            return run_script(self.client, self._scripts[call.name], call.keys, call.args, acks)

    def followed_by(self, follow: Follow) -> RedisStore:
        """This store, but its script calls send what ``follow`` gives after them, while it gives
        something (a view: the same client, scripts and settings). A worker's job ends through it
        (``executor.execute``'s ``last``): the commit and the next dequeue in one round trip."""
        view = copy.copy(self)
        view._follow = follow
        return view

    def _run_then(self, call: ScriptCall, conn: Any, then: tuple[tuple[Any, ...], ...]) -> Any:
        """``call`` sent on ``conn`` with ``then`` after it (``run_script_then``); its reply, or the
        error it raises, is the call's, as on the store's own path. When that reply does not come
        (``conn`` lost or silent: dropped with ``then``) or says the function is missing (nothing
        ran), the call is made again on the store's own path, which retries and loads as ever,
        within the bound (``GIVE_UP_S``) the call had from its first try; the commands left to
        ``ride`` that went ahead of it on ``conn`` go ahead of it again when ``conn`` was lost."""
        acks = None if call.name in self._read_only else self.acks
        before = take_rides(self.client)
        with translated(call.run_id), one_bound():  # the call again ends within the first's bound
            try:
                assert self._follow is not None
                function = self._scripts[call.name]
                return run_script_then(conn, function, call.keys, call.args, acks, then, self._follow.sent,
                                       before=before)
            except rex.ResponseError as exc:
                if not function_missing(exc):
                    raise
            except (rex.ConnectionError, rex.TimeoutError):
                if before:  # they went with the connection (or ran: each is a write that may run twice)
                    ride(before)
            return run_script(self.client, self._scripts[call.name], call.keys, call.args, acks)

    @contextmanager
    def around_scripts(self, around: Callable[[ScriptCall, Callable[[], Any]], Any]) -> Iterator[None]:
        """Inside this block, every transition's script call goes to ``around(call, run)`` instead,
        which returns the reply (``run()`` makes the call). For tools that record or batch the real
        path's calls (bench/populate.py); see ``queue_script``."""
        self._around = around
        try:
            yield
        finally:
            self._around = None

    def queue_script(self, pipeline: Any, call: ScriptCall) -> None:
        """Queue ``call`` on ``pipeline`` (a pipeline of this store's client) instead of making it.
        Its function is loaded first, once for this store (a round trip of its own): a server that
        loses it after that (restarted without its data) answers the queued call ``Function not
        found`` (``connection.function_missing``), having run nothing; ``call_script`` makes it
        again, loading it."""
        pipeline.execute_command(*self.script_command(call))

    def script_command(self, call: ScriptCall) -> tuple[Any, ...]:
        """``call`` as an FCALL command to send among others (a pipeline, ``run_commands``): its function
        loaded first, once for this store (see ``queue_script``)."""
        function = self._scripts[call.name]
        if call.name not in self._scripts.loaded:
            with translated(call.run_id):
                load_function(self.client, function)
            self._scripts.loaded.add(call.name)
        return ("FCALL", function.name, len(call.keys), *call.keys, *call.args)

    def reload_scripts(self) -> None:
        """Forget which functions this store had Redis load: the next ``script_command`` loads again
        (a server that lost them answered ``Function not found``)."""
        self._scripts.loaded.clear()

    def ping(self) -> None:
        """Raise StoreUnavailable unless Redis answers (within the bound of ``connect``)."""
        with translated():
            self.client.ping()


