"""``recovery.closers`` (the reference's acceptance cases 29-36)."""

from __future__ import annotations

from typing import Any

from agent_session.recovery import (
    TOOL_NOT_STARTED,
    TOOL_NOT_STARTED_TEXT,
    TOOL_OUTCOME_UNKNOWN,
    TOOL_OUTCOME_UNKNOWN_TEXT,
    answers,
    closers,
    is_balanced,
)
from agent_session.session import Session, SessionEvent
from tests.builders import assistant, tool_result, user


def log(*steps: tuple[str, Any]) -> tuple[SessionEvent, ...]:
    times = iter(range(100, 1000))
    session = Session.create("r", clock=lambda: next(times))
    for kind, data in steps:
        extra: dict[str, Any] = {}
        if kind in ("user/message", "assistant/message", "tool/result"):
            extra["surface_op"] = "append"
            if kind == "assistant/message":
                extra["source_event_seqs"] = []
        session.append(kind, data, **extra)
    return session.events


START = ("turn/start", {"turn": 1})
STEP = ("step/start", {"turn": 1, "step": 1})


def calls(*ids: str) -> tuple[str, Any]:
    return ("assistant/message", {"turn": 1, "step": 1, "message": assistant(calls=ids)})


def call(id: str) -> tuple[str, Any]:
    return (
        "tool/call",
        {"turn": 1, "step": 1, "callId": id, "name": "read_file", "arguments": "{}"},
    )


def types(events: list[SessionEvent]) -> list[tuple[str, int]]:
    return [(e.type, e.seq) for e in events]


def test_case_29_balanced_or_empty_logs_need_nothing() -> None:
    assert closers(()) == []
    done = log(
        START,
        ("turn/end", {"turn": 1, "reason": {"kind": "completed"}}),
        ("agent/inbox/spliced", {"target": "next-turn", "start": 0, "inserted": []}),
    )
    assert closers(done) == []
    assert is_balanced(done)


def test_case_30_open_turn_and_open_step() -> None:
    assert types(closers(log(START))) == [("turn/end", 1)]
    events = log(START, STEP)
    assert types(closers(events)) == [("step/end", 2), ("turn/end", 3)]
    assert closers(events)[-1].data == {"turn": 1, "reason": {"kind": "interrupted"}}
    assert not is_balanced(events)


def test_case_31_unrecorded_call_is_not_started() -> None:
    result, step_end, turn_end = closers(log(START, STEP, calls("c1")))
    assert (result.type, result.seq, step_end.seq, turn_end.seq) == ("tool/result", 3, 4, 5)
    assert result.data["turn"] == 1
    assert result.data["step"] == 1
    assert result.data["error"] == {"name": "ToolNotStartedError", "code": TOOL_NOT_STARTED}
    block = result.data["message"]["content"][0]
    assert block["isError"] is True
    assert block["content"] == [{"type": "text", "text": TOOL_NOT_STARTED_TEXT}]
    assert result.source_event_seqs is None
    assert result.surface_op == "append"


def test_case_32_recorded_call_has_unknown_outcome() -> None:
    result = closers(log(START, STEP, calls("c1"), call("c1")))[0]
    assert result.surface_op == "append"
    assert result.source_event_seqs == (3,)
    assert result.data["error"] == {"name": "ToolOutcomeUnknownError", "code": TOOL_OUTCOME_UNKNOWN}
    text = result.data["message"]["content"][0]["content"][0]["text"]
    assert text == TOOL_OUTCOME_UNKNOWN_TEXT
    assert "retry only if the operation is read-only or idempotent" in text
    assert text.endswith("Do not retry blindly.")


def test_case_33_answered_calls_and_closed_steps() -> None:
    answered = log(
        START,
        STEP,
        calls("c1"),
        call("c1"),
        ("tool/result", {"turn": 1, "step": 1, "message": tool_result("c1")}),
    )
    assert [e.type for e in closers(answered)] == ["step/end", "turn/end"]
    closed = log(START, STEP, calls("c1"), ("step/end", {"turn": 1, "step": 1}))
    assert [e.type for e in closers(closed)] == ["turn/end"]


