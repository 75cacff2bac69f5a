"""Forks from the integrations, by the library's fork: ``EventLogSession.fork`` (OpenAI Agents
SDK) and ``EventLogSessionService.fork_session`` (Google ADK, in the shape ADK's issue #4010
proposes). The fork holds the source's history up to the boundary and goes on by itself; the
source is unchanged; the fork's header names the source."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agents import Agent, Runner
from agents.testing import ScriptedModel, assistant_message

from agent_session.integrations.google_adk import EventLogSessionService
from agent_session.integrations.google_adk.mapping import log_id
from agent_session.integrations.openai_agents import DurableRunHooks, EventLogSession
from agent_session.stores import parse_store
from tests.adk_kit import APP, SCRIPT, runner, say


async def _header(store: Path, id: str) -> Any:
    backend = parse_store(str(store)).open()
    try:
        return (await backend.inspect(id)).header
    finally:
        await backend.aclose()


async def test_an_sdk_session_forks_after_a_run_and_the_fork_goes_on(tmp_path: Path) -> None:
    model = ScriptedModel(
        [
            [assistant_message("One.", item_id="m1")],
            [assistant_message("Two.", item_id="m2")],
            [assistant_message("Other two.", item_id="m3")],
        ]
    )
    agent = Agent(name="a", model=model)
    async with await EventLogSession.open(tmp_path, "s") as session:
        hooks = DurableRunHooks(session)
        await Runner.run(agent, "first", session=session, hooks=hooks)
        after_first = await session.get_items()
        await Runner.run(agent, "second", session=session, hooks=hooks)
        whole = await session.get_items()
        fork = await session.fork(turn=1, new_id="s-alt")
        async with fork:
            assert await fork.get_items() == after_first
            await Runner.run(agent, "second, again", session=fork, hooks=DurableRunHooks(fork))
            items = await fork.get_items()
        assert await session.get_items() == whole  # (the source is only read)
    assert [i.get("content") for i in items if i.get("role") == "user"] == [
        "first",
        "second, again",
    ]
    header = await _header(tmp_path, "s-alt")
    assert header.parent_session == "s"
    assert header.seed_length > 0


async def test_an_adk_session_forks_before_an_invocation(tmp_path: Path) -> None:
    async with EventLogSessionService(tmp_path) as service:
        run, _ = runner(service, SCRIPT)
        await service.create_session(app_name=APP, user_id="u", session_id="s1", state={"k": 1})
        await say(run, "u", "s1", "Add 1+2 and 3+4.")
        middle = await service.get_session(app_name=APP, user_id="u", session_id="s1")
        assert middle is not None
        await say(run, "u", "s1", "Thanks.")
        source = await service.get_session(app_name=APP, user_id="u", session_id="s1")
        assert source is not None
        second = next(e for e in source.events[len(middle.events) :] if e.author == "user")
        forked = await service.fork_session(
            app_name=APP,
            user_id="u",
            source_session_id="s1",
            fork_before_invocation_id=second.invocation_id,
            new_session_id="s2",
        )
        assert [e.model_dump() for e in forked.events] == [e.model_dump() for e in middle.events]
        assert forked.state == middle.state  # (the answer of the first invocation, and "k")
        assert forked.state["k"] == 1
        again, _ = runner(service, [SCRIPT[2]])
        await say(again, "u", "s2", "Bye now.")
        grown = await service.get_session(app_name=APP, user_id="u", session_id="s2")
        assert grown is not None
        assert len(grown.events) == len(middle.events) + 2
        unchanged = await service.get_session(app_name=APP, user_id="u", session_id="s1")
        assert unchanged is not None
        assert [e.model_dump() for e in unchanged.events] == [e.model_dump() for e in source.events]
        listed = await service.list_sessions(app_name=APP, user_id="u")
        assert sorted(s.id for s in listed.sessions) == ["s1", "s2"]
    header = await _header(tmp_path, log_id(APP, "u", "s2"))
    assert header.parent_session == log_id(APP, "u", "s1")


async def test_a_session_on_a_runtime_forks_onto_that_runtime(tmp_path: Path) -> None:
    from agent_session import Runtime, open_store

    model = ScriptedModel([[assistant_message("One.", item_id="m1")]])
    async with Runtime() as runtime:
        runtime.install(open_store(str(tmp_path)))
        session = EventLogSession("s", runtime=runtime, warn_without_hooks=False)
        await Runner.run(Agent(name="a", model=model), "first", session=session)
        fork = await session.fork(new_id="s-copy")
        assert fork.runtime is runtime
        assert fork.warn_without_hooks is False
        assert await fork.get_items() == await session.get_items()
    header = await _header(tmp_path, "s-copy")
    assert header.parent_session == "s"
