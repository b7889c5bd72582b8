"""Agent workflows for the session tests (module level, so workers find them)."""

from __future__ import annotations

import os
import time
from collections.abc import Mapping, Sequence
from typing import Any

from parkway import Workflow, use_interrupt, use_step
from parkway.agents import ScriptedModel, ToolError, add_message, use_model, use_tool, use_triggers


def _answer(messages: Sequence[Mapping[str, Any]], tools: Any = ()) -> dict[str, Any]:
    return {"answer": f"you said {messages[-1]['content']}"}


ECHO_MODEL = ScriptedModel([_answer] * 50)


def _trigger_reply(data: dict[str, Any]) -> bool:
    """A run dispatched for a cleared interrupt says so and ends."""
    trigger = data.get("trigger") or {}
    if trigger.get("type") == "interrupt.resumed":
        add_message(f"resumed {trigger['interrupt_id']} with {trigger.get('payload')!r}", id="resumed")
        return True
    return False


echo = Workflow("session-echo")


@echo.node(start=True)
def reply(data: dict[str, Any]) -> None:
    if _trigger_reply(data):
        return
    turn = use_model(ECHO_MODEL, data["messages"], id="turn")
    add_message(turn["answer"], id="reply")


asking = Workflow("session-asking")


@asking.node(start=True)
def ask(data: dict[str, Any]) -> None:
    if _trigger_reply(data):
        return
    answer = use_interrupt({"kind": "text", "question": "Which account?"}, id="account")
    add_message(f"account {answer}", id="reply")


def send_email(to: str, subject: str = "") -> str:
    return f"mail to {to}"


def decide(trigger: dict[str, Any], proposed: list[dict[str, Any]]) -> Any:
    """The seed's policy, in Python."""
    if trigger["type"] == "tool.execute" and trigger["name"] == "send_email":
        return {"actions": [{"type": "interrupt", "reason": "confirm", "payload": {"message": "Send the email?"}}]}
    if trigger["type"] == "tool.execute" and trigger["name"] == "lookup":
        return {"actions": [{"type": "tool.defer"}]}
    if trigger["type"] == "interrupt.resumed":
        if (trigger.get("payload") or {}).get("approved"):
            return {"actions": [{"type": "tool.result", "result": "sent"}]}
        return {"actions": [{"type": "tool.error", "error": "declined"}]}
    return proposed


mail = Workflow("session-mail", tools={"send_email": send_email}, decide=decide)


@mail.node(start=True)
def mailer(data: dict[str, Any]) -> None:
    if _trigger_reply(data):
        return
    try:
        result = use_tool("send_email", {"to": "bob"}, id="mail")
        add_message(f"done: {result}", id="reply")
    except ToolError as exc:
        add_message(f"not sent: {exc}", id="reply")


@mail.node
def unused(data: dict[str, Any]) -> None:  # pragma: no cover - a second node, never reached
    return None


deferred = Workflow("session-deferred", decide=decide)


@deferred.node(start=True)
def look(data: dict[str, Any]) -> None:
    result = use_tool("lookup", {"q": data["messages"][-1]["content"]}, id="lk")
    add_message(f"found {result}", id="reply")


def _slow(path: str, name: str) -> int:
    """Count a call in ``path/name`` and wait while ``path/hold`` exists (the test lifts it)."""
    with open(os.path.join(path, name), "a") as f:
        f.write("x")
    deadline = time.time() + 30
    while os.path.exists(os.path.join(path, "hold")) and time.time() < deadline:
        time.sleep(0.02)
    with open(os.path.join(path, name)) as f:
        return len(f.read())


class SlowModel:
    """A model whose every call is counted on disk and waits for the test to let it finish."""

    def complete(self, messages: Sequence[Mapping[str, Any]], tools: Any) -> dict[str, Any]:
        calls = _slow(str(messages[0]["content"]), "model-calls")
        return {"answer": f"call {calls}"}


slow_model = Workflow("session-slow-model")


@slow_model.node(start=True)
def think(data: dict[str, Any]) -> None:
    if _trigger_reply(data):
        return
    turn = use_model(SlowModel(), data["messages"], id="turn")
    add_message(turn["answer"], id="reply")


def slow_tool(path: str) -> str:
    return f"tool call {_slow(path, 'tool-calls')}"


slow_tool_flow = Workflow("session-slow-tool", tools={"slow": slow_tool})


@slow_tool_flow.node(start=True)
def work(data: dict[str, Any]) -> None:
    if _trigger_reply(data):
        return
    result = use_tool("slow", {"path": data["messages"][0]["content"]}, id="slow")
    add_message(f"after {result}", id="reply")


mixed = Workflow("session-mixed")


