"""Hooks for agents: model calls and tool calls under a policy.

Each call tells the job's observers (``parkway.runtime.observers``) before it
calls out and when it settles: a feature may hold the run instead, or commit
the settled value itself. Inside a session's branch run (see
:mod:`parkway.sessions`) a model reply that settles while the branch is parked
is *voided* (never recorded; the call is made again after the resume), a tool
result that settles while parked is recorded, and in both cases the run is
*held*. With no observer committing it, a settled call records like
``use_step``.

``use_tool`` asks the workflow's policy, ``decide(trigger, proposed)``::

    def decide(trigger, proposed):
        if trigger["type"] == "tool.execute" and trigger["name"] == "send_email":
            return {"actions": [{"type": "interrupt", "reason": "confirm",
                                 "payload": {"message": "Send the email?"}}]}
        if trigger["type"] == "interrupt.resumed":
            if (trigger.get("payload") or {}).get("approved"):
                return {"actions": [{"type": "tool.result", "result": "sent"}]}
            return {"actions": [{"type": "tool.error", "error": "declined"}]}
        return proposed

On ``tool.execute`` the proposal is ``[{"type": "tool.run"}]`` (run the
workflow's tool of that name); the policy may keep it, answer at once
(``tool.result`` / ``tool.error``), hold the call as a *deferred tool*
(``tool.defer``: the run waits on that call until ``answer_tool``), or raise
an ``interrupt`` (an approval, anchored at the branch's head). On
``interrupt.resumed`` it answers the held call with ``tool.result`` or
``tool.error``. ``use_tool`` returns the result or raises :class:`ToolError`.

The triggers the policy sees (camelCase, as every body and event; the seed's
own shapes keep its ``interrupt_id``)::

    {"type": "tool.execute", "name", "arguments", "toolCallId"}
    {"type": "tool.results", "toolCallId", "name", "result" | "error"}
    {"type": "interrupt.resumed", "interrupt_id", "payload", "toolCallId", "name"}  # an approval's
    {"type": "interrupt.resumed", "interrupt_id", "payload"}    # a session interrupt cleared
    {"type": "session.start", "session"}, {"type": "user.message", "messageId", "content"}
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, RootModel

from . import journal
from .contracts import Contract
from .errors import InterruptCancelled, ToolError, ValidationError
from .hooks import NodeContext, current, pause_for
from .observers import before_call, on_settle
from .policy import parse_actions
from .protocol import InterruptRequest, check_id
from .reasoning import Message, ModelProvider
from .store import JournalEntry


class SessionAsk(BaseModel):
    """What a session interrupt asks: the seed's ``reason`` and free ``payload``."""

    reason: str = Field(min_length=1, max_length=1000)
    payload: Any = None


class AnyAnswer(RootModel[Any]):
    """A session interrupt's answer: the free ``payload`` of ``interrupt.resume``."""


SESSION_INTERRUPT: Contract[SessionAsk, AnyAnswer] = Contract(
    "parkway.session-interrupt", 1, request=SessionAsk, response=AnyAnswer
)


class ToolCall(BaseModel):
    """A deferred tool call, as its answerer sees it: ``{tool, arguments, toolCallId}`` (a request
    stored under the old spelling has ``tool_call_id``: it still reads)."""

    model_config = ConfigDict(serialize_by_alias=True)
    tool: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    tool_call_id: str = Field(alias="toolCallId", validation_alias=AliasChoices("toolCallId", "tool_call_id"))


class ToolAnswer(BaseModel):
    """The answer to a deferred tool call: a result, or an error."""

    result: Any = None
    error: str | None = Field(default=None, max_length=1000)


DEFERRED_TOOL: Contract[ToolCall, ToolAnswer] = Contract(
    "parkway.deferred-tool", 1, request=ToolCall, response=ToolAnswer, question="A tool call waits for its result"
)


def request_id_for(prefix: str, run_id: str, step: int, field: str) -> str:
    """The request id a session pause parks under: the same on every replay of the call."""
    return prefix + hashlib.sha256(f"{run_id}:{step}:{field}".encode()).hexdigest()[:24]


def use_model(
    model: ModelProvider,
    messages: Sequence[Message],
    *,
    tools: Sequence[Mapping[str, Any]] = (),
    id: str | None = None,
) -> dict[str, Any]:
    """One model turn (``model.complete(messages, tools)``), recorded; replays return the record.

    In a branch run, a reply that arrives while the branch is parked is voided and the run held:
    after the resume the node replays and the model is called again."""
    ctx = current()
    field = journal.model_call(check_id(id, 'model call id')) if id is not None else ctx.next_position()
    entry = ctx.replayed(field, "model", id or "")
    if entry is not None:
        return dict(entry.value)
    before_call(ctx)  # an observer may hold the run instead (a session's parked branch)
    turn = model.complete(list(messages), list(tools))
    if not isinstance(turn, Mapping):
        raise ValidationError(f"a model turn is a dict, not {type(turn).__name__}")
    on_settle(ctx, field, JournalEntry("model", id or "", dict(turn)), "void", None)
    return dict(turn)


