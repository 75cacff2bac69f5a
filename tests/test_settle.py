"""Settling a turn a crash interrupted, in process: each effect class and probe answer, a
crash during settlement, and what the log and the model see afterwards. (The real-process
kills are in ``tests/test_settle_crash.py``.)"""

from __future__ import annotations

import contextlib
import copy
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent_session import (
    AgentRuntime,
    MemoryPersistence,
    MemoryStore,
    ScriptedCall,
    ScriptedModel,
    ScriptedStep,
    checkpoint_policy,
)
from agent_session.agent_loop.effects import Applied, NotApplied, Unknown, effect_of_mcp
from agent_session.interchange.export import check_transcript
from agent_session.recovery import closers
from tests.sweeps import examples


class Crash(BaseException):
    """The process dies here (what is stored at that moment is all a restart finds)."""


class World:
    """The outside world the tools act on, keyed by call id, and the disk."""

    def __init__(self) -> None:
        self.store = MemoryStore()
        self.disk = MemoryStore()
        self.effects: list[str] = []
        self.crash_in: str | None = None

    def die(self) -> None:
        self.disk.logs = copy.deepcopy(self.store.logs)
        raise Crash


def runtime(world: World, effect: str, probe: Any = None, *, store: MemoryStore) -> AgentRuntime:
    rt = AgentRuntime()
    rt.install(MemoryPersistence(store, repair=closers))
    rt.install(checkpoint_policy)

    async def pay(args: Any, call: Any) -> str:
        world.effects.append(f"pay:{call.call_id}")
        if world.crash_in == call.call_id:
            world.die()
        return f"paid {args['amount']}"

    async def notify(args: Any, call: Any) -> str:
        world.effects.append(f"notify:{call.call_id}")
        return "notified"

    rt.tools.register(
        "pay", "Pay.", {"type": "object"}, pay, exclusive=True, effect=effect, reconcile=probe
    )
    rt.tools.register("notify", "Notify.", {"type": "object"}, notify, exclusive=True)
    return rt


def asking() -> ScriptedModel:
    calls = [
        ScriptedCall("c-pay", "pay", ['{"amount": 5}']),
        ScriptedCall("c-notify", "notify", ["{}"]),
    ]
    return ScriptedModel([ScriptedStep(calls=calls), ScriptedStep(text=["Done."])])


async def crashed(world: World, effect: str, probe: Any = None) -> None:
    """Turn 1 dies inside pay's body, after its effect: pay's outcome is unknown, notify never
    started."""
    rt = runtime(world, effect, probe, store=world.store)
    rt.models.register("m", asking())
    session = rt.sessions.create("s")
    world.crash_in = "c-pay"
    with pytest.raises(Crash):
        await rt.agent(session, model="m/x").run_turn("Pay 5 and notify.")
    world.crash_in = None


async def resumed(world: World, effect: str, probe: Any = None) -> tuple[Any, Any]:
    rt = runtime(world, effect, probe, store=world.disk)
    model = ScriptedModel([ScriptedStep(text=["All settled."])])
    rt.models.register("m", model)
    session = await rt.sessions.resume("s")
    reason = await rt.agent(session, model="m/x").resume()
    await rt.__aexit__(None, None, None)
    return reason, session


def settled(session: Any) -> dict[str, tuple[str | None, str]]:
    """Each call's last result: how it was settled, and its text."""
    out: dict[str, tuple[str | None, str]] = {}
    for event in session.events:
        if event.type == "tool/result":
            block = event.data["message"]["content"][0]
            meta = event.data.get("meta") or {}
            text = "".join(part.get("text", "") for part in block["content"])
            out[block["toolCallId"]] = (meta.get("settlement"), text[:20])
    return out