@mixed.node(start=True)
def mixed_reply(data: dict[str, Any]) -> None:
    """Asks when the message starts with '?', else answers through the model."""
    if _trigger_reply(data):
        return
    last = data["messages"][-1]["content"]
    if last.startswith("?"):
        answer = use_interrupt({"kind": "text", "question": last}, id="ask")
        add_message(f"noted {answer}", id="reply")
        return
    turn = use_model(ECHO_MODEL, data["messages"], id="turn")
    add_message(turn["answer"], id="reply")


def guard(trigger: dict[str, Any], proposed: list[dict[str, Any]]) -> Any:
    """Asks before an expensive message is answered, and after a lookup returns a large result."""
    if trigger["type"] == "session.start":
        effects_seen.append("session.start")
    if trigger["type"] == "user.message" and "expensive" in (trigger.get("content") or ""):
        return [{"type": "interrupt", "reason": "this will cost money", "interrupt_id": "budget"}]
    if trigger["type"] == "tool.results" and trigger.get("result", 0) > 100:
        return [{"type": "interrupt", "reason": "review the result", "payload": {"result": trigger["result"]}}]
    return proposed


effects_seen: list[str] = []
guarded = Workflow("session-guarded", tools={"size": lambda n: n * 10}, decide=guard)


@guarded.node(start=True)
def measure(data: dict[str, Any]) -> None:
    if _trigger_reply(data):
        return
    last = data["messages"][-1]["content"]
    n = int(last.split()[-1]) if last.split()[-1].isdigit() else 1
    add_message(f"size {use_tool('size', {'n': n}, id='size')}", id="reply")


poser = Workflow("session-poser")


@poser.node(start=True)
def pose(data: dict[str, Any]) -> None:
    add_message("written by a run the session never dispatched", id="reply")


gate_asks: list[int] = []


def flaky_gate(trigger: dict[str, Any], proposed: list[dict[str, Any]]) -> Any:
    """Lets the first user.message through and would stop every later one: a replay must not ask again."""
    if trigger["type"] == "user.message":
        gate_asks.append(1)
        if len(gate_asks) > 1:
            return [{"type": "interrupt", "reason": "over budget"}]
    if trigger["type"] == "tool.execute" and trigger["name"] == "lookup":
        return [{"type": "tool.defer"}]
    return proposed


gated = Workflow("session-gated", decide=flaky_gate)


@gated.node(start=True)
def gated_lookup(data: dict[str, Any]) -> None:
    add_message(f"found {use_tool('lookup', {}, id='lk')}", id="reply")


counted = Workflow("session-counted")


class CountedModel:
    """A model whose every call is counted on disk (the first message is a directory)."""

    def complete(self, messages: Sequence[Mapping[str, Any]], tools: Any) -> dict[str, Any]:
        with open(os.path.join(str(messages[0]["content"]), "model-calls"), "a") as f:
            f.write("x")
        return {"answer": "counted"}


@counted.node(start=True)
def counted_reply(data: dict[str, Any]) -> None:
    """Waits (up to 30 s) until the test writes ``go`` in its directory, then calls a model that
    counts its calls there: an attempt begun before its branch parks reaches the model call, where
    the branch's parked check must stop it."""
    if _trigger_reply(data):
        return
    path = str(data["messages"][0]["content"])
    deadline = time.monotonic() + 30
    while not os.path.exists(os.path.join(path, "go")) and time.monotonic() < deadline:
        time.sleep(0.01)
    turn = use_model(CountedModel(), data["messages"], id="turn")
    add_message(turn["answer"], id="reply")


triggers_seen: list[dict[str, Any]] = []


def note_triggers(trigger: dict[str, Any], proposed: list[dict[str, Any]]) -> Any:
    """Notes every interrupt.resumed trigger the policy is shown."""
    if trigger["type"] == "interrupt.resumed":
        triggers_seen.append(dict(trigger))
    return proposed


triggered = Workflow("session-triggered", decide=note_triggers)


@triggered.node(start=True)
def read_triggers(data: dict[str, Any]) -> None:
    """Replies through the model; a run delivered triggers asks to confirm, then lists them."""
    seen = use_triggers()
    if seen:
        confirmed = use_interrupt({"kind": "text", "question": "Go on?"}, id="confirm")
        listed = ", ".join(f"{t['interrupt_id']}={t['payload']}" for t in seen)
        add_message(f"triggers {listed} ({confirmed})", id="triggers")
        return
    turn = use_model(ECHO_MODEL, data["messages"], id="turn")
    add_message(turn["answer"], id="reply")


raiser: dict[str, Any] = {}
"""``pw``: the client the self-parking tool raises its interrupts with (set by the test)"""
follow_ons: list[str] = []


def park_branch(session: str, how: str) -> str:
    """A tool during whose call a system caller parks the branch: ``how`` is ``branch:<id>,<id>...``
    (interrupts anchored at the head) or ``global:<id>`` (session-wide)."""
    kind, _, ids = how.partition(":")
    scope = "session" if kind == "global" else "branch"
    for iid in ids.split(","):
        raiser["pw"].sessions.raise_interrupt(session, "wait", interrupt_id=iid, scope=scope)
    return "parked"


