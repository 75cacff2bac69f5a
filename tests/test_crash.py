"""Crash tests with real processes: a child runs the reference stack (JSONL or SQLite backend,
policy, loop, scripted model) and is SIGKILLed at a failpoint; the parent loads what is on
disk.

Invariants: every event the child reported durable is present and unchanged; the repaired log
ends with the right closers; the derived history pairs every tool call with exactly one
result; the session resumes and a further turn runs and persists.
"""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

import pytest

from agent_session.demo.child import digest
from agent_session.demo.stack import MODEL, SYSTEM, open_stack, turn_script, workdir_of
from agent_session.recovery import TOOL_OUTCOME_UNKNOWN
from agent_session.session import SessionEvent
from agent_session.stores import parse_store
from tests.backends import fresh_database
from tests.forkserver import run_module

pytestmark = pytest.mark.process

REPO = Path(__file__).resolve().parents[1]


def run_child(root: str, mode: str, *extra: str) -> list[tuple[int, str]]:
    """Run the crash child to its death; return its durable reports."""
    result = run_module("agent_session.demo.child", str(root), "crash", "--mode", mode, *extra)
    if mode == "none":
        assert result.returncode == 0, result.stderr
    else:
        assert result.returncode == -signal.SIGKILL, result.stderr
        assert f"failpoint {mode}" in result.stdout
    reports = []
    for line in result.stdout.splitlines():
        if line.startswith("durable "):
            _, count, sha = line.split()
            reports.append((int(count), sha))
    return reports


def pairing_problems(messages: list[Any]) -> list[str]:
    """Tool calls not followed by exactly one result before the next assistant message."""
    problems: list[str] = []
    open_calls: dict[str, int] = {}
    for message in [*messages, {"role": "assistant", "content": []}]:
        if message.get("role") == "assistant":
            problems += [f"{call} has {n} results" for call, n in open_calls.items() if n != 1]
            open_calls = {b["id"]: 0 for b in message["content"] if b["type"] == "tool-call"}
        elif message.get("source", {}).get("kind") == "tool":
            call = message["source"]["callId"]
            if call not in open_calls:
                problems.append(f"result for unknown call {call}")
            else:
                open_calls[call] += 1
    return problems


async def check_after_crash(root: str, reports: list[tuple[int, str]]) -> list[SessionEvent]:
    backend = parse_store(root).open()
    loaded = list((await backend.load("crash")).events)
    for count, sha in reports:
        assert digest(loaded[:count]) == sha, f"durable prefix of {count} events changed"
    assert loaded[-1].type == "turn/end"
    await backend.aclose()
    return loaded


async def resume_and_continue(root: str, before: list[SessionEvent]) -> None:
    turns = sum(1 for e in before if e.type == "turn/start")
    stack = open_stack(root, turn_script(turns + 1))
    session = await stack.runtime.sessions.resume("crash")
    assert session.seq == len(before) + 1  # the stored log plus one session/end-seed
    reason = await stack.runtime.agent(session, model=MODEL, system=SYSTEM).run_turn("again")
    assert reason == {"kind": "completed"}
    assert pairing_problems(session.derive_messages()) == []
    await stack.close()
    backend = parse_store(root).open()
    reread = await backend.load("crash")
    await backend.aclose()
    assert [e.encode() for e in reread.events] == [e.encode() for e in session.events]
    assert sum(1 for e in reread.events if e.type == "turn/start") == turns + 1


