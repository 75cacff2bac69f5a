"""Subagents a crash cannot orphan, with real processes SIGKILLed (``tests/subagent_child.py``)
on every store: the parent refers to its child durably before the child's first request,
crash repair answers the parent's call with the child's state, a resume settles the child
first and its answer lands in the parent once; and the reference loads the lineage."""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest

from agent_session import AgentRuntime, open_store, place_hold, purge_store, release_hold
from agent_session.otel.lineage_spans import adopted, adoptions
from agent_session.otel.spans import turn_traces
from agent_session.session import Session
from agent_session.session.events.subagents import child_id
from tests.forkserver import run_module
from tests.test_cli import cli
from tests.test_reference_interop import reference_load
from tests.test_settle_crash import store_of

POINTS = ["child-created", "child-request", "child-tool", "child-end"]
EFFECTS = ["read", "idempotent", "unsafe-probe", "unsafe"]
STATE_AFTER = {
    "child-created": "not-started",
    "child-request": "interrupted",
    "child-tool": "interrupted",
    "child-end": "finished",
}
CHILD = child_id("job", "c-sub")


def run(store: str, outbox: Path, die: str, effect: str) -> subprocess.CompletedProcess[str]:
    return run_module("tests.subagent_child", store, str(outbox), "--die", die, "--effect", effect)


async def stored(store: str, id: str, *, inspect: bool = True) -> Any:
    backend = open_store(store)
    try:
        return await (backend.inspect(id) if inspect else backend.read_raw(id))
    finally:
        await backend.aclose()


def surface_results(log: Any, call_id: str) -> list[Any]:
    session = Session.create("check", seed=log)
    return [
        e
        for e in log
        if e.type == "tool/result"
        and e.seq in session.surface.nodes
        and e.data["message"]["source"]["callId"] == call_id
    ]


@pytest.mark.process
@pytest.mark.sweep(share=0.5)
@pytest.mark.parametrize("kind", ["jsonl", "sqlite", "postgres"])
@pytest.mark.parametrize(
    ("point", "effect"),
    [(p, "unsafe") for p in POINTS if p != "child-tool"] + [("child-tool", e) for e in EFFECTS],
)
async def test_a_killed_delegation_finishes_once_with_the_child_settled_first(
    tmp_path: Path, kind: str, point: str, effect: str
) -> None:
    store, outbox = store_of(kind, tmp_path), tmp_path / "outbox"
    killed = run(store, outbox, point, effect)
    assert killed.returncode == -signal.SIGKILL, killed.stderr

    parent = await stored(store, "job")  # the crash repair, in memory
    [answer] = [e for e in parent.events if e.type == "tool/result"]
    state = answer.data["meta"]["subagent"]
    assert state == {"session": CHILD, "state": STATE_AFTER[point]}
    text = answer.data["message"]["content"][0]["content"][0]["text"]
    if point == "child-end":
        assert "error" not in answer.data
        assert text == "child found x"  # the child's answer, from its log
    else:
        assert answer.data["message"]["content"][0]["isError"] is True
        assert CHILD in text

    done = run(store, outbox, point, effect)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "{'kind': 'completed'}"

    log = (await stored(store, "job")).events
    [result] = surface_results(log, "c-sub")  # one result in the parent
    assert result.data["message"]["content"][0]["content"][0]["text"] == "child found x"
    answers = [e for e in log if e.type == "assistant/message"]
    final = answers[-1].data["message"]["content"][0]["text"]
    assert final == "Parent done: child found x"
    assert sum("Parent done" in str(e.data) for e in answers) == 1
    child = await stored(store, CHILD)
    assert child.header.parent_session == "job"
    assert child.header.origin == "subagent"
    assert child.header.delegation_depth == 1
    child_answers = [e for e in child.events if e.type == "assistant/message"]
    texts = [str(e.data["message"]["content"]) for e in child_answers]
    assert sum("child found x" in t for t in texts) == 1  # the child finished once
    fetches = outbox.read_text().splitlines().count("fetch c-fetch")
    if point == "child-tool":
        assert fetches == (2 if effect in ("read", "idempotent") else 1)
    else:
        assert fetches == 1


@pytest.mark.process
@pytest.mark.parametrize("kind", ["jsonl", "sqlite", "postgres"])
async def test_the_parent_refers_to_the_child_durably_before_its_first_request(
    tmp_path: Path, kind: str
) -> None:
    store, outbox = store_of(kind, tmp_path), tmp_path / "outbox"
    assert run(store, outbox, "child-request", "unsafe").returncode == -signal.SIGKILL
    raw = (await stored(store, "job", inspect=False)).content.decode()
    assert '"type":"tool/call"' in raw
    assert '"type":"subagent/spawned","seq":' in raw
    assert f'"session":"{CHILD}"' in raw
    child = await stored(store, CHILD)
    assert [e.type for e in child.events if e.type == "assistant/message"] == []


