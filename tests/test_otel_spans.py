"""The log-to-spans mapping on its own (``agent_session.otel.spans``): a clock that went back,
approvals as span events, a fork's link to its parent, and ids that differ between
incarnations and sessions."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent_session import Runtime, open_store
from agent_session.cli import main
from agent_session.otel.spans import turn_traces
from tests.corpus import cases
from tests.otlp_receiver import receiver


@dataclass(frozen=True)
class Event:
    type: str
    seq: int
    time: int
    data: Any


def _log(times: list[int]) -> list[Event]:
    """One turn with one tool call, at the times given (seven events)."""
    kinds = [
        ("turn/start", {"turn": 1}),
        ("step/start", {"turn": 1, "step": 1}),
        ("assistant/message", {"turn": 1, "step": 1, "message": {"role": "assistant"}}),
        ("tool/call", {"turn": 1, "step": 1, "callId": "c1", "name": "f", "arguments": "{}"}),
        (
            "tool/result",
            {"turn": 1, "step": 1, "message": {"source": {"callId": "c1"}, "content": []}},
        ),
        ("step/end", {"turn": 1, "step": 1}),
        ("turn/end", {"turn": 1, "reason": {"kind": "completed"}}),
    ]
    return [
        Event(t, seq, time, data)
        for seq, ((t, data), time) in enumerate(zip(kinds, times, strict=True))
    ]


def test_a_span_whose_clock_went_back_ends_at_its_start_and_says_so() -> None:
    (trace,) = turn_traces("s", 1, _log([1000, 1001, 1002, 1003, 990, 991, 1005]))
    tool = next(s for s in trace.spans if s.name == "execute_tool f")
    assert tool.end_ns == tool.start_ns == 1003 * 1_000_000
    assert tool.attributes["agent_session.time_clamped"] is True
    assert all(s.end_ns >= s.start_ns for s in trace.spans)
    assert not any(
        "agent_session.time_clamped" in s.attributes for s in trace.spans if s is not tool
    )


def test_ids_differ_between_sessions_and_incarnations_and_repeat_otherwise() -> None:
    log = _log(list(range(1000, 1007)))

    def ids(session: str, incarnation: int) -> set[int]:
        (trace,) = turn_traces(session, incarnation, log)
        return {trace.spans[0].trace_id, *(s.span_id for s in trace.spans)}

    assert ids("s", 1) == ids("s", 1)
    assert ids("s", 1).isdisjoint(ids("s", 2))
    assert ids("s", 1).isdisjoint(ids("t", 1))


def test_approvals_are_events_on_their_turns_span() -> None:
    case = next(c for c in cases("upstream-approval-v0") if c["scenario"] == "approve")
    events = [Event(e["type"], e["seq"], e["time"], e["data"]) for e in case["load"]["events"]]
    traces = turn_traces(case["session_id"], 1, events)
    names = [name for t in traces for name, _, _ in t.spans[0].events]
    assert names == ["approval/asked", "approval/decided"]


async def _parent_and_fork(store: str) -> None:
    """A session of two turns, and a fork of it that adds a third."""
    backend = open_store(store)
    runtime = Runtime()
    runtime.install(backend)
    parent = runtime.sessions.create("parent")
    for turn in (1, 2):
        parent.append("turn/start", {"turn": turn})
        parent.append("turn/end", {"turn": turn, "reason": {"kind": "completed"}})
    child = runtime.sessions.fork(parent, child_id="child")
    child.append("turn/start", {"turn": 3})
    child.append("turn/end", {"turn": 3, "reason": {"kind": "completed"}})
    await runtime.sessions.flush(parent)
    await runtime.sessions.flush(child)
    await backend.aclose()


def test_a_forks_first_turn_links_to_the_parents_turn_it_continues(tmp_path: Path) -> None:
    store = str(tmp_path / "store")
    asyncio.run(_parent_and_fork(store))
    with receiver() as got:
        assert main(["export-otel", store, "--endpoint", got.url]) == 0
    turns = [s for s in got.spans if s["name"] == "invoke_agent"]
    mine = [t for t in turns if t["attributes"]["gen_ai.conversation.id"] == "child"]
    assert len(mine) == 1  # the seeded turns are the parent's, sent once, as the parent's
    parents = [t for t in turns if t["attributes"]["gen_ai.conversation.id"] == "parent"]
    last = max(parents, key=lambda t: t["attributes"]["agent_session.turn"])
    assert mine[0]["links"] == [(last["trace_id"], last["span_id"])]


def test_a_call_settled_on_resume_has_a_settled_event() -> None:
    log = _log(list(range(1000, 1007)))
    result = log[4]
    log[4] = Event(
        result.type,
        result.seq,
        result.time,
        {**result.data, "meta": {"settlement": "probed-applied"}},
    )
    (trace,) = turn_traces("s", 1, log)
    tool = next(s for s in trace.spans if s.name == "execute_tool f")
    assert tool.events == [("agent_session.settled", 1004 * 1_000_000, {"how": "probed-applied"})]


def test_cache_and_reasoning_tokens_go_where_the_conventions_put_them() -> None:
    log = _log(list(range(1000, 1007)))
    usage = {"inputTokens": 7, "outputTokens": 5, "cacheReadTokens": 3, "cacheWriteTokens": 2}
    chunk = Event(
        "assistant/chunk",
        2,
        1001,
        {
            "turn": 1,
            "step": 1,
            "chunk": {"type": "usage", "usage": {**usage, "reasoningTokens": 4}},
        },
    )
    shifted = [log[0], log[1], chunk, *(Event(e.type, e.seq + 1, e.time, e.data) for e in log[2:])]
    (trace,) = turn_traces("s", 1, shifted)
    chat = next(s for s in trace.spans if s.kind == "CLIENT")
    assert {k: v for k, v in chat.attributes.items() if k.startswith("gen_ai.usage")} == {
        "gen_ai.usage.input_tokens": 7,
        "gen_ai.usage.output_tokens": 5,
        "gen_ai.usage.cache_read.input_tokens": 3,
        "gen_ai.usage.cache_creation.input_tokens": 2,
        "gen_ai.usage.reasoning.output_tokens": 4,
    }


async def test_a_settlement_step_is_an_event_of_its_turn_not_a_model_call() -> None:
    """A resumed turn's settlement step made no request: no ``chat`` span (the old export
    made a 0 ms one, with the cut step's response id), but an event on the turn naming what it
    replaced, and its calls' spans; the step after it, which asked the model, is a ``chat``."""
    from tests.test_settle import World, crashed, resumed

    world = World()
    await crashed(world, "idempotent")
    _, session = await resumed(world, "idempotent")
    first, second = turn_traces("s", 1, session.events)
    assert [s.name for s in first.spans].count("chat x") == 1
    root, *children = second.spans
    assert sorted(s.name for s in children) == [
        "chat x",
        "execute_tool notify",
        "execute_tool pay",
    ]
    (chat,) = (s for s in children if s.kind == "CLIENT")
    asked = next(e for e in session.events if e.type == "assistant/message" and e.seq > 30)
    assert chat.attributes["agent_session.message.id"] == asked.data["message"]["id"]
    assert "gen_ai.response.id" not in chat.attributes  # (a scripted model names none)
    (settlement,) = (e for e in root.events if e[0] == "agent_session.settlement")
    again = next(e for e in session.events if getattr(e.surface_op, "op", None) == "replace")
    assert settlement[2] == {
        "agent_session.step": 1,
        "agent_session.seq": again.seq,
        "agent_session.settlement.replaces": f"{again.surface_op.start}-{again.surface_op.end}",
    }
    settled = {s.name: s.events for s in children if s.name.startswith("execute_tool")}
    assert [e[2]["how"] for e in settled["execute_tool pay"]] == ["re-run"]
