"""``Session``: append, immutability, seeds and headers.

The reference's core acceptance cases that concern ``session/``, and where each is
ticked (the others live in tests/test_surface.py and tests/test_store.py):

- [x] 1  derive roles user, assistant, user; chunk not projected — ``test_case_1_...``
- [x] 2  surface type without surfaceOp — test_surface.py
- [x] 3  non-JSON data refused, log empty — ``test_case_3_...``
- [x] 4  surfaceOp on turn/start (append and seed) — test_surface.py, ``test_case_4_seed...``
- [x] 5  bad surface opts — test_surface.py
- [x] 6  caller mutation after append has no effect; event immutable — ``test_case_6_...``
- [x] 7  events snapshot identity and length — ``test_case_7_...``
- [x] 8  seed seqs 0 and 5 — ``test_case_8_...``
- [x] 9  seed user/message without surfaceOp — ``test_case_9_...``
- [x] 10 seed envelope errors; ignorable:true kept — ``test_case_10_...``
- [x] 11 seed of N events gets end-seed — ``test_case_11_...``
- [x] 12 empty seed, re-seed, no seed — ``test_case_12_...``
- [x] 13 header defaults, copy, and errors — ``test_case_13_...``
- [x] 14-17 store, observers, reentrancy, validator veto — test_store.py
- [x] 18 todo/write is not on the surface — ``test_case_18_...``
- [x] 19-22 surface replace rules — test_surface.py
- [x] 23 derive cache — ``test_case_23_...``
- [x] 24-28 fork — test_store.py
"""

from __future__ import annotations

import random
from typing import Any

import pytest
from pydantic import ValidationError

from agent_session.session import (
    Session,
    SessionDataError,
    SessionEvent,
    SessionEventError,
    SessionHeader,
    SessionHeaderError,
)
from agent_session.session.events.payloads import TurnStartData
from tests.builders import assistant, event, tool_result, user


def test_case_1_derive_messages_projects_the_surface() -> None:
    session = Session.create("s")
    session.append("turn/start", {"turn": 1})
    session.append("user/message", user(), surface_op="append")
    chunk = session.append(
        "assistant/chunk",
        {"turn": 1, "step": 1, "chunk": {"type": "text-delta", "index": 0, "text": "ok"}},
    )
    session.append(
        "assistant/message",
        {"turn": 1, "step": 1, "message": assistant(calls=("c1",))},
        surface_op="append",
        source_event_seqs=[chunk.seq],
    )
    session.append(
        "tool/result",
        {"turn": 1, "step": 1, "message": tool_result("c1")},
        surface_op="append",
        source_event_seqs=[chunk.seq],
    )
    session.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    messages = session.derive_messages()
    assert [m["role"] for m in messages] == ["user", "assistant", "user"]
    assert messages[0] is session.events[1].data
    assert messages[1] is session.events[3].data["message"]


@pytest.mark.parametrize(
    ("data", "path"),
    [
        ({"f": lambda: 1}, "data.f"),
        ({"x": float("inf")}, "data.x"),
        ({"x": float("nan")}, "data.x"),
        ({"x": -0.0}, "data.x"),
        ({"x": {1, 2}}, "data.x"),
        ({"x": object()}, "data.x"),
        ({"deep": [[[[{"x": [1, 2, float("nan")]}]]]]}, "data.deep[0][0][0][0].x[2]"),
    ],
)
def test_case_3_non_json_data_is_refused_with_type_and_path(data: Any, path: str) -> None:
    session = Session.create("s")
    with pytest.raises(SessionDataError) as info:
        session.append("tool/call", data)
    assert isinstance(info.value, TypeError)
    assert str(info.value).startswith(
        f'session event "tool/call" carries non-JSON-serializable data: {path} '
    )
    cyclic: dict[str, Any] = {}
    cyclic["self"] = cyclic
    with pytest.raises(SessionDataError, match="data.self refers back to itself"):
        session.append("x/y", cyclic)
    assert session.events == ()
    assert session.seq == 0


