"""Each model request read back from the log (``logged_requests``) is the request the adapter
was handed: the same messages, system prompt, tools and model, across tool steps, a changed
system prompt, a resume in a new process's runtime and a settlement step, which makes none."""

from __future__ import annotations

from typing import Any

from agent_session import (
    AgentRuntime,
    MemoryPersistence,
    MemoryStore,
    ScriptedCall,
    ScriptedModel,
    ScriptedStep,
    checkpoint_policy,
)
from agent_session.recovery import closers
from agent_session.session.events.requests import logged_requests
from agent_session.session.json.lossless import thaw


def _runtime(store: MemoryStore, model: ScriptedModel) -> AgentRuntime:
    runtime = AgentRuntime()
    runtime.install(MemoryPersistence(store, repair=closers))
    runtime.install(checkpoint_policy)
    runtime.models.register("m", model)

    async def look(args: Any, call: Any) -> str:
        return f"saw {args['what']}"

    runtime.tools.register("look", "Look at a thing.", {"type": "object"}, look)
    return runtime


def _sent(model: ScriptedModel) -> list[tuple[Any, ...]]:
    return [
        (r.provider, r.model, r.system, thaw(list(r.tools)), thaw(list(r.messages)))
        for r in model.requests
    ]


def _read(events: Any) -> list[tuple[Any, ...]]:
    return [
        (
            r.config.get("provider"),
            r.config.get("model"),
            r.system,
            thaw(list(r.tools)),
            thaw(r.messages),
        )
        for r in logged_requests(events)
    ]


async def test_the_requests_read_back_are_the_ones_the_adapter_was_sent() -> None:
    store = MemoryStore()
    first = ScriptedModel(
        [
            ScriptedStep(calls=[ScriptedCall("c1", "look", ['{"what": "a"}'])]),
            ScriptedStep(text=["It is a."]),
            ScriptedStep(text=["Hello."]),
        ]
    )
    runtime = _runtime(store, first)
    session = runtime.sessions.create("s")
    await runtime.agent(session, model="m/one", system="Be brief.").run_turn("What is it?")
    await runtime.agent(session, model="m/two", system="Be kind.").run_turn("Hi.")
    await runtime.__aexit__(None, None, None)
    assert len(first.requests) == 3
    assert _read(session.events) == _sent(first)
    later = ScriptedModel([ScriptedStep(text=["Again."])])
    runtime = _runtime(store, later)
    resumed = await runtime.sessions.resume("s")
    await runtime.agent(resumed, model="m/two").run_turn("Once more.")
    await runtime.__aexit__(None, None, None)
    assert _read(resumed.events) == _sent(first) + _sent(later)
    assert [r.step for r in logged_requests(resumed.events)] == [1, 2, 1, 1]
    (last,) = logged_requests(resumed.events)[-1:]
    assert [resumed.events[seq].type for seq in last.message_seqs][-1] == "user/message"
    assert last.system is None  # (the resumed agent was given none: the header changed)


async def test_a_settlement_step_made_no_request_and_the_next_step_s_is_read_back() -> None:
    from tests.test_settle import World, crashed, resumed

    world = World()
    await crashed(world, "idempotent")
    _, session = await resumed(world, "idempotent")
    requests = logged_requests(session.events)
    assert [(r.turn, r.step) for r in requests] == [(1, 1), (2, 2)]
    history = thaw(session.derive_messages())
    assert thaw(requests[1].messages) == history[:-1]  # all but the answer it got