def test_case_34_only_the_open_turns_unanswered_calls() -> None:
    events = log(
        START,
        STEP,
        calls("old"),
        call("old"),
        ("tool/result", {"turn": 1, "step": 1, "message": tool_result("old")}),
        ("step/end", {"turn": 1, "step": 1}),
        ("turn/end", {"turn": 1, "reason": {"kind": "completed"}}),
        ("turn/start", {"turn": 2}),
        ("step/start", {"turn": 2, "step": 1}),
        (
            "assistant/message",
            {"turn": 2, "step": 1, "message": assistant(calls=("new-call",), id="a2")},
        ),
    )
    out = closers(events)
    assert [e.data["message"]["source"]["callId"] for e in out if e.type == "tool/result"] == [
        "new-call"
    ]
    assert out[-1].data["turn"] == 2
    partial = log(
        START,
        STEP,
        calls("a", "b"),
        call("a"),
        ("tool/result", {"turn": 1, "step": 1, "message": tool_result("a")}),
    )
    results = [e for e in closers(partial) if e.type == "tool/result"]
    assert [e.data["message"]["source"]["callId"] for e in results] == ["b"]


def test_case_35_call_without_assistant_request_gets_no_result() -> None:
    assert [e.type for e in closers(log(START, STEP, call("x")))] == ["step/end", "turn/end"]


def test_case_36_times_ids_and_order() -> None:
    events = log(START, STEP, ("user/message", user()), calls("c1", "c2"), call("c2"))
    out = closers(events)
    assert {e.time for e in out} == {events[-1].time}
    assert [e.data["message"]["id"] for e in out if e.type == "tool/result"] == [
        "interrupted-tool-result-c1-5",
        "interrupted-tool-result-c2-6",
    ]
    assert [e.seq for e in out] == [5, 6, 7, 8]
    assert out[0].data["error"]["code"] == TOOL_NOT_STARTED
    assert out[1].data["error"]["code"] == TOOL_OUTCOME_UNKNOWN
    # The reference writes closers with surfaceOp before sourceEventSeqs.
    assert list(out[1].to_json()) == ["type", "seq", "time", "data", "surfaceOp", "sourceEventSeqs"]
    balanced = Session.create("x", seed=[*events, *out])
    assert [m["role"] for m in balanced.derive_messages()] == ["user", "assistant", "user", "user"]


END = ("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
STEP_END = ("step/end", {"turn": 1, "step": 1})


def test_answers_give_the_last_messages_unanswered_calls_their_results() -> None:
    """A closed turn whose last assistant message left calls unanswered (what an older harness
    wrote for a cancelled turn): c1 was recorded, c2 never was, c3 has its result."""
    events = log(
        START,
        STEP,
        calls("c1", "c2", "c3"),
        call("c1"),
        call("c3"),
        ("tool/result", {"turn": 1, "step": 1, "message": tool_result("c3")}),
        STEP_END,
        END,
    )
    extra = answers(events)
    assert [(e.type, e.seq) for e in extra] == [("tool/result", 8), ("tool/result", 9)]
    first, second = (e.data for e in extra)
    assert first["message"]["source"]["callId"] == "c1"
    assert first["error"]["code"] == TOOL_OUTCOME_UNKNOWN
    assert first["message"]["content"][0]["content"][0]["text"] == TOOL_OUTCOME_UNKNOWN_TEXT
    assert extra[0].source_event_seqs == (3,)
    assert second["message"]["source"]["callId"] == "c2"
    assert second["error"]["code"] == TOOL_NOT_STARTED
    assert extra[1].source_event_seqs is None
    assert all(e.time == events[-1].time for e in extra)
    Session.create("r", seed=[*events, *extra])  # the answered log is valid


def test_answers_leave_open_turns_and_answered_logs_to_the_closers() -> None:
    assert answers(()) == []
    assert answers(log(START, STEP, calls("c1"), call("c1"))) == []  # open: closers' job
    answered = log(
        START,
        STEP,
        calls("c1"),
        ("tool/result", {"turn": 1, "step": 1, "message": tool_result("c1")}),
        STEP_END,
        END,
    )
    assert answers(answered) == []