def test_non_json_surface_metadata_is_refused() -> None:
    session = Session.create("s")
    with pytest.raises(SessionDataError, match="non-JSON-serializable surface metadata"):
        session.append(
            "user/message", user(), surface_op="append", source_event_seqs=[float("nan")]
        )  # type: ignore[list-item]


def test_retired_header_vocabulary_is_refused() -> None:
    session = Session.create("s")
    with pytest.raises(SessionEventError, match="retired legacy event type"):
        session.append("request/header-delta", {})
    with pytest.raises(SessionEventError, match='reason "fallback"'):
        session.append("request/header", {"header": {"config": {}}, "reason": "fallback"})
    assert session.events == ()


def test_case_6_logged_data_is_a_copy_and_immutable() -> None:
    session = Session.create("s")
    data: dict[str, Any] = {"turn": 1, "list": [1, 2]}
    logged = session.append("turn/start", data)
    data["turn"] = 99
    data["list"].append(3)
    assert session.events[0].data == {"turn": 1, "list": [1, 2]}
    with pytest.raises(ValidationError):
        logged.seq = 5  # type: ignore[misc]
    with pytest.raises(TypeError):
        logged.data["turn"] = 2
    with pytest.raises(TypeError):
        logged.data["list"].append(9)
    with pytest.raises(AttributeError):
        session.events.append(logged)  # type: ignore[attr-defined]
    messages = session.derive_messages()
    messages.append("junk")
    assert session.derive_messages() == []
    assert session.events[0].to_json()["data"] == {"turn": 1, "list": [1, 2]}


def test_case_7_events_snapshot_is_stable() -> None:
    session = Session.create("s")
    session.append("turn/start", {"turn": 1})
    first, second = session.events, session.events
    assert first is second
    session.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    assert len(first) == 1
    assert len(session.events) == 2
    assert session.events is not first


def test_append_assigns_seq_and_clock_time_and_typed_payloads() -> None:
    ticks = iter(range(100, 200))
    session = Session.create("s", clock=lambda: next(ticks))
    start = session.append("turn/start", TurnStartData(turn=3))
    assert (start.seq, start.time, start.data) == (0, 101, {"turn": 3})
    assert start.payload == TurnStartData(turn=3)
    unknown = session.append("plugin/thing", [1, "two"])
    assert unknown.payload is None
    assert unknown.to_json() == {"type": "plugin/thing", "seq": 1, "time": 102, "data": [1, "two"]}


def test_appended_events_encode_in_reference_key_order() -> None:
    session = Session.create("s", clock=lambda: 7)
    session.append("user/message", user(), surface_op="append")
    msg = session.append(
        "assistant/message",
        {"turn": 1, "step": 1, "message": assistant()},
        surface_op="append",
        source_event_seqs=[0],
    )
    assert msg.encode().startswith(b'{"type":"assistant/message","seq":1,"time":7,"data":{')
    assert msg.encode().endswith(b',"sourceEventSeqs":[0],"surfaceOp":"append"}')
    assert SessionEvent.decode(msg.encode()) == msg


# --- seeds ------------------------------------------------------------------------------------


def test_case_8_seed_must_be_contiguous() -> None:
    seed = [event("turn/start", 0, {"turn": 1}), event("plugin/x", 5, {})]
    with pytest.raises(
        SessionEventError,
        match=r"seed event at index 1 has seq 5 \(expected 1\); seed must be contiguous from 0",
    ):
        Session.create("s", seed=seed)


def test_case_9_seed_surface_event_requires_surface_op() -> None:
    with pytest.raises(
        SessionEventError,
        match='invalid seed event at index 0: session event "user/message" is surface-eligible',
    ):
        Session.create("s", seed=[event("user/message", 0, user())])


def test_case_4_seed_non_surface_event_with_surface_op() -> None:
    with pytest.raises(
        SessionEventError, match="invalid seed event at index 0: .*not surface-eligible"
    ):
        Session.create("s", seed=[event("turn/start", 0, {"turn": 1}, surfaceOp="append")])