@pytest.mark.process
async def test_the_reference_loads_the_lineage(tmp_path: Path) -> None:
    store, outbox = str(tmp_path / "sessions"), tmp_path / "outbox"
    assert run(store, outbox, "child-end", "unsafe").returncode == -signal.SIGKILL
    assert run(store, outbox, "child-end", "unsafe").returncode == 0
    for id in ("job", CHILD):
        loaded = reference_load(Path(store), id, "none")
        assert "error" not in loaded, loaded
    child = reference_load(Path(store), CHILD, "none")
    assert child["meta"]["parentSession"] == "job"
    assert child["meta"]["origin"] == "subagent"
    assert child["meta"]["delegationDepth"] == 1


class Delegating:
    """A model that delegates once at every depth, then answers."""

    async def stream(self, request: Any) -> Any:
        last = request.messages[-1]
        if last["source"]["kind"] == "user":
            head = {"id": f"c-{len(request.messages)}", "name": "research"}
            arguments = '{"task": "deeper"}'
            yield {"type": "block-start", "index": 0, "blockType": "tool-call", **head}
            block = {"type": "tool-call", **head, "arguments": arguments}
            yield {"type": "block-end", "index": 0, "block": block}
            yield {"type": "finish", "reason": {"kind": "tool-calls"}}
            return
        text = "done: " + last["content"][0]["content"][0]["text"]
        yield {"type": "block-start", "index": 0, "blockType": "text"}
        yield {"type": "block-end", "index": 0, "block": {"type": "text", "text": text}}
        yield {"type": "finish", "reason": {"kind": "stop"}}


async def test_delegation_deeper_than_the_limit_is_refused(tmp_path: Path) -> None:
    async with AgentRuntime(warn_without_checkpoints=False) as runtime:
        runtime.install(open_store(str(tmp_path)))
        runtime.models.register("m", Delegating())
        runtime.subagent("research", "Research.", model="m/x", max_depth=2)
        session = runtime.sessions.create("top")
        await runtime.agent(session, model="m/x").run_turn("go")
        answer = session.events[[e.type for e in session.events].index("turn/end") - 2]
    final = answer.data["message"]["content"][0]["text"]
    assert final.startswith("done: done: done: Error: delegation deeper than 2 levels")
    grandchild = await stored(str(tmp_path), child_id(child_id("top", "c-1"), "c-1"))
    assert grandchild.header.delegation_depth == 2
    assert grandchild.header.parent_session == child_id("top", "c-1")


async def test_a_stored_session_in_the_child_s_place_is_not_taken_over(tmp_path: Path) -> None:
    async with AgentRuntime(warn_without_checkpoints=False) as runtime:
        runtime.install(open_store(str(tmp_path)))
        runtime.models.register("m", Delegating())
        runtime.subagent("research", "Research.", model="m/x", max_depth=1)
        other = runtime.sessions.create(child_id("top", "c-1"))
        other.append("turn/start", {"turn": 1})
        other.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
        await runtime.sessions.flush(other)
        await runtime.sessions.dispose(other)
        session = runtime.sessions.create("top")
        await runtime.agent(session, model="m/x").run_turn("go")
    results = [e for e in session.events if e.type == "tool/result"]
    text = results[0].data["message"]["content"][0]["content"][0]["text"]
    assert "is not a subagent of session" in text


async def delegated(store: str, tmp_path: Path) -> None:
    """A finished delegation (the parent ``job``, its child), written by a real process."""
    done = run(store, tmp_path / "outbox", "none", "unsafe")
    assert done.returncode == 0, done.stderr


