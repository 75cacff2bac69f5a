"""``EventLogSession`` used the ways the OpenAI Agents SDK's own tests use a session, with the
SDK's ``agents.testing`` helpers and the real ``Runner``, against the SDK's ``SQLiteSession``
as the baseline: models that give every item the same id, a session opened on one event loop
and used on another, several threads each with its own loop, two runs at once, settings as a
dict."""

from __future__ import annotations

import asyncio
import contextlib
import threading
import uuid
from pathlib import Path
from typing import Any

import pytest
from agents import Agent, Runner, SQLiteSession, function_tool
from agents.testing import ScriptedModel, assistant_message, function_call
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent_session.integrations.openai_agents import DurableRunHooks, EventLogSession
from agent_session.session import SessionEventError
from tests.sweeps import examples


def _agent(model: ScriptedModel) -> Agent[Any]:
    @function_tool
    async def lookup(key: str) -> str:
        """Look a key up."""
        return f"value of {key}"

    return Agent(name="helper", model=model, tools=[lookup])


def _same_ids() -> ScriptedModel:
    """Every message gets the SDK helper's default id ``scripted-message``."""
    return ScriptedModel(
        [
            [assistant_message("Looking."), function_call("lookup", {"key": "k"}, call_id="c1")],
            [assistant_message("The value is v.")],
            [assistant_message("Still v.")],
        ]
    )


@pytest.mark.parametrize("hooks", [True, False], ids=["hooks", "no-hooks"])
async def test_messages_sharing_an_id_are_all_kept(tmp_path: Path, hooks: bool) -> None:
    """A run that says something, calls a tool and answers keeps the answer (it was dropped as
    a repeat of the first message's id), and the next run's model input has it."""
    baseline_model, model = _same_ids(), _same_ids()
    baseline = SQLiteSession("baseline")
    for text in ("what is k?", "and now?"):
        await Runner.run(_agent(baseline_model), text, session=baseline)
    async with await EventLogSession.open(tmp_path, "s") as session:
        for text in ("what is k?", "and now?"):
            await Runner.run(
                _agent(model),
                text,
                session=session,
                hooks=DurableRunHooks(session) if hooks else None,
            )
        assert await session.get_items() == await baseline.get_items()
    assert [call.input for call in model.calls] == [call.input for call in baseline_model.calls]
    async with await EventLogSession.open(tmp_path, "s") as again:
        assert await again.get_items() == await baseline.get_items()


def test_a_session_opened_on_one_loop_works_on_another_while_the_first_is_open(
    tmp_path: Path,
) -> None:
    """The SDK's pytest setup opens sessions on a session-scoped loop and runs each test on
    another; the first loop stays open (not running) the whole time."""
    first = asyncio.new_event_loop()
    try:
        session = first.run_until_complete(EventLogSession.open(tmp_path, "s"))
        for n in range(3):
            asyncio.run(session.add_items([{"role": "user", "content": f"m{n}"}]))
        assert len(asyncio.run(session.get_items())) == 3
        first.run_until_complete(session.aclose())
    finally:
        first.close()

    async def reopened() -> list[Any]:
        async with await EventLogSession.open(tmp_path, "s") as again:
            return await again.get_items()

    assert [item["content"] for item in asyncio.run(reopened())] == ["m0", "m1", "m2"]


@pytest.mark.parametrize("built", ["opened", "constructed"])
def test_threads_each_with_a_loop_write_one_session(tmp_path: Path, built: str) -> None:
    """Ten threads, each running its own loop, add an item at once (the SDK's
    ``test_sqlite_session_concurrent_access``): all ten are kept and durable, as
    ``SQLiteSession`` keeps them, whether the session was opened on a loop or built as the
    SDK builds its own (no loop, nothing opened before the threads' first calls)."""
    if built == "opened":
        session = asyncio.run(EventLogSession.open(tmp_path, "s"))
    else:
        session = EventLogSession("s", tmp_path)
    errors: list[BaseException] = []
    start = threading.Barrier(10)

    def writer(n: int) -> None:
        start.wait()
        try:
            asyncio.run(session.add_items([{"role": "user", "content": f"t{n}"}]))
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(10)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    asyncio.run(session.aclose())

    async def reopened() -> list[Any]:
        async with await EventLogSession.open(tmp_path, "s") as again:
            return await again.get_items()

    assert sorted(item["content"] for item in asyncio.run(reopened())) == [
        f"t{n}" for n in range(10)
    ]