@pytest.mark.parametrize("mode", ["tool", "parallel-tool"])
async def test_crash_inside_a_tool_body(store: str, mode: str) -> None:
    reports = run_child(store, mode)
    events = await check_after_crash(store, reports)
    assert events[-1].data["reason"] == {"kind": "interrupted"}
    results = [e for e in events if e.type == "tool/result"]
    unknown = [
        e for e in results if (e.data.get("error") or {}).get("code") == TOOL_OUTCOME_UNKNOWN
    ]
    assert len(unknown) == 1
    text = unknown[0].data["message"]["content"][0]["content"][0]["text"]
    assert "Do not retry blindly." in text
    call = events[unknown[0].source_event_seqs[0]]  # type: ignore[index]
    assert call.type == "tool/call"
    assert call.data["name"] == "write_file"
    if mode == "parallel-tool":  # the read completed before the write died
        last_turn = events[max(i for i, e in enumerate(events) if e.type == "turn/start") :]
        real = [e for e in last_turn if e.type == "tool/result" and "error" not in e.data]
        assert [e.data["message"]["source"]["callId"] for e in real] == ["call-2-1"]
    from agent_session.session import Session

    assert pairing_problems(Session.create("x", seed=events).derive_messages()) == []
    await resume_and_continue(store, events)


async def test_crash_inside_the_model_request(store: str) -> None:
    reports = run_child(store, "request")
    events = await check_after_crash(store, reports)
    start = max(i for i, e in enumerate(events) if e.type == "turn/start")
    tail = [e.type for e in events[start - 1 :]]
    assert tail == [
        "agent/inbox/spliced",
        "turn/start",
        "agent/inbox/spliced",
        "step/start",
        "user/message",
        "step/end",
        "turn/end",
    ]
    # (request/header is logged once per loop, on its first request: in turn 1 here)
    assert not any(e.type == "tool/result" for e in events[start:])
    await resume_and_continue(store, events)


async def test_crash_midstream_past_the_batching_window(store: str) -> None:
    reports = run_child(store, "midstream", "--window", "50")
    events = await check_after_crash(store, reports)
    start = max(i for i, e in enumerate(events) if e.type == "turn/start")
    chunks = [e for e in events[start:] if e.type == "assistant/chunk"]
    assert chunks, "the background write persisted the chunks streamed before the crash"
    assert not any(e.type == "assistant/message" for e in events[start:])
    assert [e.type for e in events[-2:]] == ["step/end", "turn/end"]
    await resume_and_continue(store, events)


async def test_crash_right_after_the_post_step_checkpoint(store: str) -> None:
    reports = run_child(store, "post-step")
    events = await check_after_crash(store, reports)
    start = max(i for i, e in enumerate(events) if e.type == "turn/start")
    last = events[start:]
    assert [e.type for e in last if e.type == "tool/result"] == ["tool/result"] * 2
    assert all("error" not in e.data for e in last if e.type == "tool/result")
    assert [e.type for e in events[-2:]] == ["step/end", "turn/end"]
    await resume_and_continue(store, events)


async def test_without_the_policy_the_crash_loses_the_recorded_tool_call(store: str) -> None:
    """Why the policy exists: with only write-behind, the tool body ran (its side effect
    happened) but the durable log does not know the call was ever made."""
    run_child(store, "tool", "--no-policy", "--window", "600000")
    assert not Path(workdir_of(store), "notes-2-1.txt").exists()  # died in the body
    events = await check_after_crash(store, [])
    assert not any(e.type == "tool/call" and e.data["callId"] == "call-2-1" for e in events)
    if store.startswith("sqlite:"):
        with_policy = store.replace("sessions.db", "with-policy.db")
    elif store.startswith("postgresql:"):
        with_policy = fresh_database()
    else:
        with_policy = f"{store}-with-policy"
    run_child(with_policy, "tool", "--window", "600000")
    protected = await check_after_crash(with_policy, [])
    assert any(e.type == "tool/call" and e.data["callId"] == "call-2-1" for e in protected)


async def test_a_run_without_crash_is_balanced_and_complete(store: str) -> None:
    reports = run_child(store, "none", "--turns", "2")
    events = await check_after_crash(store, reports)
    assert events[-1].data["reason"] == {"kind": "completed"}
    assert reports[-1][0] == len(events)  # the loop's final flush made everything durable