self_parking = Workflow("session-self-parking", tools={"park": park_branch}, decide=note_triggers)


@self_parking.node(start=True)
def parks_itself(data: dict[str, Any]) -> None:
    """Calls the tool with its message; plain code follows the call (no hook that would hold by
    itself). Woken with triggers, it lists them once its question is answered."""
    result = use_tool("park", {"session": data["session"], "how": data["messages"][-1]["content"]}, id="park")
    follow_ons.append(result)
    seen = use_triggers()
    if seen:
        confirmed = use_interrupt({"kind": "text", "question": "Go on?"}, id="confirm")
        listed = ", ".join(f"{t['interrupt_id']}={t['payload']}" for t in seen)
        add_message(f"triggers {listed} ({confirmed})", id="triggers")
        return
    add_message(f"after {result}", id="reply")


def park_session(session: str) -> str:
    """Raises a session-wide interrupt ``stop`` on ``session`` with ``raiser``'s client."""
    raiser["pw"].sessions.raise_interrupt(session, "budget stop", interrupt_id="stop", scope="session")
    return "stop"


parks_then_calls = Workflow("session-parks-then-calls")


@parks_then_calls.node(start=True)
def park_then_call(data: dict[str, Any]) -> None:
    """Parks its own session in plain code (once: a recorded step, no hook that holds by itself),
    then calls a model that counts its calls on disk (the first message is a directory): the
    branch is parked after the run began, so only the call's own check can hold it there."""
    use_step("park", park_session, data["session"])
    turn = use_model(CountedModel(), data["messages"], id="turn")
    add_message(turn["answer"], id="reply")


bulky = Workflow("session-bulky")


@bulky.node(start=True)
def bulky_reply(data: dict[str, Any]) -> None:
    """``bulk <n>``: adds n assistant messages of 100,000 characters each."""
    n = int(str(data["messages"][-1]["content"]).split()[1])
    for i in range(n):
        add_message(str(i % 10) * 100_000, id=f"bulk-{i:03d}")


class EchoModel:
    """A model that answers every call (a ScriptedModel's turns run out in a long-lived worker)."""

    def complete(self, messages: Sequence[Mapping[str, Any]], tools: Any) -> dict[str, Any]:
        return {"answer": f"you said {messages[-1]['content'] if messages else ''}"}


busy = Workflow("session-busy")
"""the property test's agent: asks when the message starts with '?', else answers through the model;
a run dispatched for cleared interrupts says so"""


@busy.node(start=True)
def busy_reply(data: dict[str, Any]) -> None:
    if (data.get("trigger") or {}).get("type") == "interrupt.resumed":
        add_message("woken by " + ", ".join(t["interrupt_id"] for t in use_triggers()), id="woken")
        return
    last = data["messages"][-1]["content"] if data["messages"] else ""
    if last.startswith("?"):
        add_message(f"noted {use_interrupt({'kind': 'text', 'question': last}, id='ask')}", id="reply")
        return
    add_message(use_model(EchoModel(), data["messages"], id="turn")["answer"], id="reply")


TRIPS: dict[str, int] = {"now": 0, "at_model": -1}
"""parkway's round trips so far (``pw:`` keys; a test counts them) and their count at the model call"""


class TripModel:
    def complete(self, messages: Sequence[Mapping[str, Any]], tools: Any) -> dict[str, Any]:
        TRIPS["at_model"] = TRIPS["now"]
        return {"answer": "ok"}


tripped = Workflow("session-tripped")


@tripped.node(start=True)
def tripped_reply(data: dict[str, Any]) -> None:
    add_message(use_model(TripModel(), data["messages"], id="turn")["answer"], id="reply")


policy_seen: list[dict[str, Any]] = []
"""every trigger ``noted_mail``'s policy was shown, in order (tests clear it)"""


def noting_decide(trigger: dict[str, Any], proposed: list[dict[str, Any]]) -> Any:
    """The seed's policy, noting each trigger it is shown."""
    policy_seen.append(dict(trigger))
    return decide(trigger, proposed)


noted_mail = Workflow("session-noted-mail", tools={"send_email": send_email}, decide=noting_decide)


@noted_mail.node(start=True)
def noted_mailer(data: dict[str, Any]) -> None:
    """The approval of send_email, then a deferred lookup: both kinds of held tool call in one run."""
    if _trigger_reply(data):
        return
    try:
        result = use_tool("send_email", {"to": "bob"}, id="mail")
    except ToolError as exc:
        result = f"not sent: {exc}"
    found = use_tool("lookup", {"q": "bob"}, id="lk")
    add_message(f"done: {result}, found {found}", id="reply")
