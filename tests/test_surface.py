"""Surface rules through ``Session.append``, with the reference's texts.

Acceptance cases covered here: 2, 4 (append half), 5, 19, 20, 21, 22.
"""

from __future__ import annotations

from typing import Any

import pytest

from agent_session.session import Session, SessionEventError, SurfaceReplace
from tests.builders import assistant, tool_result, user


@pytest.fixture
def session() -> Session:
    return Session.create("s")


def _unchanged(session: Session, before: tuple[Any, ...], nodes: tuple[int, ...]) -> None:
    assert session.events == before
    assert session.surface.nodes == nodes


def test_case_2_surface_type_requires_surface_op(session: Session) -> None:
    with pytest.raises(
        SessionEventError,
        match='session event "user/message" is surface-eligible and requires a surfaceOp marker',
    ):
        session.append("user/message", user())
    assert session.events == ()


def test_case_4_non_surface_type_cannot_carry_surface_fields(session: Session) -> None:
    with pytest.raises(SessionEventError, match="not surface-eligible and cannot carry surfaceOp"):
        session.append("turn/start", {"turn": 1}, surface_op="append")
    with pytest.raises(
        SessionEventError, match="not surface-eligible and cannot carry sourceEventSeqs"
    ):
        session.append("turn/start", {"turn": 1}, source_event_seqs=[])
    assert session.events == ()


@pytest.mark.parametrize(
    ("op", "sources", "message"),
    [
        ("invalid", None, "carries an invalid surfaceOp"),
        ({"op": "splice", "start": 0, "end": 0}, None, "carries an invalid surfaceOp"),
        (42, None, "carries an invalid surfaceOp"),
        ({"op": "replace", "start": -1, "end": 0}, [0], "carries an invalid replace surfaceOp"),
        ({"op": "replace", "start": 0}, [0], "carries an invalid replace surfaceOp"),
        ({"op": "replace", "start": 0, "end": 0, "x": 1}, [0], "invalid replace surfaceOp"),
        ({"op": "replace", "start": 0.5, "end": 0}, [0], "invalid replace surfaceOp"),
        ("append", [0, -1], "sourceEventSeqs must contain non-negative safe integers"),
        ("append", [0, 0.5], "sourceEventSeqs must contain non-negative safe integers"),
        ("append", [True], "sourceEventSeqs must contain non-negative safe integers"),
        ("append", [0, 0], "sourceEventSeqs must not contain duplicates"),
        ("append", [], "sourceEventSeqs must not be empty except on assistant/message"),
        ("append", [1], "sourceEventSeqs must reference earlier events: 1 >= current seq 1"),
        ("append", [5], "sourceEventSeqs must reference earlier events: 5 >= current seq 1"),
    ],
)
def test_case_5_20_bad_surface_metadata(op: Any, sources: Any, message: str) -> None:
    session = Session.create("s")
    session.append("user/message", user(id="first"), surface_op="append")
    before, nodes = session.events, session.surface.nodes
    with pytest.raises(SessionEventError, match=message):
        session.append("user/message", user(), surface_op=op, source_event_seqs=sources)
    _unchanged(session, before, nodes)


def test_case_20_empty_sources_allowed_on_assistant_message(session: Session) -> None:
    event = session.append(
        "assistant/message",
        {"turn": 1, "step": 1, "message": assistant()},
        surface_op="append",
        source_event_seqs=[],
    )
    assert event.source_event_seqs == ()
    assert event.to_json()["sourceEventSeqs"] == []


def _three_users(session: Session) -> None:
    for i in range(3):
        session.append("user/message", user(f"m{i}", id=f"u{i}"), surface_op="append")


def test_case_19_replace_splices_and_bumps_generation(session: Session) -> None:
    _three_users(session)
    event = session.append(
        "user/message",
        user("summary", id="sum"),
        surface_op={"op": "replace", "start": 0, "end": 1},
        source_event_seqs=[0, 1],
    )
    assert event.surface_op == SurfaceReplace(start=0, end=1)
    assert session.surface.nodes == (3, 2)
    assert session.surface.replace_generation == 1
    assert [m["id"] for m in session.derive_messages()] == ["sum", "u2"]
    assert event.to_json()["surfaceOp"] == {"op": "replace", "start": 0, "end": 1}


def test_case_19_replace_must_cite_every_shadowed_node(session: Session) -> None:
    _three_users(session)
    before, nodes = session.events, session.surface.nodes
    with pytest.raises(
        SessionEventError,
        match="must include every shadowed surface node; missing 1, 2$",
    ):
        session.append(
            "user/message",
            user(),
            surface_op=SurfaceReplace(start=0, end=2),
            source_event_seqs=[0],
        )
    _unchanged(session, before, nodes)


