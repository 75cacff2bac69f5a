"""pydantic-ai import and export with real pydantic-ai runs (``FunctionModel``, ``TestModel``;
no network): a history a real agent produced round-trips through a session unchanged, on
disk; a crash-repaired session exports with every tool call answered, and pydantic-ai runs on
it; a refused import writes nothing.
"""

from __future__ import annotations

import asyncio
import datetime
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pydantic
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic_ai import Agent
from pydantic_ai.messages import (
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.test import TestModel

from agent_session.integrations.pydantic_ai import export_messages, import_messages
from agent_session.interchange.export import check_transcript, to_openai
from agent_session.persistence_jsonl import JsonlPersistence
from agent_session.recovery import TOOL_OUTCOME_UNKNOWN_TEXT
from agent_session.session import Runtime, SessionDataError, SessionEventError
from agent_session.session.events.builders import (
    assistant_message,
    step_start,
    tool_call,
    tool_call_block,
    turn_start,
    user_message,
)
from tests.sweeps import examples

REPO = Path(__file__).resolve().parents[1]


async def emailing_history() -> bytes:
    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if len(messages) == 1:
            return ModelResponse(
                parts=[
                    ThinkingPart("they want mail"),
                    TextPart("Sending."),
                    ToolCallPart("send_email", {"to": "a@b.c"}, tool_call_id="call_1"),
                    ToolCallPart("send_email", {"to": "x@y.z"}, tool_call_id="call_2"),
                ]
            )
        return ModelResponse(parts=[TextPart("Done.")])

    agent = Agent(FunctionModel(model), instructions="be helpful", system_prompt="You mail.")

    @agent.tool_plain
    def send_email(to: str) -> str:
        return f"sent to {to}"

    first = await agent.run("email a@b.c and x@y.z")
    second = await agent.run("thanks", message_history=first.all_messages())
    return ModelMessagesTypeAdapter.dump_json(second.all_messages())


def same(a: bytes, b: bytes) -> None:
    """Equal as pydantic-ai reads them (every field, timestamps included)."""
    assert ModelMessagesTypeAdapter.validate_json(a) == ModelMessagesTypeAdapter.validate_json(b)
    assert json.loads(a) == json.loads(b)


async def test_a_real_history_round_trips_through_a_stored_session(tmp_path: Path) -> None:
    history = await emailing_history()
    async with Runtime() as runtime:
        runtime.install(JsonlPersistence(tmp_path))
        session = runtime.sessions.create("imported")
        assert import_messages(session, history) == 6
        same(export_messages(session), history)
    async with Runtime() as runtime:  # a cold load of what is on disk
        runtime.install(JsonlPersistence(tmp_path))
        session = await runtime.sessions.resume("imported")
        same(export_messages(session), history)
        types = [e.type for e in session.events]
        assert types.count("turn/end") == 2
        assert "session/end-seed" in types
        messages = session.derive_messages()
        check_transcript(messages)  # every call answered, for every provider
        openai = to_openai(messages, None)
        assert [m["role"] for m in openai] == [
            "user",
            "assistant",
            "tool",
            "tool",
            "assistant",
            "user",
            "assistant",
        ]


def test_a_test_model_history_round_trips() -> None:
    agent = Agent(TestModel(call_tools=["lookup"]))

    @agent.tool_plain
    def lookup(key: str) -> dict[str, Any]:
        return {"key": key, "value": [1, 2.5, None]}

    history = ModelMessagesTypeAdapter.dump_json(agent.run_sync("find it").all_messages())
    session = Runtime().sessions.create("s")
    import_messages(session, history)
    same(export_messages(session), history)


def crash_in_a_tool_body(session: Any) -> None:
    """A turn that asked for two calls and crashed in the first one's body (its
    ``tool/call`` recorded, the second never started)."""
    session.append("turn/start", turn_start(1))
    session.append("step/start", step_start(1, 1))
    session.append("user/message", user_message("mail them"), surface_op="append")
    calls = [tool_call_block("c1", "send_email", '{"to":"a@b.c"}')]
    calls.append(tool_call_block("c2", "send_email", '{"to":"x@y.z"}'))
    reply = assistant_message(1, 1, provider="openai", model="gpt-5", calls=calls)
    session.append("assistant/message", reply, surface_op="append", source_event_seqs=[])
    session.append("tool/call", tool_call(1, 1, "c1", "send_email", '{"to":"a@b.c"}'))


async def test_a_repaired_session_exports_every_call_answered(tmp_path: Path) -> None:
    async with Runtime() as runtime:  # a turn that crashed in a tool body
        runtime.install(JsonlPersistence(tmp_path))
        session = runtime.sessions.create("crashed")
        crash_in_a_tool_body(session)
        await runtime.sessions.flush(session)
    async with Runtime() as runtime:
        runtime.install(JsonlPersistence(tmp_path))
        exported = export_messages(await runtime.sessions.resume("crashed"))
    messages = ModelMessagesTypeAdapter.validate_json(exported)
    returns = {p.tool_call_id: p for m in messages for p in m.parts if p.part_kind == "tool-return"}
    asked = [p.tool_call_id for m in messages for p in m.parts if p.part_kind == "tool-call"]
    assert sorted(returns) == asked == ["c1", "c2"]
    assert returns["c1"].outcome == "interrupted"
    assert returns["c1"].content == TOOL_OUTCOME_UNKNOWN_TEXT
    assert returns["c1"].tool_name == "send_email"
    assert returns["c2"].outcome == "interrupted"  # never started

    seen: list[list[ModelMessage]] = []

    def model(history: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.append(history)
        return ModelResponse(parts=[TextPart("I will check before resending.")])

    result = await Agent(FunctionModel(model)).run("did it go?", message_history=messages)
    assert result.output == "I will check before resending."
    assert seen[0][:2] == messages[:2]  # pydantic-ai puts the new prompt beside the returns
    assert seen[0][2].parts[:2] == messages[2].parts


async def test_an_export_is_deterministic_and_an_import_restores_the_repair(
    tmp_path: Path,
) -> None:
    """Two exports of a repaired session are the same bytes, stamped with the events'
    recorded times (not the time of export); importing one gives back the repair's error
    results (``isError``, their codes) and the interrupted end of the turn."""
    async with Runtime() as runtime:
        runtime.install(JsonlPersistence(tmp_path))
        session = runtime.sessions.create("crashed")
        crash_in_a_tool_body(session)
        await runtime.sessions.flush(session)
    async with Runtime() as runtime:
        runtime.install(JsonlPersistence(tmp_path))
        repaired = await runtime.sessions.resume("crashed")
        first = export_messages(repaired)
        await asyncio.sleep(0.002)  # (a later moment: the export must not depend on it)
        assert export_messages(repaired) == first
        stamps = [
            round(datetime.datetime.fromisoformat(p["timestamp"]).timestamp() * 1000)
            for m in json.loads(first)
            for p in m["parts"]
            if "timestamp" in p
        ]
        surface = [repaired.events[seq] for seq in repaired.surface.nodes]
        assert stamps == [e.time for e in surface if e.type != "assistant/message"]
        codes = {
            e.data["message"]["source"]["callId"]: e.data["error"]["code"]
            for e in repaired.events
            if e.type == "tool/result"
        }
        copy = runtime.sessions.create("copy")
        import_messages(copy, first)
        results = [e for e in copy.events if e.type == "tool/result"]
        assert [e.data["message"]["content"][0]["isError"] for e in results] == [True, True]
        assert {
            e.data["message"]["source"]["callId"]: e.data["error"]["code"] for e in results
        } == codes
        assert copy.events[-1].type == "turn/end"
        assert copy.events[-1].data["reason"] == {"kind": "interrupted"}


async def test_a_return_that_answers_no_call_is_refused_with_nothing_written() -> None:
    orphan = [
        ModelRequest(parts=[UserPromptPart("hi")]),
        ModelResponse(parts=[TextPart("hello")]),
        ModelRequest(parts=[ToolReturnPart("f", "42", tool_call_id="nobody")]),
    ]
    session = Runtime().sessions.create("s")
    with pytest.raises(SessionEventError, match="'nobody' answers no tool call"):
        import_messages(session, ModelMessagesTypeAdapter.dump_json(orphan))
    with pytest.raises(pydantic.ValidationError):
        import_messages(session, b'[{"kind": "request", "parts": [{"part_kind": "nonsense"}]}]')
    unstorable = [
        ModelRequest(parts=[UserPromptPart("hi")]),
        ModelResponse(parts=[TextPart("hello")]),
        ModelRequest(parts=[UserPromptPart("more")]),
        ModelResponse(parts=[ToolCallPart("f", {"big": 2**60}, tool_call_id="c")]),
        ModelRequest(parts=[ToolReturnPart("f", {"big": 2**60}, tool_call_id="c")]),
    ]
    with pytest.raises(SessionDataError, match=r"content.big is the integer 1152921504606846976"):
        import_messages(session, ModelMessagesTypeAdapter.dump_json(unstorable))
    assert session.seq == 0
    import_messages(session, ModelMessagesTypeAdapter.dump_json(unstorable[:4]))  # args fit
    same(export_messages(session), ModelMessagesTypeAdapter.dump_json(unstorable[:4]))


TEXT = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=12)


@st.composite
def conversations(draw: st.DrawFn) -> list[ModelMessage]:
    messages: list[ModelMessage] = []
    for turn in range(draw(st.integers(1, 3))):
        messages.append(ModelRequest(parts=[UserPromptPart(draw(TEXT))]))
        for step in range(draw(st.integers(0, 2))):
            ids = [f"t{turn}s{step}c{i}" for i in range(draw(st.integers(0, 2)))]
            parts: list[Any] = [TextPart(draw(TEXT))] if draw(st.booleans()) else []
            args = st.dictionaries(st.sampled_from("abc"), st.integers() | TEXT, max_size=2)
            parts += [ToolCallPart("tool", draw(args), tool_call_id=i) for i in ids]
            messages.append(ModelResponse(parts=parts or [TextPart("")]))
            if ids:
                returns = [ToolReturnPart("tool", draw(TEXT), tool_call_id=i) for i in ids]
                messages.append(ModelRequest(parts=returns))
        messages.append(ModelResponse(parts=[TextPart(draw(TEXT))]))
    return messages


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(conversations())
def test_import_then_export_gives_back_any_conversation(messages: list[ModelMessage]) -> None:
    history = ModelMessagesTypeAdapter.dump_json(messages)
    session = Runtime().sessions.create("s")
    import_messages(session, history)
    same(export_messages(session), history)
    check_transcript(session.derive_messages())


def _cli(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "agent_session", *args],
        cwd=REPO,
        input=stdin,
        capture_output=True,
        timeout=60,
        check=False,
    )


@pytest.mark.process
def test_the_cli_imports_and_exports_pydantic_ai(tmp_path: Path) -> None:
    history = asyncio.run(emailing_history())
    (tmp_path / "history.json").write_bytes(history)
    store = f"sqlite:///{tmp_path}/s.db"
    done = _cli("import", store, "chat", str(tmp_path / "history.json"), "--format", "pydantic-ai")
    assert done.returncode == 0, done.stderr
    assert b"imported 6 messages into chat" in done.stdout
    again = _cli("import", store, "chat", "-", "--format", "pydantic-ai", stdin=history)
    assert again.returncode == 2
    assert b"session chat exists" in again.stderr
    out = _cli("export", store, "chat", "--format", "pydantic-ai", "--json")
    assert out.returncode == 0, out.stderr
    same(out.stdout.strip(), history)
    bad = _cli("import", store, "other", "-", "--format", "pydantic-ai", stdin=b"[{}]")
    assert bad.returncode == 2
    assert b"- is not a pydantic-ai history this build can import" in bad.stderr
    assert _cli("export", store, "other", "--format", "openai").returncode == 3
