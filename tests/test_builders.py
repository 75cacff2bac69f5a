"""``session.events.builders``: every event an application writes with them is accepted by
``append``, loads again from disk, and has the reference's key order."""

from __future__ import annotations

import json
from pathlib import Path

from agent_session.persistence_jsonl import JsonlPersistence
from agent_session.recovery import is_balanced
from agent_session.session import Runtime
from agent_session.session.events.builders import (
    assistant_message,
    step_end,
    step_start,
    tool_call,
    tool_call_block,
    tool_result,
    turn_end,
    turn_start,
    user_message,
)


async def test_a_turn_written_with_the_builders_loads_again(tmp_path: Path) -> None:
    runtime, backend = Runtime(), JsonlPersistence(str(tmp_path))
    runtime.install(backend)
    session = runtime.sessions.create("b")
    session.append("turn/start", turn_start(1))
    session.append("user/message", user_message("what is 6 * 7?", id="u1"), surface_op="append")
    session.append("step/start", step_start(1, 1))
    calls = [tool_call_block("c1", "calc", '{"expr":"6*7"}')]
    answer = assistant_message(
        1,
        1,
        reasoning="Use the tool.",
        text="Calculating.",
        calls=calls,
        provider="openai",
        model="gpt-5",
        id="a1",
    )
    session.append("assistant/message", answer, surface_op="append")
    call = session.append("tool/call", tool_call(1, 1, "c1", "calc", '{"expr":"6*7"}'))
    result = tool_result(1, 1, "c1", "42", id="r1")
    session.append("tool/result", result, surface_op="append", source_event_seqs=[call.seq])
    session.append("step/end", step_end(1, 1))
    session.append("turn/end", turn_end(1))
    await runtime.sessions.flush(session)
    await backend.aclose()
    loaded = await JsonlPersistence(str(tmp_path)).load("b")
    assert [e.encode() for e in loaded.events] == [e.encode() for e in session.events]
    assert is_balanced(loaded.events)
    lines = (tmp_path / "_no-cwd" / "b" / "session.jsonl").read_text().splitlines()
    user_line, assistant_line, result_line = (json.loads(lines[i]) for i in (2, 4, 6))
    assert list(user_line["data"]) == ["content", "source", "role", "id"]
    assert list(assistant_line["data"]["message"]) == ["role", "content", "source", "id"]
    assert [b["type"] for b in assistant_line["data"]["message"]["content"]] == [
        "reasoning",
        "text",
        "tool-call",
    ]
    assert list(result_line["data"]["message"]) == ["source", "content", "role", "id"]
    assert result_line["sourceEventSeqs"] == [call.seq]


def test_message_ids_default_to_fresh_uuids() -> None:
    first, second = user_message("a"), user_message("a")
    assert first["id"] != second["id"]
    assert len(first["id"]) == 36