@pytest.mark.parametrize(
    ("start", "end", "message"),
    [
        (7, 1, "surface replace: start seq 7 not found in surface"),
        (0, 9, "surface replace: end seq 9 not found in surface"),
        (2, 0, "surface replace: start seq 2 is after end seq 0"),
    ],
)
def test_replace_range_must_be_current_nodes(start: int, end: int, message: str) -> None:
    session = Session.create("s")
    _three_users(session)
    with pytest.raises(SessionEventError, match=message):
        session.append(
            "user/message",
            user(),
            surface_op={"op": "replace", "start": start, "end": end},
            source_event_seqs=[0, 1, 2],
        )
    assert session.surface.nodes == (0, 1, 2)


def test_replaced_nodes_are_no_longer_targets(session: Session) -> None:
    _three_users(session)
    session.append(
        "user/message",
        user(),
        surface_op={"op": "replace", "start": 0, "end": 0},
        source_event_seqs=[0],
    )
    with pytest.raises(SessionEventError, match="start seq 0 not found"):
        session.append(
            "user/message",
            user(),
            surface_op={"op": "replace", "start": 0, "end": 0},
            source_event_seqs=[0],
        )


def _with_tool_result(session: Session, **extra: Any) -> None:
    session.append("user/message", user(), surface_op="append")  # seq 0
    session.append(  # seq 1
        "assistant/message",
        {"turn": 1, "step": 1, "message": assistant(calls=("c1",))},
        surface_op="append",
        source_event_seqs=[],
    )
    session.append(
        "tool/call", {"turn": 1, "step": 1, "callId": "c1", "name": "read_file", "arguments": "{}"}
    )  # seq 2
    session.append(  # seq 3
        "tool/result",
        {"turn": 1, "step": 1, "message": tool_result("c1"), **extra},
        surface_op="append",
        source_event_seqs=[2],
    )


def test_tool_result_replacement_may_change_content(session: Session) -> None:
    _with_tool_result(session, meta={"k": 1})
    replacement = tool_result("c1", text="[elided]")
    event = session.append(
        "tool/result",
        {"turn": 1, "step": 1, "message": replacement, "meta": {"k": 1}},
        surface_op={"op": "replace", "start": 3, "end": 3},
        source_event_seqs=[3],
    )
    assert session.surface.nodes == (0, 1, event.seq)
    derived = session.derive_messages()
    assert derived[-1]["content"][0]["content"][0]["text"] == "[elided]"


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda m, d: m["content"][0].update(toolCallId="c2"), "may change only content"),
        (lambda m, d: m["content"][0].update(isError=True), "may change only content"),
        (lambda m, d: m.update(id="other"), "may change only content"),
        (lambda m, d: d.update(meta={"k": 2}), "may change only content"),
        (lambda m, d: d.update(step=2), "may change only content"),
        (lambda m, d: d.update(error={"name": "E", "code": "C"}), "may change only content"),
    ],
)
def test_case_21_tool_result_replacement_may_change_only_content(change: Any, message: str) -> None:
    session = Session.create("s")
    _with_tool_result(session, meta={"k": 1})
    replacement = tool_result("c1", text="[elided]")
    data = {"turn": 1, "step": 1, "message": replacement, "meta": {"k": 1}}
    change(replacement, data)
    before = session.events
    with pytest.raises(SessionEventError, match=f"tool/result surface replacement {message}"):
        session.append(
            "tool/result",
            data,
            surface_op={"op": "replace", "start": 3, "end": 3},
            source_event_seqs=[3],
        )
    assert session.events == before


def test_case_21_tool_result_replacement_shape(session: Session) -> None:
    _with_tool_result(session)
    data = {"turn": 1, "step": 1, "message": tool_result("c1", text="x")}
    with pytest.raises(SessionEventError, match="must rewrite exactly one current node"):
        session.append(
            "tool/result",
            data,
            surface_op={"op": "replace", "start": 1, "end": 3},
            source_event_seqs=[1, 3],
        )
    with pytest.raises(SessionEventError, match="must target a current tool/result"):
        session.append(
            "tool/result",
            data,
            surface_op={"op": "replace", "start": 1, "end": 1},
            source_event_seqs=[1],
        )
    assert session.surface.nodes == (0, 1, 3)


def test_case_22_empty_assistant_message_derives_nothing(session: Session) -> None:
    session.append("user/message", user(), surface_op="append")
    empty = {
        "role": "assistant",
        "content": [],
        "source": {"kind": "model", "provider": "p", "model": "m"},
        "id": "a0",
    }
    session.append(
        "assistant/message",
        {"turn": 1, "step": 1, "message": empty, "usage": {"inputTokens": 1, "outputTokens": 0}},
        surface_op="append",
        source_event_seqs=[],
    )
    assert session.surface.nodes == (0, 1)
    assert [m["role"] for m in session.derive_messages()] == ["user"]
