"""Workflows the tests run; module-level so worker processes import them as ``tests.flows:NAME``."""

from __future__ import annotations

import asyncio
import os
from collections import Counter
from typing import Any

from pydantic import BaseModel, Field

from parkway import (
    ChildFailed,
    Contract,
    Result,
    Retry,
    Workflow,
    emit,
    use_interrupt,
    use_node_state,
    use_workflow,
    use_workflow_state,
)

effects: Counter[str] = Counter()
"""side effects counted in-process (embedded mode and in-process workers)"""

COLORS = {
    "kind": "choice",
    "question": "Pick a color",
    "options": [{"id": "red", "label": "Red"}, {"id": "blue", "label": "Blue", "description": "the calm one"}],
}


def count_effect(name: str) -> None:
    """Count a side effect in this process and, when PARKWAY_EFFECTS_URL is set, in Redis too."""
    effects[name] += 1
    url = os.environ.get("PARKWAY_EFFECTS_URL")
    if url:
        import redis

        with redis.Redis.from_url(url) as client:
            client.incr(f"test:effects:{name}")


two_questions = Workflow("two_questions")


@two_questions.node(start=True)
def ask_both(data: dict[str, Any]) -> dict[str, Any]:
    name = use_interrupt({"kind": "text", "question": "Your name?"}, id="name")
    color = use_interrupt(COLORS, id="color")
    return {"name": name, "color": color}


guarded = Workflow("guarded")


@guarded.node(start=True)
def send_once(data: dict[str, Any]) -> dict[str, Any]:
    sent, set_sent = use_node_state(False, key="sent")
    if not sent:
        count_effect(f"email:{data['tag']}")
        emit("lifecycle", {"sent": True})
        set_sent(True)
    decision = use_interrupt(COLORS, id="after-email")
    return {"decision": decision}


shared_state = Workflow("shared_state")


@shared_state.node(start=True)
def writer(data: dict[str, Any]) -> None:
    _, set_ticket = use_workflow_state("ticket")
    set_ticket({"id": 42, "by": "writer"})


@shared_state.node
def reader(data: dict[str, Any]) -> dict[str, Any]:
    ticket, _ = use_workflow_state("ticket")
    return {"seen": ticket}


shared_state.edge("writer", "reader")


one_choice = Workflow("one_choice")


@one_choice.node(start=True)
def choose(data: dict[str, Any]) -> Result:
    picked = use_interrupt(COLORS, id="color", ttl_ms=data.get("ttl_ms"))
    return Result(data={"picked": picked}, condition=picked)


@one_choice.node
def paint(data: dict[str, Any]) -> dict[str, Any]:
    return {"painted": data["picked"]}


one_choice.edge("choose", "paint", when="red").edge("choose", "paint", when="blue")


kinds = Workflow("kinds")


@kinds.node(start=True)
def ask_kinds(data: dict[str, Any]) -> dict[str, Any]:
    topics = use_interrupt(
        {
            "kind": "multi-choice",
            "question": "Pick one or more",
            "options": [{"id": "product", "label": "Product"}, {"id": "design", "label": "Design"}],
        },
        id="topics",
    )
    job = use_interrupt({"kind": "choice", "question": "Pick a job", "schemaId": "jobs"}, id="job")
    return {"topics": topics, "job": job}


swallow = Workflow("swallow")


@swallow.node(start=True)
def careless(data: dict[str, Any]) -> dict[str, Any]:
    try:
        answer = use_interrupt(COLORS, id="color")
    except Exception:  # a pause must not be caught here
        return {"swallowed": True}
    return {"answer": answer}


boom = Workflow("boom")


@boom.node(start=True)
def explode(data: dict[str, Any]) -> None:
    raise ValueError("the node broke")


flaky = Workflow("flaky")


@flaky.node(start=True, retry=Retry(attempts=3))
def sometimes(data: dict[str, Any]) -> dict[str, Any]:
    count_effect(f"flaky:{data['tag']}")
    if effects[f"flaky:{data['tag']}"] < 3:
        raise ConnectionError("transient")
    return {"ok": True}


drifting = Workflow("drifting")
drift = {"kind": "choice"}