def _decide(ctx: NodeContext, trigger: dict[str, Any], proposed: list[dict[str, Any]]) -> list[dict[str, Any]]:
    policy = ctx.definition.decide if ctx.definition is not None else None
    if policy is None:
        return proposed
    return parse_actions(policy(dict(trigger), [dict(p) for p in proposed]))


def use_tool(name: str, arguments: Mapping[str, Any] | None = None, *, id: str | None = None) -> Any:
    """Call the tool ``name`` under the workflow's policy; return its result or raise ToolError.

    ``id`` names the call (its ``toolCallId`` in triggers, messages and requests); without one,
    calls are matched by order."""
    ctx = current()
    if not isinstance(name, str) or not name or len(name) > 200:
        raise ValidationError("a tool name is a non-empty string of at most 200 characters")
    if arguments is not None and not isinstance(arguments, Mapping):
        raise ValidationError("a tool's arguments are a dict")
    args = dict(arguments or {})
    field = journal.tool_call(check_id(id, 'tool call id')) if id is not None else ctx.next_position()
    call_id = id or request_id_for("call_", ctx.run_id, ctx.step, field)
    entry = ctx.replayed(field, "tool", name)
    if entry is None:
        actions = _actions_for(ctx, name, args, call_id, field)
        entry = _act(ctx, name, args, call_id, field, actions)
    else:
        # the answer that settled the call (an approval's, a deferred call's) is this call's on every
        # replay too: read, so a later pause's replay does not take it for one no hook asks for
        ctx.recorded(journal.interrupt(f"tool:{call_id}"))
        ctx.recorded(journal.interrupt(f"defer:{call_id}"))
    value = entry.value if isinstance(entry.value, Mapping) else {}
    results = {"type": "tool.results", "toolCallId": call_id, "name": name, **value}
    consult(ctx, results, journal.interrupt(f"results:{call_id}"))
    if value.get("error") is not None:
        raise ToolError(f"tool {name!r} failed: {value['error']}", tool=name, tool_call_id=call_id)
    return value.get("result")


def _actions_for(ctx: NodeContext, name: str, args: dict[str, Any], call_id: str, field: str) -> list[dict[str, Any]]:
    """What settles the call now: an answered approval's policy decision, a deferred answer, or
    the policy's decision on the call."""
    approval = ctx.recorded(journal.interrupt(f"tool:{call_id}"))
    if approval is not None:
        if approval.status == "cancelled":
            return [{"type": "tool.error", "error": "the approval was cancelled"}]
        trigger = {
            "type": "interrupt.resumed",
            "interrupt_id": _interrupt_id(ctx, journal.interrupt(f"tool:{call_id}")),
            "payload": approval.value,
            "toolCallId": call_id,
            "name": name,
        }
        actions = _decide(ctx, trigger, [])
        if not any(a["type"] in ("tool.result", "tool.error") for a in actions):
            return [
                {"type": "tool.error", "error": "the policy gave no tool.result or tool.error for the resumed call"}
            ]
        return actions
    deferred = ctx.recorded(journal.interrupt(f"defer:{call_id}"))
    if deferred is not None:
        if deferred.status == "cancelled":
            return [{"type": "tool.error", "error": "the deferred call was cancelled"}]
        answer = deferred.value if isinstance(deferred.value, Mapping) else {}
        if answer.get("error") is not None:
            return [{"type": "tool.error", "error": answer["error"]}]
        return [{"type": "tool.result", "result": answer.get("result")}]
    trigger = {"type": "tool.execute", "name": name, "arguments": args, "toolCallId": call_id}
    return _decide(ctx, trigger, [{"type": "tool.run"}])


def _ask(ctx: NodeContext, action: Mapping[str, Any], ask_field: str, meta: Mapping[str, Any]) -> BaseException:
    """The pause an ``interrupt`` action raises: a session interrupt (reason, free payload) parked
    under a request id that is the same on every replay."""
    request_id = request_id_for("int_", ctx.run_id, ctx.step, ask_field)
    interrupt_id = action.get("interrupt_id") or request_id
    request = InterruptRequest.model_validate(
        {
            "kind": "contract",
            "question": action["reason"],
            "schemaId": SESSION_INTERRUPT.schema_id,
            "schemaVersion": SESSION_INTERRUPT.version,
            "contractRef": SESSION_INTERRUPT.ref(),
            "payload": SESSION_INTERRUPT.check_request({"reason": action["reason"], "payload": action.get("payload")}),
            "meta": {**meta, "interruptId": interrupt_id},
        }
    )
    return pause_for(request, ask_field, action.get("interrupt_id") or "", SESSION_INTERRUPT, request_id)


def _interrupt_id(ctx: NodeContext, ask_field: str) -> str:
    """The id a session interrupt was raised under (the policy's, else its request id)."""
    request_id = request_id_for("int_", ctx.run_id, ctx.step, ask_field)
    record = ctx.store.get_interrupt(ctx.run_id, request_id)
    meta = record.request.meta if record is not None and record.request is not None else {}
    return str(meta.get("interruptId") or request_id)


