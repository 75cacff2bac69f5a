"""What the pages hold of each request (``see.steps.sent``): each message once, each request
as runs of them, which are exactly the history ``logged_requests`` reads back (itself checked
against what the adapter was handed): across tool steps, a changed header, a resume, a
settlement step (which asks nothing, and whose row says so), and every conformance log."""

from __future__ import annotations

from typing import Any

import pytest

from agent_session.see.steps import render, sent
from agent_session.see.view import rows, timeline
from agent_session.session.events.requests import logged_requests
from agent_session.session.events.surface import projected_message


def _flat(page: dict[str, Any], request: dict[str, Any]) -> list[int]:
    return [page["messages"][i]["seq"] for first, end in request["m"] for i in range(first, end)]


def _same(events: Any) -> None:
    page = sent(events)
    read = logged_requests(events)
    assert sorted(page["requests"]) == [r.at_seq for r in read]
    for request in read:
        shown = page["requests"][request.at_seq]
        projecting = [s for s in request.message_seqs if projected_message(events[s]) is not None]
        assert _flat(page, shown) == projecting, request.at_seq
        header = page["headers"][shown["h"]]
        assert header["model"] == str(request.config.get("model", ""))
        assert header["system"] == (request.system or "")
        assert [t["name"] for t in header["tools"]] == [t["name"] for t in request.tools]
    assert [m["seq"] for m in page["messages"]] == sorted(
        e.seq for e in events if projected_message(e) is not None and e.surface_op is not None
    )


async def test_requests_across_steps_a_changed_header_and_a_resume() -> None:
    from agent_session import MemoryStore, ScriptedCall, ScriptedModel, ScriptedStep
    from tests.test_logged_requests import _runtime

    store = MemoryStore()
    model = ScriptedModel(
        [
            ScriptedStep(calls=[ScriptedCall("c1", "look", ['{"what": "a"}'])]),
            ScriptedStep(text=["It is a."]),
            ScriptedStep(text=["Hello."]),
        ]
    )
    runtime = _runtime(store, model)
    session = runtime.sessions.create("s")
    await runtime.agent(session, model="m/one", system="Be brief.").run_turn("What is it?")
    await runtime.agent(session, model="m/two", system="Be kind.").run_turn("Hi.")
    await runtime.__aexit__(None, None, None)
    _same(session.events)
    page = sent(session.events)
    assert [h["system"] for h in page["headers"]] == ["Be brief.", "Be kind."]
    assert [len(r["m"]) for r in page["requests"].values()] == [1, 1, 1]  # one run each
    shown = rows(session.events)
    steps = [r for r in shown if r["k"] == "step"]
    assert [s["model"] for s in steps] == ["one", "one", "two"]
    assert steps[1]["answer"] == "It is a."
    assert steps[0]["answer"].startswith('→ look({"what": "a"}) [c1]')


async def test_a_settlement_step_asked_nothing_and_the_next_one_is_read_back() -> None:
    from tests.test_settle import World, crashed, resumed

    world = World()
    await crashed(world, "idempotent")
    _, session = await resumed(world, "idempotent")
    _same(session.events)
    steps = [r for r in rows(session.events) if r["k"] == "step"]
    settling = [s for s in steps if "sent" not in s]
    assert len(settling) == 1  # the settlement: its answer recorded again, no request
    assert "modelMs" in settling[0]
    page = sent(session.events)
    assert any(len(r["m"]) > 1 for r in page["requests"].values())  # history rewritten


def test_a_history_rewritten_before_a_request_is_sent_as_rewritten() -> None:
    from agent_session.session import Session

    session = Session.create("r")

    def user(text: str) -> None:
        message = {"role": "user", "content": [{"type": "text", "text": text}], "id": text}
        session.append("user/message", {**message, "source": {"kind": "user"}}, surface_op="append")

    def answer(turn: int, text: str, op: Any = "append", sources: Any = ()) -> None:
        message: dict[str, Any] = {"role": "assistant", "id": text}
        message["content"] = [{"type": "text", "text": text}]
        message["source"] = {"kind": "model", "provider": "p", "model": "m"}
        data = {"turn": turn, "step": 1, "message": message}
        session.append("assistant/message", data, surface_op=op, source_event_seqs=list(sources))

    for turn in (1, 2):
        session.append("turn/start", {"turn": turn})
        user(f"question {turn}")  # seqs 1 and 7
        session.append("step/start", {"turn": turn, "step": 1})
        answer(turn, f"answer {turn}")  # seqs 3 and 9
        session.append("step/end", {"turn": turn, "step": 1})
        session.append("turn/end", {"turn": turn, "reason": {"kind": "completed"}})
    # a summary in place of the first exchange (seqs 1 to 3), as a compaction writes one
    answer(2, "the first exchange, in short", {"op": "replace", "start": 1, "end": 3}, [1, 3])
    session.append("turn/start", {"turn": 3})
    user("question 3")
    session.append("step/start", {"turn": 3, "step": 1})
    answer(3, "answer 3")
    _same(session.events)
    page = sent(session.events)
    last = page["requests"][max(page["requests"])]
    texts = [page["messages"][i]["text"] for first, end in last["m"] for i in range(first, end)]
    assert texts == ["the first exchange, in short", "question 2", "answer 2", "question 3"]


def _corpus_logs() -> list[Any]:
    from agent_session.session.events.event import SessionEvent
    from tests.corpus import case_id, cases

    return [
        pytest.param([SessionEvent.from_json(e) for e in case["load"]["events"]], id=case_id(case))
        for case in cases("upstream-v0")
        if "error" not in case["load"]
    ]


@pytest.mark.parametrize("events", _corpus_logs())
def test_every_conformance_log_s_requests_are_the_ones_read_back(events: Any) -> None:
    _same(events)
    timeline({"id": "c"}, events)  # (and the whole page's data is made)


def test_a_message_is_shown_block_by_block() -> None:
    message = {
        "role": "assistant",
        "content": [
            {"type": "reasoning", "text": "think"},
            {"type": "text", "text": "Hi."},
            {"type": "tool-call", "id": "c1", "name": "look", "arguments": '{"a": 1}'},
            {"type": "image", "data": "..."},
        ],
    }
    assert render(message) == {
        "role": "assistant",
        "text": '[reasoning] think\nHi.\n→ look({"a": 1}) [c1]\n[image]',
    }
    result = {
        "role": "user",
        "source": {"kind": "tool", "callId": "c1"},
        "content": [
            {
                "type": "tool-result",
                "toolCallId": "c1",
                "content": [{"type": "text", "text": "no"}],
                "isError": True,
            }
        ],
    }
    assert render(result) == {"role": "tool", "text": "← [c1] (error) no"}
    assert render("not a message") == {"role": "?", "text": '"not a message"'}
