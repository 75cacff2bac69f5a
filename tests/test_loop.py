"""The reference loop (the reference's acceptance cases 43-45, 50, 52, 54-58, 61-62)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from agent_session.agent_loop import AgentRuntime
from agent_session.agent_loop.scripted import ScriptedCall, ScriptedModel, ScriptedStep
from agent_session.agent_loop.tools import ToolCall, ToolResult
from agent_session.session import Session, SessionEvent
from tests.agents import corpus_script, stack
from tests.builders import until
from tests.corpus import cases


def types(session: Session) -> list[str]:
    return [e.type for e in session.events]


def shape(event: dict[str, Any]) -> tuple[Any, ...]:
    data = event["data"]
    chunk = data.get("chunk", {}).get("type") if isinstance(data, dict) else None
    return (
        event["type"],
        tuple(sorted(data)) if isinstance(data, dict) else None,
        chunk,
        json.dumps(event.get("surfaceOp")),
        json.dumps(event.get("sourceEventSeqs")),
    )


async def test_two_turn_run_has_the_corpus_shape() -> None:
    _, session, agent, _, calls = stack(corpus_script(2))
    for turn in range(2):
        assert await agent.run_turn(f"task {turn}") == {"kind": "completed"}
    reference = next(
        c for c in cases() if c["scenario"] == "complete:2" and c["case"] == "prefix-73-lines"
    )
    expected = [shape(e) for e in reference["load"]["events"]]
    mine = [shape(e.to_json()) for e in session.events]
    assert [m[0] for m in mine] == [e[0] for e in expected]
    assert mine == expected
    assert calls == [
        "read_file:call-1",
        "write_file:call-2",
        "read_file:call-3",
        "write_file:call-4",
    ]
    header = next(e for e in session.events if e.type == "request/header")
    assert header.data == reference["load"]["events"][5]["data"]


async def test_case_43_text_turn() -> None:
    _, session, agent, model, _ = stack([ScriptedStep(text=["hi"], usage=(3, 1))])
    await agent.run_turn("hello")
    assert types(session)[0] == "agent/inbox/spliced"
    boundaries = [t for t in types(session) if t.endswith(("/start", "/end"))]
    assert boundaries == ["turn/start", "step/start", "step/end", "turn/end"]
    message = next(e for e in session.events if e.type == "assistant/message")
    assert message.data["usage"] == {"inputTokens": 3, "outputTokens": 1}
    assert [m["role"] for m in session.derive_messages()] == ["user", "assistant"]
    assert len(model.requests) == 1


async def test_case_44_tool_result_reaches_the_next_request() -> None:
    _, session, agent, model, _ = stack(
        [
            ScriptedStep(calls=[ScriptedCall("c1", "read_file", ['{"path":"a"}'])]),
            ScriptedStep(text=["done"]),
        ]
    )
    await agent.run_turn("go")
    assert len(model.requests) == 2
    last = model.requests[1].messages[-1]
    assert last["source"] == {"kind": "tool", "callId": "c1"}
    assert last["content"][0]["isError"] is False
    assert "tool/call" in types(session)
    assert "tool/result" in types(session)


async def test_case_45_text_deltas_are_chunks() -> None:
    _, session, agent, _, _ = stack([ScriptedStep(text=["a", "b", "c"], usage=(1, 1))])
    await agent.run_turn("x")
    chunks = [e for e in session.events if e.type == "assistant/chunk"]
    assert len(chunks) == 7
    assert (
        "".join(
            e.data["chunk"].get("text", "")
            for e in chunks
            if e.data["chunk"]["type"] == "text-delta"
        )
        == "abc"
    )


async def test_case_50_max_tokens_drops_tool_calls() -> None:
    _, session, agent, _, calls = stack(
        [
            ScriptedStep(
                calls=[ScriptedCall("c1", "read_file", ["{}"])],
                usage=(1, 1),
                finish={"kind": "max-tokens"},
            )
        ]
    )
    reason = await agent.run_turn("x")
    assert reason == {"kind": "max-tokens"}
    assert calls == []
    assert "tool/call" not in types(session)
    message = next(e for e in session.events if e.type == "assistant/message")
    assert message.data["message"]["content"] == []
    assert [m["role"] for m in session.derive_messages()] == ["user"]


async def test_case_52_model_error_ends_the_turn_with_the_failure() -> None:
    failure = {"message": "overloaded", "code": "RATE_LIMIT", "status": 429}
    _, session, agent, _, _ = stack(
        [ScriptedStep(text=["par"], finish={"kind": "error", "failure": failure})]
    )
    reason = await agent.run_turn("x")
    assert reason == {"kind": "error", "error": failure}
    assert "assistant/message" not in types(session)
    assert session.events[-1].data["reason"] == reason
    aborted = {"message": "stopped", "code": "X"}
    _, _, agent2, _, _ = stack([ScriptedStep(finish={"kind": "aborted", "failure": aborted})])
    assert (await agent2.run_turn("x"))["error"]["code"] == "ABORTED"


async def test_case_54_turn_numbers_continue_after_a_seed() -> None:
    runtime, session, agent, _, _ = stack([ScriptedStep(text=["one"]), ScriptedStep(text=["two"])])
    await agent.run_turn("first")
    child = runtime.sessions.fork(session, child_id="child")
    child_agent = runtime.agent(child, model="scripted/scripted-1")
    await child_agent.run_turn("second")
    starts = [e.data["turn"] for e in child.events if e.type == "turn/start"]
    assert starts == [1, 2]
    header = [e for e in child.events if e.type == "request/header"]
    assert [h.data["reason"] for h in header] == ["initial", "resume"]


def hanging_model(release: asyncio.Event, *, text: list[str]) -> ScriptedModel:
    async def hang(number: int, request: Any, chunk: Any) -> None:
        if chunk is not None and chunk["type"] == "finish":
            await release.wait()

    return ScriptedModel([ScriptedStep(text=text)], on_chunk=hang)


async def test_case_55_56_cancel_while_streaming_keeps_visible_text() -> None:
    runtime, session, agent, _, _ = stack([])
    release = asyncio.Event()
    runtime.models.register("hang", hanging_model(release, text=["par", "tial"]))
    agent = runtime.agent(session, model="hang/m")
    turn = asyncio.ensure_future(agent.run_turn("x"))
    await until(
        lambda: any(
            e.type == "assistant/chunk" and e.data["chunk"]["type"] == "block-end"
            for e in session.events
        )
    )
    agent.cancel()
    assert await turn == {"kind": "aborted", "reason": {"kind": "user"}}
    message = next(e for e in session.events if e.type == "assistant/message")
    assert message.data["interrupted"] is True
    assert message.data["message"]["content"] == [{"type": "text", "text": "partial"}]
    chunk_seqs = [e.seq for e in session.events if e.type == "assistant/chunk"]
    assert list(message.source_event_seqs or ()) == chunk_seqs
    assert types(session)[-2:] == ["step/end", "turn/end"]


async def test_case_58_cancel_before_dispatch_gives_synthetic_pairs() -> None:
    runtime, session, agent, _, calls = stack(
        [
            ScriptedStep(
                calls=[
                    ScriptedCall("c1", "read_file", ["{}"]),
                    ScriptedCall("c2", "read_file", ["{}"]),
                ]
            )
        ]
    )

    def cancel_on_message(s: Session, event: SessionEvent) -> None:
        if event.type == "assistant/message":
            agent.cancel()

    runtime.hooks.observe("session/event", cancel_on_message)
    reason = await agent.run_turn("x")
    assert reason["kind"] == "aborted"
    assert calls == []
    results = [e for e in session.events if e.type == "tool/result"]
    assert [r.data["error"] for r in results] == [
        {"name": "AbortError", "code": "ABORTED_BEFORE_DISPATCH"}
    ] * 2
    assert results[0].data["message"]["content"][0]["content"] == [
        {"type": "text", "text": "Error: tool call aborted before dispatch"}
    ]
    assert [e.type for e in session.events if e.type.startswith("tool/")] == [
        "tool/call",
        "tool/result",
        "tool/call",
        "tool/result",
    ]


async def test_case_61_62_parallel_bodies_and_model_ordered_results() -> None:
    runtime = AgentRuntime()
    runtime.models.register(
        "s",
        ScriptedModel(
            [
                ScriptedStep(calls=[ScriptedCall(f"c{i}", "slow", ["{}"]) for i in (1, 2, 3)]),
                ScriptedStep(text=["ok"]),
            ]
        ),
    )
    started: list[str] = []
    gates = {f"c{i}": asyncio.Event() for i in (1, 2, 3)}

    async def slow(args: Any, call: ToolCall) -> str:
        started.append(call.call_id)
        await gates[call.call_id].wait()
        return call.call_id

    runtime.tools.register("slow", "slow", {"type": "object"}, slow)
    session = runtime.sessions.create("p")
    turn = asyncio.ensure_future(runtime.agent(session, model="s/m").run_turn("x"))
    await until(lambda: len(started) >= 3)
    assert "tool/result" not in types(session)  # all three started before any finished
    gates["c3"].set()
    gates["c2"].set()
    for _ in range(10):
        await asyncio.sleep(0)
    assert "tool/result" not in types(session)  # c1 still running: nothing committed
    gates["c1"].set()
    await turn
    results = [
        e.data["message"]["source"]["callId"] for e in session.events if e.type == "tool/result"
    ]
    assert results == ["c1", "c2", "c3"]


async def test_tool_errors_unknown_tools_and_bad_arguments_become_results() -> None:
    runtime = AgentRuntime()
    runtime.models.register(
        "s",
        ScriptedModel(
            [
                ScriptedStep(
                    calls=[
                        ScriptedCall("c1", "boom", ["{}"]),
                        ScriptedCall("c2", "nope", ["{}"]),
                        ScriptedCall("c3", "boom", ["{not json"]),
                    ]
                ),
                ScriptedStep(text=["recovered"]),
            ]
        ),
    )

    async def boom(args: Any, call: ToolCall) -> ToolResult:
        raise RuntimeError("the tool broke")

    runtime.tools.register("boom", "boom", {"type": "object"}, boom)
    session = runtime.sessions.create("e")
    assert await runtime.agent(session, model="s/m").run_turn("x") == {"kind": "completed"}
    texts = [
        e.data["message"]["content"][0]["content"][0]["text"]
        for e in session.events
        if e.type == "tool/result"
    ]
    assert texts[0] == "Error: the tool broke"
    assert texts[1] == 'Error: unknown tool "nope"'
    assert texts[2].startswith("Error: the arguments of boom are not valid JSON")
    flags = [
        e.data["message"]["content"][0]["isError"]
        for e in session.events
        if e.type == "tool/result"
    ]
    assert flags == [True, True, True]


async def test_model_string_must_name_provider_and_model() -> None:
    runtime = AgentRuntime()
    session = runtime.sessions.create("m")
    with pytest.raises(ValueError, match='"provider/model"'):
        runtime.agent(session, model="just-a-model")


async def test_a_model_no_request_can_reach_raises_before_the_turn_writes(tmp_path: Any) -> None:
    """A typo'd provider and an exhausted script are configuration errors: ``run_turn`` and
    ``resume`` raise them at once and the durable log gets no failed turn."""
    from agent_session import checkpoint_policy, open_store
    from agent_session.agent_loop.models import ModelUnavailableError

    async with AgentRuntime() as runtime:
        runtime.install(open_store(str(tmp_path)))
        runtime.install(checkpoint_policy)
        runtime.models.register("demo", ScriptedModel([ScriptedStep(text=["Hi."])]))
        session = runtime.sessions.create("s")
        with pytest.raises(ModelUnavailableError, match='provider "dmeo" .registered: demo.'):
            await runtime.agent(session, model="dmeo/m").run_turn("hello")
        assert session.events == []
        agent = runtime.agent(session, model="demo/m")
        assert await agent.run_turn("hello") == {"kind": "completed"}
        written = len(session.events)
        with pytest.raises(ModelUnavailableError, match="the script has 1 steps; request 2"):
            await agent.run_turn("again")
        assert len(session.events) == written
    backend = open_store(str(tmp_path))
    try:
        stored = (await backend.load("s")).events
    finally:
        await backend.aclose()
    assert [e.data["reason"]["kind"] for e in stored if e.type == "turn/end"] == ["completed"]


async def test_a_model_answer_that_reuses_a_call_id_is_refused_and_its_calls_never_run() -> None:
    """A scripted model replaying its first step (what a resume with the same script does)
    asks for ``c1`` again: the turn ends ``error`` naming the first call's seq, the body ran
    once, and the history stays one a provider accepts."""
    from agent_session.interchange.export import check_transcript

    again = ScriptedStep(calls=[ScriptedCall("c1", "read_file", ['{"path": "a"}'])])
    _, session, agent, _, calls = stack([again, ScriptedStep(text=["ok"]), again])
    assert await agent.run_turn("first") == {"kind": "completed"}
    asked = next(e.seq for e in session.events if e.type == "assistant/message")
    end = await agent.run_turn("second")
    assert end["kind"] == "error"
    assert end["error"]["code"] == "DUPLICATE_TOOL_CALL_ID"
    assert f"under the id of the call at seq {asked}" in end["error"]["message"]
    assert calls == ["read_file:c1"]
    check_transcript(session.derive_messages())


@pytest.mark.parametrize(("id", "name"), [("", "read_file"), ("c1", "")])
async def test_a_model_call_without_an_id_or_a_name_is_refused_before_it_is_recorded(
    id: str, name: str
) -> None:
    """No result could answer such a call: the answer is not recorded as a message (the
    history stays valid), none of its calls runs, and the turn ends ``error``."""
    from agent_session.interchange.export import check_transcript

    bad = ScriptedStep(calls=[ScriptedCall(id, name, ['{"path": "a"}'])])
    _, session, agent, _, calls = stack([bad])
    end = await agent.run_turn("go")
    assert end["kind"] == "error"
    assert end["error"]["code"] == "INVALID_TOOL_CALL"
    assert calls == []
    assert not any(e.type == "assistant/message" for e in session.events)
    check_transcript(session.derive_messages())