async def test_two_runs_at_once_keep_what_sqlite_session_keeps(tmp_path: Path) -> None:
    def model() -> ScriptedModel:
        return ScriptedModel([[assistant_message("One.", item_id="m1")]])

    def other() -> ScriptedModel:
        return ScriptedModel([[assistant_message("Two.", item_id="m2")]])

    baseline = SQLiteSession("baseline")
    await asyncio.gather(
        Runner.run(Agent(name="a", model=model()), "first", session=baseline),
        Runner.run(Agent(name="b", model=other()), "second", session=baseline),
    )
    async with await EventLogSession.open(tmp_path, "s") as session:
        await asyncio.gather(
            Runner.run(
                Agent(name="a", model=model()),
                "first",
                session=session,
                hooks=DurableRunHooks(session),
            ),
            Runner.run(
                Agent(name="b", model=other()),
                "second",
                session=session,
                hooks=DurableRunHooks(session),
            ),
        )
        items = await session.get_items()
    expected = await baseline.get_items()
    assert len(items) == len(expected)
    assert sorted(map(repr, items)) == sorted(map(repr, expected))


async def test_settings_given_as_a_dict_are_coerced(tmp_path: Path) -> None:
    async with await EventLogSession.open(tmp_path, "s", session_settings={"limit": 1}) as s:
        await s.add_items([{"role": "user", "content": "a"}, {"role": "user", "content": "b"}])
        assert await s.get_items() == [{"role": "user", "content": "b"}]
        assert len(await s.get_items(limit=2)) == 2


@pytest.mark.parametrize("how", ["clear", "pop"])
async def test_a_call_taken_away_unanswered_is_never_answered_later(
    tmp_path: Path, how: str
) -> None:
    """A run stops for an approval with its call unanswered; the user clears the session (or
    pops the call) and starts over: no later model input carries an answer to that call (a
    ``function_call_output`` without its call, which the Responses API refuses), not after
    a new message and not after a reload."""

    @function_tool(needs_approval=True)
    async def transfer(amount: int) -> str:
        """Move money."""
        return "moved"

    model = ScriptedModel(
        [
            [function_call("transfer", {"amount": 5}, call_id="c1")],
            [assistant_message("Hello again.", item_id="m2")],
            [assistant_message("Still here.", item_id="m3")],
        ]
    )
    agent = Agent(name="bank", model=model, tools=[transfer])
    async with await EventLogSession.open(tmp_path, "s") as session:
        stopped = await Runner.run(agent, "pay", session=session, hooks=DurableRunHooks(session))
        assert stopped.interruptions
        if how == "clear":
            await session.clear_session()
        else:
            assert (await session.pop_item())["call_id"] == "c1"
        await Runner.run(agent, "start over", session=session, hooks=DurableRunHooks(session))
    async with await EventLogSession.open(tmp_path, "s") as session:  # a reload
        await Runner.run(agent, "and now", session=session, hooks=DurableRunHooks(session))
        items = await session.get_items()
    for call in model.calls[1:]:
        outputs = [
            i for i in call.input if isinstance(i, dict) and i.get("type") == "function_call_output"
        ]
        assert outputs == []
    assert not any(i.get("type") == "function_call_output" for i in items)


_OPS = st.lists(
    st.sampled_from(["user", "call", "output", "answer", "kept", "pop", "clear"]),
    min_size=1,
    max_size=25,
)