@drifting.node(start=True)
def drifts(data: dict[str, Any]) -> dict[str, Any]:
    if drift["kind"] == "choice":
        answer = use_interrupt(COLORS, id="q")
    else:
        answer = use_interrupt({"kind": "text", "question": "Now text?"}, id="q")
    return {"answer": answer}


async_flow = Workflow("async_flow")


@async_flow.node(start=True)
async def waits(data: dict[str, Any]) -> dict[str, Any]:
    await asyncio.sleep(0)
    answer = use_interrupt(COLORS, id="color")
    return {"answer": answer}


loop = Workflow("loop")


@loop.node(start=True)
def count_up(data: dict[str, Any]) -> Result:
    n = data.get("n", 0) + 1
    return Result(data={"n": n}, condition="again" if n < 3 else "stop")


@loop.node
def finish(data: dict[str, Any]) -> dict[str, Any]:
    return {"done": True}


loop.edge("count_up", "count_up", when="again").edge("count_up", "finish", when="stop")


denial = Workflow("denial")


@denial.node(start=True)
def gate(data: dict[str, Any]) -> dict[str, Any]:
    from parkway import InterruptCancelled

    try:
        answer = use_interrupt(COLORS, id="approve")
    except InterruptCancelled as exc:
        return {"denied": True, "reason": exc.reason}
    return {"answer": answer}


stepper = Workflow("stepper")


@stepper.node(start=True)
def steps(data: dict[str, Any]) -> dict[str, Any]:
    from parkway import idempotency_key, use_now, use_stable_id, use_step

    charge = use_step("charge", _charge, data["tag"])
    ident = use_stable_id("order")
    when = use_now("placed")
    key = idempotency_key("charge")
    answer = use_interrupt(COLORS, id="confirm")
    return {"charge": charge, "ident": ident, "when": when, "key": key, "answer": answer}


def _charge(tag: str) -> dict[str, Any]:
    count_effect(f"charge:{tag}")
    return {"charged": tag}


def _block_while_flagged(tag: str) -> None:
    """Mark test:inside:<tag>, then wait (up to 60 s) while test:block:<tag> exists in the effects Redis:
    a test acts on a node stopped here (kills its worker, cuts a connection), then lets it go on."""
    import time

    import redis

    with redis.Redis.from_url(os.environ["PARKWAY_EFFECTS_URL"]) as client:
        client.set(f"test:inside:{tag}", 1)
        deadline = time.time() + 60
        while client.exists(f"test:block:{tag}") and time.time() < deadline:
            time.sleep(0.05)


blocking = Workflow("blocking")


@blocking.node(start=True)
def charge_then_block(data: dict[str, Any]) -> dict[str, Any]:
    """Records a step, then blocks while the Redis key test:block:<tag> exists (so a test can kill the worker)."""
    from parkway import use_step

    use_step("charge", _charge, data["tag"])
    _block_while_flagged(data["tag"])
    return {"finished": True}


positional = Workflow("positional")


@positional.node(start=True)
def no_ids(data: dict[str, Any]) -> dict[str, Any]:
    first = use_interrupt({"kind": "text", "question": "First?"})
    second = use_interrupt(COLORS)
    return {"first": first, "second": second}


class JobQuery(BaseModel):
    team: str
    limit: int = 5


class JobPick(BaseModel):
    job_id: str = Field(pattern=r"^job-[0-9]+$", description="the job to run")
    note: str | None = Field(default=None, max_length=200)


pick_job = Contract("pick-job", version=2, request=JobQuery, response=JobPick, question="Which job should run?")

contracted = Workflow("contracted")


@contracted.node(start=True)
def choose_job(data: dict[str, Any]) -> dict[str, Any]:
    pick = use_interrupt(contract=pick_job, request={"team": data["team"]}, id="job")
    assert isinstance(pick, JobPick)  # the node gets the validated model
    return {"job": pick.job_id, "note": pick.note}


seed_shapes = Workflow("seed_shapes")


@seed_shapes.node(start=True)
def ask_like_the_seed(data: dict[str, Any]) -> dict[str, Any]:
    count, set_count = use_node_state(0, key="count")
    if count == 0:
        set_count(lambda n: n + 1)
        set_count(lambda n: n + 1)  # the second sees the first
    _, set_total = use_workflow_state("total", 10)
    set_total(lambda t: (t or 0) + 5)
    note = use_interrupt({"question": "Why?"}, id="why")  # no kind: text
    team = use_interrupt(
        {"multiple": True, "question": "Teams?",
         "options": [{"id": "a", "label": "A", "value": {"cost": 3}}, {"id": "b", "label": "B", "value": {"cost": 4}}]},
        id="teams",
    )
    return {"note": note, "teams": team, "count": count}


