"""The OpenAI Agents SDK adapter with the real SDK: the real ``Runner.run`` and
``Runner.run_streamed`` driven by the SDK's own scripted model (no network), on every store.

The baseline is the SDK's own ``SQLiteSession`` running the same script: ``get_items`` must
give the items it gives, and the model must see the same input.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest
from agents import Agent, Runner, SQLiteSession, function_tool
from agents.exceptions import AgentsException
from agents.memory import SessionSettings
from agents.testing import ScriptedModel, assistant_message, function_call

from agent_session.integrations.openai_agents import DurableRunHooks, EventLogSession
from agent_session.recovery import TOOL_OUTCOME_UNKNOWN
from agent_session.session import SessionDataError, SessionEventError
from agent_session.stores import parse_store


def script() -> ScriptedModel:
    return ScriptedModel(
        [
            [
                assistant_message("Sending.", item_id="msg_1"),
                function_call("send_email", {"to": "a@b.c"}, call_id="call_1"),
                function_call("send_email", {"to": "x@y.z"}, call_id="call_2"),
            ],
            [assistant_message("Done.", item_id="msg_2")],
        ]
    )


async def run(agent: Agent[Any], session: Any, text: str, *, streamed: bool, hooks: Any) -> Any:
    if streamed:
        result = Runner.run_streamed(agent, text, session=session, hooks=hooks)
        async for _ in result.stream_events():
            pass
        return result
    return await Runner.run(agent, text, session=session, hooks=hooks)


def mailer(model: ScriptedModel, bodies: list[str], probe: Any = None) -> Agent[Any]:
    @function_tool
    async def send_email(to: str) -> str:
        """Send an email."""
        if probe is not None:
            await probe(to)
        bodies.append(to)
        return f"sent to {to}"

    return Agent(name="mailer", model=model, tools=[send_email])


async def stored_types(store: str, id: str) -> list[str]:
    backend = parse_store(store).open()
    try:
        return [event.type for event in (await backend.inspect(id)).events]
    finally:
        await backend.aclose()


EXPECTED_LOG = [
    "turn/start",
    "step/start",
    "user/message",
    "request/header",  # (once: the second request was sent with the same one)
    "assistant/message",
    "tool/call",
    "tool/call",
    "tool/result",
    "tool/result",
    "step/end",
    "step/start",
    "assistant/message",
    "step/end",
    "turn/end",
]


@pytest.mark.parametrize("streamed", [False, True], ids=["run", "run_streamed"])
async def test_a_run_keeps_what_the_sdks_own_session_keeps(store: str, streamed: bool) -> None:
    baseline_model = script()
    baseline = SQLiteSession("baseline")
    await run(mailer(baseline_model, []), baseline, "email a@b.c", streamed=streamed, hooks=None)

    model, bodies = script(), []
    async with await EventLogSession.open(store, "chat-1") as session:
        result = await run(
            mailer(model, bodies),
            session,
            "email a@b.c",
            streamed=streamed,
            hooks=DurableRunHooks(session),
        )
        assert result.final_output == "Done."
        assert await session.get_items() == await baseline.get_items()
    assert [call.input for call in model.calls] == [call.input for call in baseline_model.calls]
    assert bodies == ["a@b.c", "x@y.z"]
    assert await stored_types(store, "chat-1") == EXPECTED_LOG  # both calls before any result
    async with await EventLogSession.open(store, "chat-1") as again:  # a cold load
        assert await again.get_items() == await baseline.get_items()


@pytest.mark.parametrize("streamed", [False, True], ids=["run", "run_streamed"])
async def test_without_the_hooks_the_session_alone_keeps_the_same_items(
    tmp_path: Path, streamed: bool
) -> None:
    baseline = SQLiteSession("baseline")
    await run(mailer(script(), []), baseline, "email a@b.c", streamed=streamed, hooks=None)
    async with await EventLogSession.open(tmp_path, "chat-1") as session:
        await run(mailer(script(), []), session, "email a@b.c", streamed=streamed, hooks=None)
        assert await session.get_items() == await baseline.get_items()
    types = await stored_types(str(tmp_path), "chat-1")
    # saved after the bodies ran: each call is recorded just before its result
    assert types[4:8] == ["tool/call", "tool/result", "tool/call", "tool/result"]
    assert types[-1] == "turn/end"


async def test_each_parallel_call_is_durable_before_its_body_runs(tmp_path: Path) -> None:
    """The SDK runs each call of a response in a task of its own (its hook, then its body):
    when a body runs, its own call is on disk, so a crash now answers it
    ``TOOL_OUTCOME_UNKNOWN``, never ``TOOL_NOT_STARTED``."""
    seen: dict[str, list[Any]] = {}

    async def probe(to: str) -> None:  # what another process would load now (read-only)
        backend = parse_store(str(tmp_path)).open()
        seen[to] = list((await backend.inspect("chat-1")).events)
        await backend.aclose()

    async with await EventLogSession.open(tmp_path, "chat-1") as session:
        hooks = DurableRunHooks(session)
        await Runner.run(mailer(script(), [], probe), "email a@b.c", session=session, hooks=hooks)
    assert sorted(seen) == ["a@b.c", "x@y.z"]
    for to, call in (("a@b.c", "call_1"), ("x@y.z", "call_2")):
        events = seen[to]
        assert [e.type for e in events][:5] == EXPECTED_LOG[:5]
        recorded = [e.data["callId"] for e in events if e.type == "tool/call"]
        assert call in recorded
        closer = next(
            e
            for e in events
            if e.type == "tool/result" and e.data["message"]["source"]["callId"] == call
        )
        assert closer.data["error"]["code"] == TOOL_OUTCOME_UNKNOWN
        assert [e.type for e in events][-2:] == ["step/end", "turn/end"]


async def test_a_second_run_continues_the_history(store: str) -> None:
    model = ScriptedModel(
        [[assistant_message("Hi.", item_id="m1")], [assistant_message("Still here.", item_id="m2")]]
    )
    agent = Agent(name="a", model=model)
    async with await EventLogSession.open(store, "chat-1") as session:
        await Runner.run(agent, "hello", session=session, hooks=DurableRunHooks(session))
    async with await EventLogSession.open(store, "chat-1") as session:
        await Runner.run(agent, "again", session=session, hooks=DurableRunHooks(session))
        items = await session.get_items()
    hello, again = {"content": "hello", "role": "user"}, {"content": "again", "role": "user"}
    first_answer = json.loads(json.dumps(assistant_message("Hi.", item_id="m1").model_dump()))
    assert model.calls[1].input == [hello, items[1], again]
    assert items[:3] == [hello, items[1], again]
    assert items[1]["id"] == "m1"
    assert items[1]["content"][0]["text"] == first_answer["content"][0]["text"]
    assert (await stored_types(store, "chat-1")).count("turn/end") == 2


USER = {"role": "user", "content": "hi"}
SYSTEM = {"role": "system", "content": "be brief"}
CALL = {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}", "id": "fc1"}
OUTPUT = {"type": "function_call_output", "call_id": "c1", "output": "42"}
ANSWER = {
    "id": "msg_9",
    "type": "message",
    "role": "assistant",
    "status": "completed",
    "content": [{"type": "output_text", "text": "It is 42.", "annotations": []}],
}
REASONING = {
    "type": "reasoning",
    "id": "rs_1",
    "summary": [{"type": "summary_text", "text": "think"}],
    "encrypted_content": "gAAAA-opaque==",
}
HOSTED = {
    "type": "web_search_call",
    "id": "ws_1",
    "status": "completed",
    "action": {"type": "search", "query": "weather"},
}
COMPACTION = {"type": "compaction", "id": "cmp_1", "encrypted_content": "zzz"}
MCP = {
    "type": "mcp_call",
    "id": "mcp_1",
    "server_label": "docs",
    "name": "lookup",
    "arguments": "{}",
    "output": "found",
}


async def test_unknown_items_come_back_unchanged_in_place(store: str) -> None:
    items = [SYSTEM, USER, REASONING, HOSTED, CALL, OUTPUT, MCP, COMPACTION, ANSWER]
    async with await EventLogSession.open(store, "s") as session:
        await session.add_items(items)
        assert await session.get_items() == items
    async with await EventLogSession.open(store, "s") as session:  # a cold load
        assert await session.get_items() == items
    types = await stored_types(store, "s")
    assert types.count("openai-agents/item") == 4  # system, hosted search, MCP, compaction
    # ended on an answer with every call answered (a reopen appends session/end-seed)
    assert [t for t in types if t != "session/end-seed"][-1] == "turn/end"


async def test_get_items_returns_the_latest_n_in_order(tmp_path: Path) -> None:
    items = [USER, CALL, OUTPUT, ANSWER]
    async with await EventLogSession.open(tmp_path, "s") as session:
        await session.add_items(items)
        assert await session.get_items(limit=2) == [OUTPUT, ANSWER]
        assert await session.get_items(limit=10) == items
        assert await session.get_items(limit=0) == []
        session.session_settings = SessionSettings(limit=1)
        assert await session.get_items() == [ANSWER]
        assert await session.get_items(limit=3) == items[1:]


async def test_a_batch_with_an_orphan_output_is_refused_whole(store: str) -> None:
    async with await EventLogSession.open(store, "s") as session:
        await session.add_items([USER])
        before = (await session.live()).seq
        orphan = {**OUTPUT, "call_id": "nobody"}
        with pytest.raises(SessionEventError, match="'nobody' answers no function_call"):
            await session.add_items([{**USER, "content": "more"}, CALL, OUTPUT, orphan])
        assert (await session.live()).seq == before
        huge = {**HOSTED, "action": {"type": "search", "page": 2**60}}
        with pytest.raises(SessionDataError, match=r"items\[1\].action.page is the integer"):
            await session.add_items([{**USER, "content": "more"}, huge])
        assert (await session.live()).seq == before
        assert await session.get_items() == [USER]
    async with await EventLogSession.open(store, "s") as session:
        assert await session.get_items() == [USER]


async def test_re_adding_calls_and_outputs_writes_nothing_and_shared_ids_are_kept(
    tmp_path: Path,
) -> None:
    """A call (its ``call_id`` pairs it) and an output for an answered call are not written
    twice; a model item is never dropped for its ``id``, which a provider or a test model may
    give to several items."""
    async with await EventLogSession.open(tmp_path, "s") as session:
        await session.add_items([USER, REASONING, CALL, OUTPUT])
        seq = (await session.live()).seq
        await session.add_items([CALL, OUTPUT])
        assert (await session.live()).seq == seq
        await session.add_items([ANSWER, ANSWER])
        assert await session.get_items() == [USER, REASONING, CALL, OUTPUT, ANSWER, ANSWER]


async def test_pop_and_clear_append_and_survive_a_reload(store: str) -> None:
    async with await EventLogSession.open(store, "s") as session:
        await session.add_items([USER, REASONING, CALL, OUTPUT, HOSTED, ANSWER])
        assert await session.pop_item() == ANSWER
        assert await session.pop_item() == HOSTED
        assert await session.pop_item() == OUTPUT
        assert await session.pop_item() == CALL
        assert await session.get_items() == [USER, REASONING]
        length = (await session.live()).seq
    async with await EventLogSession.open(store, "s") as session:
        assert await session.get_items() == [USER, REASONING]
        await session.add_items([{**USER, "content": "again"}])
        assert await session.get_items() == [USER, REASONING, {**USER, "content": "again"}]
        await session.clear_session()
        assert await session.get_items() == []
        assert await session.pop_item() is None
        assert (await session.live()).seq > length  # everything was appended, nothing cut
    async with await EventLogSession.open(store, "s") as session:
        assert await session.get_items() == []
        await session.add_items([USER])
        assert await session.get_items() == [USER]


async def test_a_store_this_build_cannot_serve_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="unsupported store 'redis://x'"):
        await EventLogSession.open("redis://x", "s")


async def test_ids_a_later_run_repeats_are_kept_again(tmp_path: Path) -> None:
    """A scripted model (or a provider's placeholder id) repeats ids across runs: only the
    running turn is deduplicated, so a second run's items are all kept."""
    async with await EventLogSession.open(tmp_path, "s") as session:
        for _ in range(2):
            model = ScriptedModel(
                [[function_call("f", "{}", call_id="c1")], [assistant_message("ok")]]
            )

            @function_tool
            async def f() -> str:
                """F."""
                return "done"

            agent = Agent(name="a", model=model, tools=[f])
            await Runner.run(agent, "go", session=session, hooks=DurableRunHooks(session))
        items = await session.get_items()
    assert [i.get("type") for i in items] == [
        None,
        "function_call",
        "function_call_output",
        "message",
    ] * 2


async def test_a_runtime_of_yours_and_a_history_written_by_something_else(tmp_path: Path) -> None:
    from agents.memory import Session as SdkSession

    from agent_session.persistence_jsonl import JsonlPersistence
    from agent_session.session import Runtime
    from agent_session.session.events.builders import (
        assistant_message as reply,
    )
    from agent_session.session.events.builders import (
        step_start,
        tool_call,
        tool_call_block,
        tool_result,
        turn_start,
        user_message,
    )

    async with Runtime() as runtime:  # a session the reference loop's shapes wrote
        runtime.install(JsonlPersistence(tmp_path))
        live = runtime.sessions.create("mine")
        live.append("turn/start", turn_start(1))
        live.append("step/start", step_start(1, 1))
        live.append("user/message", user_message("read it"), surface_op="append")
        block = tool_call_block("c9", "read", '{"path":"a"}')
        answer = reply(1, 1, provider="openai", model="gpt-5", text="Reading.", calls=[block])
        live.append("assistant/message", answer, surface_op="append", source_event_seqs=[])
        call = live.append("tool/call", tool_call(1, 1, "c9", "read", '{"path":"a"}'))
        result = tool_result(1, 1, "c9", "contents")
        live.append("tool/result", result, surface_op="append", source_event_seqs=[call.seq])

        session = EventLogSession("mine", runtime=runtime)
        assert isinstance(session, SdkSession)  # the SDK's runtime-checkable protocol
        assert await session.get_items() == [
            {"role": "user", "content": "read it"},
            {"role": "assistant", "content": "Reading."},
            {"type": "function_call", "call_id": "c9", "name": "read", "arguments": '{"path":"a"}'},
            {"type": "function_call_output", "call_id": "c9", "output": "contents"},
        ]
        await session.add_items([ANSWER])
        await session.aclose()  # flushes; the runtime stays yours
        assert runtime.sessions.get("mine") is live
    assert (await stored_types(str(tmp_path), "mine"))[-2:] == ["step/end", "turn/end"]


async def test_a_tool_body_never_runs_when_its_call_cannot_be_made_durable() -> None:
    from agent_session.session import Runtime
    from tests.test_persistence_failures import Flaky

    class FailFromTheResponse(DurableRunHooks):
        async def on_llm_end(self, context: Any, agent: Any, response: Any) -> None:
            await super().on_llm_end(context, agent, response)
            backend.fail_from = backend.appends + 1  # the storage fails from now on

    backend = Flaky()
    bodies: list[str] = []
    async with Runtime() as runtime:
        runtime.install(backend)
        session = EventLogSession("s", runtime=runtime)
        # the SDK ends the run with its UserError("Error running tool ...: <our error>")
        with pytest.raises(AgentsException, match="send_email: injected failure of append"):
            await Runner.run(
                mailer(script(), bodies),
                "email a@b.c",
                session=session,
                hooks=FailFromTheResponse(session),
            )
        assert bodies == []  # the body never ran: its call was not on disk
        backend.fail_from = None
        await session.aclose()


@pytest.mark.parametrize("with_hooks", [False, True], ids=["session", "hooks"])
async def test_a_response_with_reasoning_and_a_hosted_call_is_one_step(
    tmp_path: Path, with_hooks: bool
) -> None:
    from openai.types.responses import ResponseFunctionWebSearch, ResponseReasoningItem
    from openai.types.responses.response_reasoning_item import Summary

    def model() -> ScriptedModel:
        reasoning = ResponseReasoningItem(
            id="rs_1",
            type="reasoning",
            encrypted_content="gAAAA-opaque==",
            summary=[Summary(text="look it up", type="summary_text")],
        )
        search = ResponseFunctionWebSearch(
            id="ws_1",
            type="web_search_call",
            status="completed",
            action={"type": "search", "query": "weather"},
        )
        first = [reasoning, search, assistant_message("Mailing.", item_id="m1")]
        first.append(function_call("send_email", {"to": "a@b.c"}, call_id="c1"))
        return ScriptedModel([first, [assistant_message("Done.", item_id="m2")]])

    baseline = SQLiteSession("baseline")
    await Runner.run(mailer(model(), []), "go", session=baseline)
    async with await EventLogSession.open(tmp_path, "s") as session:
        hooks = DurableRunHooks(session) if with_hooks else None
        await Runner.run(mailer(model(), []), "go", session=session, hooks=hooks)
        assert await session.get_items() == await baseline.get_items()
    header = ["request/header"] if with_hooks else []  # (what the hooks see of a request)
    assert await stored_types(str(tmp_path), "s") == [
        "turn/start",
        "step/start",
        "user/message",
        *header,
        "assistant/message",
        "openai-agents/item",
        "assistant/message",  # one response
        "tool/call",
        "tool/result",
        "step/end",
        "step/start",
        "assistant/message",
        "step/end",
        "turn/end",
    ]


async def _warnings(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, *, hooked: bool, **options: Any
) -> list[str]:
    caplog.clear()
    logger = "agent_session.integrations.openai_agents"
    with caplog.at_level(logging.WARNING, logger=logger):
        async with await EventLogSession.open(str(tmp_path / "logs"), "w", **options) as session:
            hooks = DurableRunHooks(session) if hooked else None
            for _ in range(2):
                await Runner.run(mailer(script(), []), "mail", session=session, hooks=hooks)
    return [r.getMessage() for r in caplog.records if r.name == logger]


async def test_a_run_without_the_hooks_warns_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    warned = await _warnings(tmp_path, caplog, hooked=False)
    assert len(warned) == 1
    assert "without DurableRunHooks" in warned[0]
    assert "hooks=DurableRunHooks(session)" in warned[0]


async def test_the_hooks_or_the_opt_out_silence_the_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    assert await _warnings(tmp_path, caplog, hooked=True) == []
    assert await _warnings(tmp_path, caplog, hooked=False, warn_without_hooks=False) == []