@pytest.mark.parametrize(
    "bad",
    [
        event("turn/start", 0, {"turn": 1}, extra=1),
        {"type": 5, "seq": 0, "time": 1, "data": {}},
        {"type": "t", "seq": -1, "time": 1, "data": {}},
        {"type": "t", "seq": "0", "time": 1, "data": {}},
        {"type": "t", "seq": 0, "time": 1.5, "data": {}},
        {"type": "t", "seq": 0, "time": 2**53, "data": {}},
        {"type": "t", "seq": 0, "time": 1},
        event("t", 0, {}, ignorable=False),
        event("t", 0, {}, ignorable="yes"),
    ],
)
def test_case_10_seed_envelope_errors(bad: dict[str, Any]) -> None:
    with pytest.raises(
        SessionEventError, match="seed event at index 0 has an invalid event envelope"
    ):
        Session.create("s", seed=[bad])


def test_case_10_ignorable_true_is_kept_and_written_back() -> None:
    raw = event("future/thing", 0, {"a": 1}, ignorable=True)
    session = Session.create("s", seed=[raw])
    assert session.events[0].ignorable is True
    assert session.events[0].to_json() == raw


def test_seed_that_is_not_json_is_refused() -> None:
    with pytest.raises(
        SessionEventError, match=r"seed event at index 0 is not losslessly JSON-serializable"
    ):
        Session.create("s", seed=[event("t", 0, {"x": float("nan")})])


@pytest.mark.parametrize(
    ("type", "data", "message"),
    [
        ("user/message", {**user(), "id": ""}, "lacks an identified message"),
        ("user/message", {**user(), "role": "assistant"}, 'message must have role "user"'),
        ("user/message", {**user(), "source": {}}, "message must have a source kind"),
        ("user/message", {**user(), "content": "hi"}, "message content must be an array"),
        ("assistant/message", {"turn": 1, "step": 1}, "lacks an identified message"),
        (
            "assistant/message",
            {"message": {**assistant(), "source": {"kind": "user"}}},
            "message must have model source",
        ),
        (
            "tool/result",
            {"message": {**tool_result("c1"), "source": {"kind": "user"}}},
            "message must have tool source",
        ),
        (
            "tool/result",
            {"message": {**tool_result("c1"), "content": []}},
            "message must contain one tool-result block",
        ),
        (
            "tool/result",
            {"message": {**tool_result("c1"), "source": {"kind": "tool", "callId": "c2"}}},
            "message has mismatched tool call ids",
        ),
        (
            "request/header",
            {"header": {"config": {"provider": "p"}}, "reason": "initial"},
            "lacks provider/model",
        ),
        (
            "request/header",
            {
                "header": {"config": {"provider": "p", "model": "m", "reasoningEffort": ""}},
                "reason": "initial",
            },
            "reasoningEffort must be a non-empty string",
        ),
        (
            "request/header",
            {
                "header": {
                    "config": {"provider": "p", "model": "m"},
                    "adapterDefaults": {"maxTokens": True},
                },
                "reason": "initial",
            },
            "has invalid adapterDefaults",
        ),
    ],
)
def test_seed_message_shapes(type: str, data: Any, message: str) -> None:
    extra = {} if type == "request/header" else {"surfaceOp": "append"}
    with pytest.raises(SessionEventError, match=f"seed {type} at index 0 {message}"):
        Session.create("s", seed=[event(type, 0, data, **extra)])


def test_append_refuses_what_a_load_would_refuse() -> None:
    """The reference's append takes any message shape; its load refuses some. Ours applies the
    load's rules at append, so nothing appended can make the log unreadable."""
    session = Session.create("s")
    with pytest.raises(SessionEventError, match="lacks an identified message"):
        session.append("user/message", {"anything": True}, surface_op="append")
    with pytest.raises(SessionEventError, match='register_event_type\\("myapp/note"\\)'):
        session.append("myapp/note", {"x": 1})
    call = {"turn": 1, "step": 1, "call_id": "c1", "name": "t", "arguments": "{}"}
    with pytest.raises(SessionEventError, match="must name the call it records"):
        session.append("tool/call", call)  # recovery would call its body never started
    assert session.events == ()