@pytest.mark.process
@pytest.mark.parametrize("store", ["jsonl", "sqlite", "postgres"], indirect=True)
async def test_the_views_roll_up_the_tree(store: str, tmp_path: Path) -> None:
    await delegated(store, tmp_path)
    tree = cli("ls", store, "--tree").stdout.splitlines()
    assert tree[0].startswith("job  (balanced")
    assert tree[1].startswith(f"└─ {CHILD}  (balanced")
    assert "subagent of job, depth 1" in tree[1]

    shown = cli("show", store, "job").stdout
    nested = [line for line in shown.splitlines() if line.startswith("  ┆ ")]
    assert nested[0] == f"  ┆ subagent {CHILD} (call c-sub, depth 1):"
    assert "  ┆ assistant: child found x" in nested
    assert shown.index("┆ assistant: child found x") < shown.index("tool c-sub [ok]")
    child_shown = cli("show", store, CHILD).stdout
    assert child_shown.startswith(f"(session {CHILD} is a subagent of job, delegation depth 1")

    figures = json.loads(cli("stats", store, "job", "--json").stdout)
    [child] = figures["subagents"]
    assert child["id"] == CHILD
    assert child["sessionStats"]["turns"] == 1
    assert figures["withSubagents"]["sessionStats"]["turns"] == figures["sessionStats"]["turns"] + 1
    steps = figures["sessionStats"]["steps"] + child["sessionStats"]["steps"]
    assert figures["withSubagents"]["sessionStats"]["steps"] == steps

    page = tmp_path / "job.html"
    cli("view", store, "job", "--output", str(page))
    html = page.read_text()
    assert f"subagent {CHILD}, started by call c-sub".replace(">", "\\u003e") in html
    assert f"{CHILD} · text: child found x".replace(">", "\\u003e") in html

    parent, child_log = await stored(store, "job"), await stored(store, CHILD)
    found = adoptions("job", parent.header.created_at, parent.events, CHILD)
    parent_traces = turn_traces("job", parent.header.created_at, parent.events)
    tool = next(s for t in parent_traces for s in t.spans if s.name == "execute_tool research")
    child_traces = adopted(turn_traces(CHILD, child_log.header.created_at, child_log.events), found)
    [child_trace] = child_traces
    assert {span.trace_id for span in child_trace.spans} == {tool.trace_id}
    assert child_trace.spans[0].parent_id == tool.span_id  # under the call that ran it
    assert child_trace.spans[0].name == "invoke_agent"


@pytest.mark.process
@pytest.mark.parametrize("store", ["jsonl", "sqlite", "postgres"], indirect=True)
async def test_rm_and_purge_take_the_subagents_with_their_parent_or_refuse(
    store: str, tmp_path: Path
) -> None:
    await delegated(store, tmp_path)
    refused = cli("rm", store, "job", check_rc=4)
    assert "job has 1 subagent session(s) in" in refused.stderr
    assert "nothing was deleted" in refused.stderr
    kept = await purge_store(store, older_than_ms=0, labels={"none": "such"})
    assert kept == []

    await place_hold(store, CHILD, "matter 7")
    done = await purge_store(store, older_than_ms=0)
    by_id = {p.id: p for p in done}
    assert by_id["job"].action == "held"
    assert f"its subagent {CHILD} is under legal hold" in by_id["job"].detail
    assert CHILD not in by_id  # (purged with its parent, or not at all)
    assert (await stored(store, CHILD)).header.origin == "subagent"
    await release_hold(store, CHILD, "matter closed")

    done = await purge_store(store, older_than_ms=0)
    assert [(p.id, p.action) for p in done] == [(CHILD, "purged"), ("job", "purged")]
    assert "(a subagent of job)" in done[0].receipt["rule"]
    backend = open_store(store)
    try:
        assert await backend.list_headers() == []
    finally:
        await backend.aclose()

    (tmp_path / "again").mkdir()
    await delegated(store, tmp_path / "again")
    cli("rm", store, "job", "--with-subagents")
    backend = open_store(store)
    try:
        assert await backend.list_headers() == []
    finally:
        await backend.aclose()


async def test_a_subagent_runs_in_a_runtime_without_a_store() -> None:
    runtime = AgentRuntime()
    runtime.models.register("m", Delegating())
    runtime.subagent("research", "Research.", model="m/x", max_depth=1)
    session = runtime.sessions.create("top")
    assert (await runtime.agent(session, model="m/x").run_turn("go"))["kind"] == "completed"
    child = runtime.sessions.get(child_id("top", "c-1"))
    assert child is None  # (disposed once it answered)
    answers = [e for e in session.events if e.type == "assistant/message"]
    assert answers[-1].data["message"]["content"][0]["text"].startswith("done: done: Error:")


async def test_the_live_exporter_sends_a_child_s_spans_in_its_parent_s_trace(
    tmp_path: Path,
) -> None:
    from agent_session import checkpoint_policy, otel_exporter
    from tests.otlp_receiver import receiver

    store = str(tmp_path / "sessions")
    with receiver() as got:
        async with AgentRuntime() as runtime:
            runtime.install(open_store(store))
            runtime.install(checkpoint_policy)
            exporter = otel_exporter(store, got.url, timeout=5)
            runtime.install(exporter)
            runtime.models.register("m", Delegating())
            runtime.subagent("research", "Research.", model="m/x", max_depth=1)
            session = runtime.sessions.create("top")
            await runtime.agent(session, model="m/x").run_turn("go")
            await exporter.drain()
        spans = got.by_id().values()
    roots = [s for s in spans if s["name"] == "invoke_agent"]
    by_session = {s["attributes"]["gen_ai.conversation.id"]: s for s in roots}
    parent, child = by_session["top"], by_session[child_id("top", "c-1")]
    tool = next(
        s
        for s in spans
        if s["name"] == "execute_tool research" and s["parent_id"] == parent["span_id"]
    )
    assert child["trace_id"] == parent["trace_id"] == tool["trace_id"]
    assert child["parent_id"] == tool["span_id"]