@pytest.mark.parametrize(
    ("effect", "probe", "pay_how", "pay_text", "pays"),
    [
        ("read", None, "re-run", "paid 5", 2),
        ("idempotent", None, "re-run", "paid 5", 2),
        ("unsafe", None, "unknown", "The tool call was int", 1),
        ("unsafe", "applied", "reconciled", "found payment c-pay", 1),
        ("unsafe", "not-applied", "run-after-probe", "paid 5", 2),
        ("unsafe", "unknown", "unknown", "The tool call was int", 1),
        ("unsafe", "raises", "unknown", "The tool call was int", 1),
    ],
)
async def test_each_class_and_probe_answer_settles_as_promised(
    effect: str, probe: str | None, pay_how: str, pay_text: str, pays: int
) -> None:
    async def reconcile(call: Any) -> Any:
        if probe == "raises":
            raise RuntimeError("the provider is down")
        return {
            "applied": Applied(f"found payment {call.call_id}"),
            "not-applied": NotApplied(),
            "unknown": Unknown(),
        }[str(probe)]

    world = World()
    await crashed(world, effect, reconcile if probe else None)
    assert world.effects == ["pay:c-pay"]
    reason, session = await resumed(world, effect, reconcile if probe else None)
    assert reason == {"kind": "completed"}
    assert world.effects.count("pay:c-pay") == pays  # an unsafe effect at most once
    assert world.effects.count("notify:c-notify") == 1  # never started: dispatched once
    assert settled(session)["c-pay"] == (pay_how, pay_text[:20])
    assert settled(session)["c-notify"] == ("dispatched", "notified")
    messages = session.derive_messages()
    check_transcript(messages)  # one result per call, as providers require
    results = [m for m in messages if m["role"] == "user" and m["source"]["kind"] == "tool"]
    assert [r["source"]["callId"] for r in results] == ["c-pay", "c-notify"]
    assert messages[-1]["content"] == [{"type": "text", "text": "All settled."}]
    assert session.interrupted is None


async def test_a_crash_during_settlement_is_settled_again_without_repeating_effects() -> None:
    world = World()
    await crashed(world, "idempotent")
    world.store = world.disk  # the restarted process writes what the crash left
    world.disk = MemoryStore()
    rt = runtime(world, "idempotent", store=world.store)
    rt.models.register("m", ScriptedModel([ScriptedStep(text=["never"])]))
    session = await rt.sessions.resume("s")
    world.crash_in = "c-pay"  # the re-run of pay dies too, after its effect
    with pytest.raises(Crash):
        await rt.agent(session, model="m/x").resume()
    world.crash_in = None
    reason, session = await resumed(world, "idempotent")
    assert reason == {"kind": "completed"}
    assert world.effects == ["pay:c-pay", "pay:c-pay", "pay:c-pay", "notify:c-notify"]
    assert settled(session)["c-pay"] == ("re-run", "paid 5")
    check_transcript(session.derive_messages())
    turns = [e.data["reason"]["kind"] for e in session.events if e.type == "turn/end"]
    assert turns == ["interrupted", "interrupted", "completed"]


async def test_results_a_crash_did_not_lose_are_kept_as_they_were() -> None:
    world = World()
    rt = runtime(world, "unsafe", store=world.store)
    calls = [ScriptedCall("c-notify", "notify", ["{}"]), ScriptedCall("c-pay", "pay", ["{}"])]
    rt.models.register("m", ScriptedModel([ScriptedStep(calls=calls)]))
    world.crash_in = "c-pay"
    with pytest.raises(Crash):
        await rt.agent(rt.sessions.create("s"), model="m/x").run_turn("go")
    reason, session = await resumed(world, "unsafe")
    assert reason == {"kind": "completed"}
    assert world.effects == ["notify:c-notify", "pay:c-pay"]
    assert settled(session) == {
        "c-notify": (None, "notified"),
        "c-pay": ("unknown", "The tool call was in"),
    }


async def test_nothing_to_finish_when_the_model_had_answered_or_nothing_crashed() -> None:
    world = World()
    rt = runtime(world, "unsafe", store=world.store)
    rt.models.register("m", ScriptedModel([ScriptedStep(text=["Hi."])]))
    session = rt.sessions.create("s")
    agent = rt.agent(session, model="m/x")
    await agent.run_turn("hello")
    assert await agent.resume() is None  # the last turn completed