def consult(ctx: NodeContext, trigger: Mapping[str, Any], ask_field: str) -> None:
    """Show the policy a trigger with nothing proposed (``session.start``, ``user.message``,
    ``tool.results``); an ``interrupt`` action parks the run there, once: after the resume the
    policy is not asked again for it (``interrupt.resumed`` goes to the run's stream)."""
    if ctx.definition is None or ctx.definition.decide is None:
        return
    asked = ctx.recorded(ask_field)
    if asked is not None and asked.status == "cancelled":
        raise InterruptCancelled(
            f"the policy's interrupt on {trigger['type']} was cancelled", run_id=ctx.run_id, node=ctx.node
        )
    decided = ctx.recorded(ask_field + ":decided")
    if asked is not None or decided is not None:
        return  # answered, or let through: a replay does not ask again
    for action in _decide(ctx, dict(trigger), []):
        if action["type"] == "interrupt":
            raise _ask(ctx, action, ask_field, {"trigger": trigger["type"]})
    ctx.write(ask_field + ":decided", JournalEntry("policy", str(trigger["type"]), None))


def delivered(ctx: NodeContext, data: Mapping[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """The triggers delivered to this activation of a branch run, in the order they came, each
    with the name it is known by in the journal: for the first activation of a run dispatched for
    cleared interrupts, its input's (``d<n>``); then those the session wrote into the activation's
    journal when it cleared interrupts while the run was live (``g<seq>``: a held run woken, or the
    run at the head)."""
    out: list[tuple[str, dict[str, Any]]] = []
    given = data.get("triggers") if ctx.step == 0 else None
    if isinstance(given, list):
        out += [(f"d{n}", dict(t)) for n, t in enumerate(given) if isinstance(t, Mapping)]
    seqs = ((journal.trigger_seq(name), entry) for name, entry in ctx.journal.items())
    written = sorted((seq, entry) for seq, entry in seqs if seq is not None and entry.kind == "trigger")
    out += [(f"g{seq}", dict(entry.value)) for seq, entry in written if isinstance(entry.value, Mapping)]
    return out


def use_triggers() -> list[dict[str, Any]]:
    """The triggers delivered to this activation of a branch run, in the order they came: when
    interrupts raised on its branch by callers are cleared, each one's ``{"type":
    "interrupt.resumed", "interrupt_id": ..., "payload": ...}``. A run dispatched for them gets
    them as its input; a run held on its parked branch (or live at the head) gets them in its
    journal as it is woken, so every replay of the activation reads the same list. Empty outside
    a session's branch run."""
    ctx = current()
    return [trigger for _, trigger in ctx.triggers]


def _act(
    ctx: NodeContext, name: str, args: dict[str, Any], call_id: str, field: str, actions: list[dict[str, Any]]
) -> JournalEntry:
    for action in actions:
        kind = action["type"]
        if kind == "interrupt":
            raise _ask(ctx, action, journal.interrupt(f"tool:{call_id}"), {"toolCallId": call_id, "tool": name})
        if kind == "tool.defer":
            ask_field = journal.interrupt(f"defer:{call_id}")
            request = InterruptRequest.model_validate(
                {
                    "kind": "contract",
                    "question": f"tool {name} waits for its result",
                    "schemaId": DEFERRED_TOOL.schema_id,
                    "schemaVersion": DEFERRED_TOOL.version,
                    "contractRef": DEFERRED_TOOL.ref(),
                    "payload": DEFERRED_TOOL.check_request({"tool": name, "arguments": args, "toolCallId": call_id}),
                    "meta": {"toolCallId": call_id, "tool": name},
                }
            )
            raise pause_for(
                request, ask_field, "", DEFERRED_TOOL, request_id_for("tool_", ctx.run_id, ctx.step, ask_field)
            )
        if kind in ("tool.result", "tool.error", "tool.run"):
            outcome = _run_tool(ctx, name, args) if kind == "tool.run" else action
            value = (
                {"error": outcome["error"]} if outcome.get("error") is not None else {"result": outcome.get("result")}
            )
            entry = JournalEntry("tool", name, value)
            message = {
                "id": request_id_for("m_", ctx.run_id, ctx.step, field)[:16],
                "role": "tool",
                "content": f"{name}: "
                + (f"error: {value['error']}" if "error" in value else repr(value["result"])[:2000]),
                "runId": ctx.run_id,
                "toolCallId": call_id,
            }
            on_settle(ctx, field, entry, "keep", message)
            return entry
    raise ToolError(f"the policy gave no action for tool {name!r}", tool=name, tool_call_id=call_id)


def _run_tool(ctx: NodeContext, name: str, args: dict[str, Any]) -> dict[str, Any]:
    before_call(ctx)
    tools = ctx.definition.tools if ctx.definition is not None else {}
    fn = tools.get(name)
    if fn is None:
        return {"error": f"no tool {name!r} (the workflow has {sorted(tools)})"}
    try:
        return {"result": fn(**args)}
    except Exception as exc:  # a tool's failure is the call's result: the node sees ToolError
        return {"error": f"{type(exc).__name__}: {exc}"[:1000]}
