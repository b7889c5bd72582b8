"""Model-decided asks: ``use_reason`` lets a model answer directly or ask a person through contracts.

The model sees each contract as a control tool (``ask_<schema id>``) beside the
application's ordinary tools. A model turn that calls a control tool pauses the
run with that contract's interrupt; the person's validated answer goes back to
the model as the tool's result, and reasoning continues after the resume.

Replay is by checkpoint: every model turn and every tool result is recorded
(as ``use_step`` records), so a replay after a resume rebuilds the
conversation from the records and calls the model only for turns not taken
yet. Providers are a small protocol; :class:`ScriptedModel` ships for tests
and demos, with no network.

``mode="required"`` makes the model ask at least once (a final answer before
any ask is sent back with a reminder); ``mode="optional"`` lets it finish at
once. ``max_requests`` bounds the asks: a further ask is refused to the model
as the tool's result, and it must answer without it.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from .contracts import Contract
from .errors import ParkwayError, ValidationError
from .hooks import use_interrupt, use_step

Message = dict[str, Any]
"""``{"role": "user" | "assistant" | "tool", ...}``: plain data, so it can be recorded"""

MAX_TURNS = 32


class ModelProvider(Protocol):
    """What ``use_reason`` needs of a model: one turn, given the conversation and the tools.

    A turn is ``{"answer": <plain data>}`` or ``{"tool": <name>, "arguments": {...}}``."""

    def complete(self, messages: Sequence[Message], tools: Sequence[Mapping[str, Any]]) -> Mapping[str, Any]: ...


@dataclass
class ScriptedModel:
    """A model that plays a script: turn N of a conversation is ``turns[N]`` (or what a callable
    there returns for the conversation so far). Stateless between calls, so replays and other
    processes see the same turns."""

    turns: Sequence[Mapping[str, Any] | Callable[[Sequence[Message]], Mapping[str, Any]]]
    calls: list[int] = field(default_factory=list)
    """the turn numbers this instance was asked for (tests check that replays do not ask again)"""

    def complete(self, messages: Sequence[Message], tools: Sequence[Mapping[str, Any]]) -> Mapping[str, Any]:
        taken = sum(1 for m in messages if m.get("role") == "assistant")
        self.calls.append(taken)
        if taken >= len(self.turns):
            raise ParkwayError(f"the scripted model has no turn {taken} (it has {len(self.turns)})")
        turn = self.turns[taken]
        return dict(turn(messages) if callable(turn) else turn)


def _tool_name(contract: Contract[Any, Any]) -> str:
    return "ask_" + re.sub(r"[^A-Za-z0-9_]", "_", contract.schema_id)


def use_reason(
    model: ModelProvider,
    input: Any,
    *,
    id: str,
    contracts: Sequence[Contract[Any, Any]] = (),
    tools: Mapping[str, Callable[..., Any]] | None = None,
    mode: Literal["required", "optional"] = "optional",
    max_requests: int = 1,
) -> Any:
    """Let ``model`` reason over ``input`` with ``tools`` and ask a person through ``contracts``.

    Returns the model's final answer. Inside a node only; give it a stable ``id``."""
    if mode not in ("required", "optional"):
        raise ValidationError("use_reason mode must be 'required' or 'optional'")
    if isinstance(max_requests, bool) or not isinstance(max_requests, int) or max_requests < 0:
        raise ValidationError("use_reason max_requests must be an integer >= 0")
    if mode == "required" and (max_requests < 1 or not contracts):
        raise ValidationError("use_reason mode='required' needs a contract and max_requests >= 1")
    ordinary = dict(tools or {})
    control = {_tool_name(c): c for c in contracts}
    clash = set(ordinary) & set(control)
    if clash:
        raise ValidationError(f"tool names {sorted(clash)} clash with the contracts' control tools")
    specs = [{"name": n, "kind": "tool"} for n in ordinary] + [
        {"name": n, "kind": "ask", "schemaId": c.schema_id, "schemaVersion": c.version, "question": c.question}
        for n, c in control.items()
    ]
    messages: list[Message] = [{"role": "user", "content": input}]
    asks = 0
    for number in range(MAX_TURNS):
        turn = use_step(f"reason:{id}:turn:{number}", _turn, model, list(messages), specs)
        messages.append({"role": "assistant", **turn})
        if "answer" in turn:
            if mode == "required" and asks == 0:
                messages.append({"role": "user", "content": "Ask the person first: use one of the ask tools."})
                continue
            return turn["answer"]
        name, arguments = turn.get("tool"), turn.get("arguments") or {}
        if name in control:
            if asks >= max_requests:
                messages.append({"role": "tool", "tool": name, "error": f"no more asks ({max_requests} allowed)"})
                continue
            answer = use_interrupt(contract=control[name], request=arguments, id=f"reason-{id}-ask-{asks}")
            asks += 1
            messages.append({"role": "tool", "tool": name, "result": answer.model_dump(mode="json")})
        elif name in ordinary:
            result = use_step(f"reason:{id}:tool:{number}", functools.partial(ordinary[name], **arguments))
            messages.append({"role": "tool", "tool": name, "result": result})
        else:
            messages.append({"role": "tool", "tool": name, "error": f"no tool {name!r}"})
    raise ParkwayError(f"use_reason {id!r}: the model took {MAX_TURNS} turns without a final answer")


def _turn(model: ModelProvider, messages: list[Message], specs: list[dict[str, Any]]) -> dict[str, Any]:
    turn = dict(model.complete(messages, specs))
    if "answer" not in turn and not isinstance(turn.get("tool"), str):
        raise ParkwayError(f"a model turn must carry an 'answer' or a 'tool' name, got {sorted(turn)}")
    return turn