def test_mcp_annotations_map_onto_effect_classes() -> None:
    assert effect_of_mcp({"readOnlyHint": True, "idempotentHint": True}) == "read"
    assert effect_of_mcp({"idempotentHint": True}) == "idempotent"
    assert effect_of_mcp({"destructiveHint": False}) == "unsafe"
    assert effect_of_mcp({"readOnlyHint": "yes"}) == "unsafe"
    assert effect_of_mcp(None) == "unsafe"


def test_a_probe_belongs_to_an_unsafe_tool_and_classes_are_checked() -> None:
    rt = AgentRuntime()

    async def body(args: Any, call: Any) -> str:
        return ""

    async def probe(call: Any) -> Any:
        return Unknown()

    with pytest.raises(ValueError, match="a read tool needs no reconcile probe"):
        rt.tools.register("t", "", {}, body, effect="read", reconcile=probe)
    with pytest.raises(ValueError, match="effect must be one of read, idempotent, unsafe"):
        rt.tools.register("t", "", {}, body, effect="sometimes")  # type: ignore[arg-type]


CALL_IDS = ["c-read", "c-idem", "c-pay"]


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    crashes=st.lists(st.tuples(st.sampled_from(CALL_IDS), st.booleans()), max_size=4),
    probe=st.sampled_from(["none", "finds", "cannot-tell"]),
)
async def test_any_interleaving_of_crashes_and_resumes_leaves_one_result_per_call(
    crashes: list[tuple[str, bool]], probe: str
) -> None:
    """Run after run, the process dies in the body of the call the plan names (before or
    after its effect); each later run resumes. The log always ends with one visible result
    per call, an unsafe effect happens at most once, and the job finishes."""
    effects: list[str] = []
    stored = MemoryStore()
    plan = list(crashes)

    async def body(args: Any, call: Any) -> str:
        if plan and plan[0][0] == call.call_id:
            _, after = plan[0]
            if after:
                effects.append(call.call_id)
            disk.logs = copy.deepcopy(stored.logs)
            raise Crash
        effects.append(call.call_id)
        return f"done {call.call_id}"

    async def reconcile(call: Any) -> Any:
        if probe == "cannot-tell":
            return Unknown()
        return Applied("found") if call.call_id in effects else NotApplied()

    def fresh(store: MemoryStore, model: ScriptedModel) -> AgentRuntime:
        rt = AgentRuntime()
        rt.install(MemoryPersistence(store, repair=closers))
        rt.install(checkpoint_policy)
        rt.tools.register("look", "", {}, body, effect="read")
        rt.tools.register("upsert", "", {}, body, effect="idempotent", exclusive=True)
        pay_probe = None if probe == "none" else reconcile
        rt.tools.register("pay", "", {}, body, exclusive=True, reconcile=pay_probe)
        rt.models.register("m", model)
        return rt

    calls = [
        ScriptedCall("c-read", "look", ["{}"]),
        ScriptedCall("c-idem", "upsert", ["{}"]),
        ScriptedCall("c-pay", "pay", ["{}"]),
    ]
    disk = MemoryStore()
    rt = fresh(stored, ScriptedModel([ScriptedStep(calls=calls), ScriptedStep(text=["ok"])]))
    session = rt.sessions.create("s")
    finished: Any = None
    with contextlib.suppress(Crash):
        finished = await rt.agent(session, model="m/x").run_turn("go")
    for _ in range(len(crashes) + 1):
        if finished is not None:
            break
        plan.pop(0)
        stored = disk
        disk = MemoryStore()
        rt = fresh(stored, ScriptedModel([ScriptedStep(text=["ok"])] * 2))
        session = await rt.sessions.resume("s")
        with contextlib.suppress(Crash):
            finished = await rt.agent(session, model="m/x").resume() or {"kind": "nothing"}
    assert finished == {"kind": "completed"}
    messages = session.derive_messages()
    check_transcript(messages)
    answered = [m["source"]["callId"] for m in messages if m["source"]["kind"] == "tool"]
    assert answered == CALL_IDS  # one result each, in the model's order
    assert effects.count("c-pay") <= 1