@settings(
    max_examples=examples(40),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(ops=_OPS)
async def test_the_kept_history_is_the_history_read_whole(tmp_path: Path, ops: list[str]) -> None:
    """``get_items`` reads an index kept as the log grows (rebuilt after a pop or a clear):
    after any sequence of adds, pops and clears, every ``limit`` of it gives what reading the
    whole log gives."""
    from agent_session.integrations.openai_agents.history import history

    root = tmp_path / uuid.uuid4().hex
    async with await EventLogSession.open(root, "s") as session:
        calls = 0
        for op in ops:
            if op == "user":
                await session.add_items([{"role": "user", "content": f"u{calls}"}])
            elif op == "call":
                calls += 1
                await session.add_items(
                    [
                        {
                            "type": "function_call",
                            "call_id": f"c{calls}",
                            "name": "f",
                            "arguments": "{}",
                        }
                    ]
                )
            elif op == "output" and calls:
                with contextlib.suppress(SessionEventError):
                    await session.add_items(
                        [{"type": "function_call_output", "call_id": f"c{calls}", "output": "o"}]
                    )
            elif op == "answer":
                await session.add_items([{"role": "assistant", "content": "a", "id": "1"}])
            elif op == "kept":
                await session.add_items([{"type": "web_search_call", "id": "w", "status": "x"}])
            elif op == "pop":
                await session.pop_item()
            elif op == "clear":
                await session.clear_session()
            live = await session.live()
            whole = [entry.item for entry in history(live)]
            for limit in (None, 0, 1, 3, 100):
                expected = whole if limit is None else whole[-limit:] if limit else []
                assert await session.get_items(limit) == expected
            for after in (-1, live.seq // 2, live.seq - 3):  # what a running turn re-reads
                read = [(e.item, e.seq) for e in history(live, after)]
                assert [(e.item, e.seq) for e in session._index.since(live, after)] == read


def test_run_sync_twice_on_a_session_built_as_the_sdk_builds_its_own(tmp_path: Path) -> None:
    """The SDK's quickstart: ``session = SQLiteSession(id)``, then ``Runner.run_sync`` turn
    after turn. ``EventLogSession(id, store)`` is built the same way (no loop, nothing
    opened) and holds what ``SQLiteSession`` holds; the model saw the same inputs."""
    baseline_model, model = _same_ids(), _same_ids()
    baseline = SQLiteSession("baseline")
    session = EventLogSession("s", tmp_path)
    for text in ("what is k?", "and now?"):
        Runner.run_sync(_agent(baseline_model), text, session=baseline)
        Runner.run_sync(_agent(model), text, session=session, hooks=DurableRunHooks(session))
    assert asyncio.run(session.get_items()) == asyncio.run(baseline.get_items())
    assert [call.input for call in model.calls] == [call.input for call in baseline_model.calls]
    asyncio.run(session.aclose())
    again = EventLogSession("s", tmp_path)
    assert asyncio.run(again.get_items()) == asyncio.run(baseline.get_items())
    asyncio.run(again.aclose())


async def test_a_runtime_session_is_used_from_a_thread_while_its_loop_runs(tmp_path: Path) -> None:
    """The SDK's tests run ``run_sync`` in a worker thread (its own loop) while the test's
    loop, where the session was first used, waits: a session on a runtime you pass carries
    those calls over to its loop."""
    from agent_session import open_store
    from agent_session.session.live.runtime import Runtime

    async with Runtime() as runtime:
        runtime.install(open_store(str(tmp_path)))
        session = EventLogSession("s", runtime=runtime)
        await session.add_items([{"role": "user", "content": "first"}])

        def in_a_thread() -> list[Any]:
            loop = asyncio.new_event_loop()
            try:
                loop.run_until_complete(session.add_items([{"role": "user", "content": "t"}]))
                return loop.run_until_complete(session.get_items())
            finally:
                loop.close()

        seen = await asyncio.to_thread(in_a_thread)
        assert [item["content"] for item in seen] == ["first", "t"]
        await session.aclose()


def test_neither_or_both_of_a_store_and_a_runtime_is_refused(tmp_path: Path) -> None:
    from agent_session.session.live.runtime import Runtime

    with pytest.raises(TypeError, match="needs a store"):
        EventLogSession("s")
    with pytest.raises(TypeError, match="not both"):
        EventLogSession("s", tmp_path, runtime=Runtime())