def test_case_11_seed_gets_end_seed_marker() -> None:
    seed = [
        event("turn/start", 0, {"turn": 1}),
        event("user/message", 1, user(), surfaceOp="append"),
        event("turn/end", 2, {"turn": 1, "reason": {"kind": "completed"}}),
    ]
    session = Session.create("s", seed=seed)
    assert [e.type for e in session.events] == [
        "turn/start",
        "user/message",
        "turn/end",
        "session/end-seed",
    ]
    assert session.events[3].data == {}
    assert session.first_live_seq == 3
    assert session.surface.nodes == (1,)
    assert [e.to_json() for e in session.events[:3]] == seed


def test_case_12_empty_seed_and_reseed() -> None:
    first = Session.create("s", seed=[])
    assert [(e.type, e.seq) for e in first.events] == [("session/end-seed", 0)]
    assert first.first_live_seq == 0
    again = Session.create("s", seed=first.events)
    assert [(e.type, e.seq) for e in again.events] == [("session/end-seed", 0)]
    assert again.first_live_seq == 1
    assert Session.create("s").events == ()


def test_case_13_header_defaults_copy_and_errors() -> None:
    plain = Session.create("s", clock=lambda: 42)
    assert plain.header.to_json() == {
        "version": 0,
        "id": "s",
        "createdAt": 42,
        "delegationDepth": 0,
    }
    supplied = {"version": 0, "id": "s", "createdAt": 1, "cwd": "/w", "seedLength": 0}
    session = Session.create("s", header=supplied)
    supplied["cwd"] = "/elsewhere"
    assert session.header.cwd == "/w"
    with pytest.raises(ValidationError):
        session.header.cwd = "/x"  # type: ignore[misc]
    bad = [
        ({"version": 1, "id": "s", "createdAt": 1}, "session header version must be 0, got 1"),
        (
            {"version": 0, "id": "s", "createdAt": 1, "cwd": "rel"},
            'session header cwd must be an absolute path, got "rel"',
        ),
        ({"version": 0, "id": "s", "createdAt": 1, "cwd": 3}, "cwd must be a string"),
        (
            {"version": 0, "id": "s", "createdAt": 1, "seedLength": -1},
            "seedLength must be a non-negative safe integer",
        ),
        (
            {"version": 0, "id": "s", "createdAt": 1, "seedLength": 0.5},
            "seedLength must be a non-negative safe integer",
        ),
        (
            {"version": 0, "id": "other", "createdAt": 1},
            'session header id "other" does not match session id "s"',
        ),
        ({"version": 0, "id": "s", "createdAt": -1}, "createdAt must be a non-negative"),
        ({"version": 0, "id": "s", "createdAt": 1, "origin": "x"}, 'origin must be "subagent"'),
        (
            {"version": 0, "id": "s", "createdAt": 1, "parentSession": 1},
            "parentSession must be a string",
        ),
        (
            {"version": 0, "id": "s", "createdAt": 1, "x": float("nan")},
            "not losslessly JSON-serializable",
        ),
        ([1], "session header is not a plain JSON record"),
    ]
    for header, message in bad:
        with pytest.raises(SessionHeaderError, match=message):
            Session.create("s", header=header)  # type: ignore[arg-type]


def test_header_key_order() -> None:
    header = SessionHeader(
        id="s",
        created_at=1,
        agent_preset="p",
        cwd="/w",
        parent_session="par",
        seed_length=3,
        origin="subagent",
        delegation_depth=2,
    )
    assert list(header.to_json()) == [
        "version",
        "id",
        "createdAt",
        "cwd",
        "parentSession",
        "seedLength",
        "origin",
        "delegationDepth",
        "agentPreset",
    ]


