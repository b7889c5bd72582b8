"""Workflows: named graphs of plain node functions.

A node receives the run's data (a dict) and returns ``None``, a dict merged
into the data, or a :class:`Result` that also names a ``condition`` (looked
up in the node's edges) or an explicit ``goto`` node. A node with no next
node ends the run; the run's output is its final data.

Workers find a workflow by import path (``"package.module:attribute"``);
:meth:`Workflow.ref` finds that path for a workflow defined at module level.
"""

from __future__ import annotations

import hashlib
import re
import sys
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from types import CodeType
from typing import Any, TypeVar, Union, overload

from .errors import ValidationError, WorkflowError
from .protocol import check_id
from .telemetry import DEFAULT_CAPTURE, check_capture

NodeReturn = Union["Result", Mapping[str, Any], None]
NodeFn = Callable[[dict[str, Any]], NodeReturn | Awaitable[NodeReturn]]
F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True)
class Result:
    """What a node returns when it chooses where the run goes next."""

    data: Mapping[str, Any] | None = None
    condition: str | None = None
    goto: str | None = None


@dataclass(frozen=True)
class Retry:
    """Retry a failing node attempt up to ``attempts`` times in all, ``delay`` seconds apart."""

    attempts: int = 3
    delay: float = 0.0
    on: tuple[type[BaseException], ...] = (Exception,)

    def __post_init__(self) -> None:
        if self.attempts < 1 or self.delay < 0:
            raise WorkflowError("Retry needs attempts >= 1 and delay >= 0")


@dataclass(frozen=True)
class Node:
    name: str
    fn: NodeFn
    retry: Retry | None = None