@seed_shapes.node
def tally(data: dict[str, Any]) -> dict[str, Any]:
    total, _ = use_workflow_state("total")
    return {"total": total}


seed_shapes.edge("ask_like_the_seed", "tally")


delivering = Workflow("delivering")


@delivering.node(start=True)
def answer_first(data: dict[str, Any]) -> dict[str, Any]:
    from parkway import complete_response

    emit("answer", {"text": "here is your answer"})
    complete_response({"summary": "answered"})
    ok = use_interrupt(COLORS, id="after")  # keeps working after delivery, and may still pause
    return {"after": ok}


@delivering.node
def wrap_up(data: dict[str, Any]) -> dict[str, Any]:
    count_effect("wrap_up")
    return {"wrapped": True}


delivering.edge("answer_first", "wrap_up")


expiring = Workflow("expiring", on_expire=None)


@expiring.node(start=True)
def ask_with_policy(data: dict[str, Any]) -> dict[str, Any]:
    from parkway import InterruptCancelled

    try:
        picked = use_interrupt(COLORS, id="color", ttl_ms=1000, on_expire=data.get("policy"))
    except InterruptCancelled as exc:
        return {"picked": None, "cancelled": exc.reason}
    return {"picked": picked}


fails_on_expiry = Workflow("fails_on_expiry", on_expire="fail")


@fails_on_expiry.node(start=True)
def ask_then_fail(data: dict[str, Any]) -> dict[str, Any]:
    return {"picked": use_interrupt(COLORS, id="color", ttl_ms=1000)}


announcer = Workflow("announcer")


@announcer.node(start=True)
def announce(data: dict[str, Any]) -> dict[str, Any]:
    from parkway import use_step

    emit("progress", {"stage": "charging"})  # positional: recorded at @0
    charge = use_step("charge", _charge, data["tag"])
    return {"charge": charge, "answer": use_interrupt(COLORS, id="confirm")}


announcer_changed = Workflow("announcer")


@announcer_changed.node(start=True)
def announce(data: dict[str, Any]) -> dict[str, Any]:  # noqa: F811 - the same node after a code change
    from parkway import use_step

    seen, _ = use_node_state(False)  # now @0 is node state, where the journal holds an emit
    charge = use_step("charge", _charge, data["tag"])
    return {"charge": charge, "answer": use_interrupt(COLORS, id="confirm"), "seen": seen}


def _lookup_team(team: str) -> dict[str, Any]:
    count_effect(f"lookup:{team}")
    return {"team": team, "size": 3}


def _final_from_tool(messages: Any) -> dict[str, Any]:
    picked = [m["result"] for m in messages if m.get("role") == "tool" and "result" in m and "job_id" in m["result"]]
    return {"answer": {"picked": picked[-1]["job_id"] if picked else None}}


reasoners: dict[str, Any] = {}
"""the scripted model each reasoning test plays (module-level, so replays in this process see it)"""

reasoning = Workflow("reasoning")


@reasoning.node(start=True)
def think(data: dict[str, Any]) -> dict[str, Any]:
    from parkway.agents import use_reason

    answer = use_reason(
        reasoners[data["script"]],
        data["question"],
        id="plan",
        contracts=[pick_job],
        tools={"lookup_team": _lookup_team},
        mode=data.get("mode", "optional"),
        max_requests=data.get("max_requests", 1),
    )
    return {"answer": answer}


# --- child workflows ---------------------------------------------------------

leaf = Workflow("leaf")


@leaf.node(start=True)
def leaf_ask(data: dict[str, Any]) -> dict[str, Any]:
    count_effect("leaf:body")
    color = use_interrupt(COLORS, id="leaf-color")
    return {"color": color, "depth": data["depth"]}


middle = Workflow("middle")