def test_case_18_todo_write_is_log_only() -> None:
    session = Session.create("s")
    session.append("todo/write", {"todos": [{"content": "a", "status": "pending"}]})
    last = session.append("todo/write", {"todos": [{"content": "a", "status": "completed"}]})
    assert session.surface.nodes == ()
    assert session.derive_messages() == []
    todos = [e for e in session.events if e.type == "todo/write"]
    assert todos[-1] is last


def _replay(events: tuple[SessionEvent, ...]) -> list[Any]:
    """Derive from scratch through a fresh seeded session."""
    return Session.create("r", seed=events).derive_messages()


def test_case_23_derive_cache_matches_scratch_replay() -> None:
    rng = random.Random(7)
    session = Session.create("s")
    for i in range(60):
        roll = rng.random()
        nodes = session.surface.nodes
        if roll < 0.15 and len(nodes) >= 2:
            a, b = sorted(rng.sample(range(len(nodes)), 2))
            session.append(
                "user/message",
                user(f"sum{i}", id=f"s{i}"),
                surface_op={"op": "replace", "start": nodes[a], "end": nodes[b]},
                source_event_seqs=list(nodes[a : b + 1]),
            )
        elif roll < 0.6:
            session.append("user/message", user(f"m{i}", id=f"u{i}"), surface_op="append")
        else:
            session.append("assistant/chunk", {"i": i})
        first, second = session.derive_messages(), session.derive_messages()
        assert first == second
        assert first is not second
        assert first == _replay(session.events)
    assert session.surface.replace_generation > 0


def test_events_pickle_and_compare_by_content() -> None:
    import pickle

    session = Session.create("p", clock=lambda: 3)
    event = session.append("user/message", user(), surface_op="append")
    again = pickle.loads(pickle.dumps(event))
    assert again == event
    assert again.encode() == event.encode()
    decoded = SessionEvent.decode(event.encode())
    assert decoded == event
    reordered = SessionEvent.from_json(dict(reversed(list(event.to_json().items()))))
    assert reordered.encode() != event.encode()  # the written key order is kept...
    assert reordered == event  # ...but equality compares content


def test_appended_events_are_out_of_the_cyclic_collectors_view() -> None:
    """An event and its frozen data hold no reference cycle, so they are untracked: a long
    log costs the full collections nothing (reference counting still frees them)."""
    import gc
    import platform

    session = Session.create("s")
    event = session.append("turn/start", {"turn": 1, "nested": {"list": [1, {"x": "y"}]}})
    tracked = [
        gc.is_tracked(value)
        for value in (
            event,
            event.__dict__,
            event.data,
            event.data["nested"],
            event.data["nested"]["list"],
            event.data["nested"]["list"][1],
        )
    ]
    assert tracked == [platform.python_implementation() != "CPython"] * 6
    assert event.data == {"turn": 1, "nested": {"list": [1, {"x": "y"}]}}


@pytest.mark.parametrize(
    ("type", "data"),
    [
        ("assistant/message", {"turn": 1, "step": 1, "message": assistant()}),
        ("user/message", user()),
        ("step/start", {"turn": 1, "step": 1}),
    ],
)
@pytest.mark.parametrize("op", ["append", {"op": "replace", "start": 0, "end": 0}, "other"])
def test_an_empty_source_list_is_judged_as_any_other_sequence(
    type: str, data: dict[str, Any], op: Any
) -> None:
    """The empty list a model's message usually cites takes a shorter path; the outcome is
    the one an empty tuple (the general path) gets, event or error."""
    outcomes = []
    for sources in ([], ()):
        session = Session.create("s", clock=lambda: 5)
        session.append("user/message", user(), surface_op="append")
        try:
            outcomes.append(session.append(type, data, surface_op=op, source_event_seqs=sources))
        except Exception as e:
            outcomes.append((e.__class__, str(e)))
    assert outcomes[0] == outcomes[1]