@dataclass
class Workflow:
    """A named graph of nodes.

    >>> wf = Workflow("greet")
    >>> @wf.node(start=True)
    ... def hello(data): return {"greeting": f"hi {data['name']}"}
    """

    name: str
    nodes: dict[str, Node] = field(default_factory=dict)
    start: str | None = None
    edges: dict[str, dict[str | None, str]] = field(default_factory=dict)
    on_expire: str | dict[str, Any] | None = None
    """what happens to this workflow's interrupts at expiry unless ``use_interrupt(on_expire=)`` says
    otherwise: ``"expire"`` (the default: the run ends expired), ``"fail"``, ``"cancel"`` or
    ``{"answer": value}``"""
    version: str | None = None
    """the code's version, recorded on each pause (None: a digest of the pausing node's code)"""
    replays: tuple[str, ...] | None = None
    """the older versions this code still replays: a pause made under another one is refused at
    resume (None: any version replays, a different one is only logged)"""
    tools: dict[str, Callable[..., Any]] = field(default_factory=dict)
    """the tools ``use_tool`` may run, by name (called with the call's arguments as keywords)"""
    decide: Callable[[dict[str, Any], list[dict[str, Any]]], Any] | None = None
    """a session policy, ``decide(trigger, proposed) -> actions``: consulted by ``use_tool`` on
    ``tool.execute`` and ``interrupt.resumed`` (see :mod:`parkway.runtime.agents`); None: the
    proposed actions (run the tool)"""
    capture_content: tuple[str, ...] = DEFAULT_CAPTURE
    """what its interrupts' lifecycle records may hold: ``"input"`` (the request), ``"output"`` (the
    answer), both (the default) or ``()`` (see :mod:`parkway.runtime.telemetry`);
    ``use_interrupt(capture_content=)`` overrides it for one interrupt"""
    _module: str = field(default="", repr=False)
    _versions: dict[str, tuple[CodeType, str]] = field(default_factory=dict, repr=False, compare=False)
    """``version_of``'s digests, by node, with the code each was taken of"""

    def __post_init__(self) -> None:
        check_id(self.name, "workflow name")
        if self.version is not None and not _VERSION.fullmatch(str(self.version)):
            raise WorkflowError(f"workflow {self.name!r}: version {self.version!r} must be 1-64 of A-Z a-z 0-9 . _ -")
        if self.replays is not None:
            self.replays = tuple(self.replays)
            for old in self.replays:
                if not isinstance(old, str) or not _VERSION.fullmatch(old):
                    raise WorkflowError(f"workflow {self.name!r}: replays holds {old!r}, not a version")
        try:
            self.capture_content = check_capture(self.capture_content)
        except ValidationError as exc:
            raise WorkflowError(f"workflow {self.name!r}: {exc.message}") from exc
        if not self._module:
            self._module = sys._getframe(2).f_globals.get("__name__", "")

    @overload
    def node(self, fn: F) -> F: ...

    @overload
    def node(
        self, fn: None = None, *, name: str | None = None, start: bool = False, retry: Retry | None = None
    ) -> Callable[[F], F]: ...

    def node(
        self, fn: F | None = None, *, name: str | None = None, start: bool = False, retry: Retry | None = None
    ) -> F | Callable[[F], F]:
        """Register a node function (usable as ``@wf.node`` or ``@wf.node(start=True)``)."""

        def register(f: F) -> F:
            self.add_node(name or f.__name__, f, start=start, retry=retry)
            return f

        return register(fn) if fn is not None else register

    def add_node(self, name: str, fn: NodeFn, *, start: bool = False, retry: Retry | None = None) -> None:
        check_id(name, "node name")
        if name in self.nodes:
            raise WorkflowError(f"workflow {self.name!r} already has a node {name!r}")
        if not callable(fn):
            raise WorkflowError(f"node {name!r} is not callable")
        self.nodes[name] = Node(name, fn, retry)
        if start or self.start is None:
            self.start = name

    def edge(self, source: str, target: str, *, when: str | None = None) -> Workflow:
        """Go from ``source`` to ``target`` (only when the node returns ``condition == when``, if given)."""
        self.edges.setdefault(source, {})[when] = target
        return self

    def validate(self) -> None:
        if not self.nodes or self.start not in self.nodes:
            raise WorkflowError(f"workflow {self.name!r} has no start node")
        for source, targets in self.edges.items():
            for target in [source, *targets.values()]:
                if target not in self.nodes:
                    raise WorkflowError(f"workflow {self.name!r}: edge names unknown node {target!r}")

    def next_node(self, current: str, result: Result) -> str | None:
        """The node after ``current`` given what it returned, or None when the run ends."""
        if result.goto is not None:
            if result.goto not in self.nodes:
                raise WorkflowError(f"node {current!r} returned goto={result.goto!r}, which is not a node")
            return result.goto
        targets = self.edges.get(current, {})
        if result.condition is not None:
            if result.condition in targets:
                return targets[result.condition]
            if None in targets:
                return targets[None]
            if targets:
                raise WorkflowError(
                    f"node {current!r} returned condition {result.condition!r}; its edges know "
                    f"{sorted(k for k in targets if k is not None)}"
                )
            return None
        return targets.get(None)

    def version_of(self, node: str) -> str:
        """The version a pause of ``node`` records: the declared one, else ``code-`` and a digest of
        the node function's code (its bytecode, constants and names, nested functions included)."""
        if self.version is not None:
            return self.version
        fn = self.nodes[node].fn
        code = getattr(fn, "__code__", None)
        if code is None:  # a callable object: its class's name is what we can tell apart
            return "code-" + hashlib.sha256(type(fn).__qualname__.encode()).hexdigest()[:12]
        known = self._versions.get(node)
        if known is not None and known[0] is code:  # digested once per code object (a park and a replay ask)
            return known[1]
        digest = hashlib.sha256()
        _feed(digest, code)
        version = "code-" + digest.hexdigest()[:12]
        self._versions[node] = (code, version)
        return version

    def replays_version(self, recorded: str, node: str) -> bool:
        """Whether this code may replay an activation paused under version ``recorded``."""
        return self.replays is None or recorded == self.version_of(node) or recorded in self.replays

    def ref(self) -> str:
        """The import path workers use to find this workflow (``module:attribute``)."""
        return module_ref(self, self._module, f"workflow {self.name!r}", "workers")


_VERSION = re.compile(r"[A-Za-z0-9._-]{1,64}")


def _feed(digest: Any, code: CodeType) -> None:
    """Feed ``code`` into ``digest``: what stays the same across processes (no addresses)."""
    digest.update(code.co_code)
    digest.update(repr(code.co_names).encode())
    for const in code.co_consts:
        if isinstance(const, CodeType):
            _feed(digest, const)
        else:
            digest.update(repr(const).encode())


def module_ref(obj: object, module_name: str, what: str, who: str) -> str:
    """``module:attribute`` of ``obj``, defined at module level in ``module_name`` (else WorkflowError
    saying that ``who`` could not import it)."""
    module = sys.modules.get(module_name)
    if module is not None:
        for attr, value in vars(module).items():
            if value is obj:
                return f"{module_name}:{attr}"
    raise WorkflowError(
        f"{what} is not a module-level attribute of {module_name!r}; define it at module level so {who} can import it"
    )


def as_result(value: Any, node: str) -> Result:
    if value is None:
        return Result()
    if isinstance(value, Result):
        return value
    if isinstance(value, Mapping):
        return Result(data=value)
    raise WorkflowError(f"node {node!r} returned {type(value).__name__}; return None, a dict or parkway.Result")