@middle.node(start=True)
def middle_call(data: dict[str, Any]) -> dict[str, Any]:
    count_effect("middle:body")
    out = use_workflow(leaf, {"depth": data["depth"] + 1}, id="leaf")
    return {"leaf": out, "depth": data["depth"]}


tree = Workflow("tree")


@tree.node(start=True)
def tree_call(data: dict[str, Any]) -> dict[str, Any]:
    count_effect("tree:body")
    first = use_workflow(middle, {"depth": 1}, id="middle")
    second = use_workflow(adder, {"a": 2, "b": 3}, id="add")
    return {"middle": first, "sum": second["sum"]}


adder = Workflow("adder")


@adder.node(start=True)
def add(data: dict[str, Any]) -> dict[str, Any]:
    count_effect("adder:body")
    return {"sum": data["a"] + data["b"]}


broken = Workflow("broken")


@broken.node(start=True)
def break_down(data: dict[str, Any]) -> None:
    raise ValueError("the child broke")


catches_child = Workflow("catches_child")


@catches_child.node(start=True)
def call_broken(data: dict[str, Any]) -> dict[str, Any]:
    try:
        use_workflow(broken, {}, id="broken")
    except ChildFailed as exc:
        return {"caught": exc.status, "child": exc.child_run_id, "message": exc.error_message}
    return {"caught": None}


lets_child_fail = Workflow("lets_child_fail")


@lets_child_fail.node(start=True)
def call_broken_uncaught(data: dict[str, Any]) -> None:
    use_workflow(broken, {}, id="broken")


brief_leaf = Workflow("brief_leaf")


@brief_leaf.node(start=True)
def brief_ask(data: dict[str, Any]) -> dict[str, Any]:
    return {"color": use_interrupt(COLORS, id="quick", ttl_ms=1000)}


awaits_brief = Workflow("awaits_brief")


@awaits_brief.node(start=True)
def call_brief(data: dict[str, Any]) -> dict[str, Any]:
    try:
        return {"color": use_workflow(brief_leaf, {}, id="brief")["color"]}
    except ChildFailed as exc:
        return {"caught": exc.status}


long_leaf = Workflow("long_leaf")


@long_leaf.node(start=True)
def long_ask(data: dict[str, Any]) -> dict[str, Any]:
    return {"color": use_interrupt(COLORS, id="slow", ttl_ms=3_600_000)}


awaits_long = Workflow("awaits_long")


@awaits_long.node(start=True)
def call_long(data: dict[str, Any]) -> dict[str, Any]:
    return {"color": use_workflow(long_leaf, {}, id="long")["color"]}


calls_nowhere = Workflow("calls_nowhere")


@calls_nowhere.node(start=True)
def call_missing(data: dict[str, Any]) -> None:
    use_workflow("tests.flows:no_such_workflow", {}, id="missing")


relay = Workflow("relay")


@relay.node(start=True)
def relay_first(data: dict[str, Any]) -> Result:
    emit("progress", {"part": 1})
    emit("progress", {"part": 2})
    return Result(data={"first": True})


@relay.node
def relay_second(data: dict[str, Any]) -> dict[str, Any]:
    """Emits, then blocks while test:block:<tag> exists (a test kills the worker here)."""
    emit("progress", {"part": 3})
    _block_while_flagged(data["tag"])
    emit("progress", {"part": 4})
    return {"parts": 4}


relay.edge("relay_first", "relay_second")


quitter = Workflow("quitter")


@quitter.node(start=True)
def quit_now(data: dict[str, Any]) -> None:
    """Raises SystemExit, as a careless node might (sys.exit)."""
    raise SystemExit(3)


counted_choice = Workflow("counted_choice")


@counted_choice.node(start=True)
def counted_ask(data: dict[str, Any]) -> dict[str, Any]:
    count_effect(f"entered:{data['tag']}")  # each run of the node's body, first and replays alike
    picked = use_interrupt(COLORS, id="color")
    return {"picked": picked}


answer_then_block = Workflow("answer_then_block")


@answer_then_block.node(start=True)
def ask_then_block(data: dict[str, Any]) -> dict[str, Any]:
    """Asks for a color; once answered, blocks while the Redis key test:block:<tag> exists (so a test
    can act between the replay's first line and its last commit)."""
    picked = use_interrupt(COLORS, id="color")
    _block_while_flagged(data["tag"])
    return {"picked": picked}
