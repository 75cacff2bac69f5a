"""Compaction that keeps history: the model sees a summary and what follows it, nothing of the
log is removed, a resume reads from the last boundary on every store, and the reference loads
what a compaction writes."""

from __future__ import annotations

import asyncio
import json
import tempfile
import uuid
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent_session import AgentRuntime, Keyring, checkpoint_policy, open_store, set_budget
from agent_session.agent_loop.compaction import SUMMARY_PREFIX, CompactionPolicy
from agent_session.agent_loop.models import ModelRequest
from agent_session.agent_loop.spending import fold_of
from agent_session.otel.spans import turn_traces
from agent_session.session import Session
from agent_session.session.errors import SessionEventError, SessionOpenTurnError
from agent_session.session.events.builders import user_message
from agent_session.session.events.eventlog import EarlierEvents
from agent_session.session.events.surface import Surface
from agent_session.session.events.turns import next_turn_number
from tests.backends import fresh_database
from tests.test_cli import cli
from tests.test_reference_interop import reference_load
from tests.test_subagents import stored

pytestmark = pytest.mark.parametrize("store", ["jsonl", "sqlite", "postgres"], indirect=True)


class Model:
    """Answers each request with ``answer <n>`` and its usage; keeps every request."""

    def __init__(self, input_tokens: int = 50) -> None:
        self.requests: list[ModelRequest] = []
        self.input_tokens = input_tokens

    async def stream(self, request: ModelRequest) -> AsyncIterator[dict[str, Any]]:
        self.requests.append(request)
        text = f"answer {len(self.requests)}"
        if request.system and request.system.startswith("Summarize"):
            text = "the user asked about fruit"
        yield {"type": "block-start", "index": 0, "blockType": "text"}
        yield {"type": "text-delta", "index": 0, "text": text}
        yield {"type": "block-end", "index": 0, "block": {"type": "text", "text": text}}
        usage = {"inputTokens": self.input_tokens, "outputTokens": 5}
        yield {"type": "usage", "usage": usage}
        yield {"type": "finish", "reason": {"kind": "stop"}}


def texts(messages: Sequence[Any]) -> list[str]:
    return [" ".join(b.get("text", "") for b in m["content"]) for m in messages]


async def summary_of(messages: Sequence[Any]) -> str:
    return f"{len(messages)} messages about fruit"


async def run_turns(store: str, prompts: list[str], **agent: Any) -> tuple[Model, Any]:
    model = Model()
    async with AgentRuntime() as runtime:
        runtime.install(open_store(store))
        runtime.install(checkpoint_policy)
        runtime.models.register("m", model)
        session = await runtime.sessions.open_or_create("chat")
        bot = runtime.agent(session, model="m/x", **agent)
        for prompt in prompts:
            if prompt == "/compact":
                await bot.compact()
            else:
                await bot.run_turn(prompt)
        return model, session


async def test_the_model_sees_the_summary_and_what_follows_and_nothing_is_removed(
    store: str,
) -> None:
    policy = CompactionPolicy(summarize=summary_of)
    await run_turns(store, ["apples?", "pears?"], compaction=policy)
    before = (await stored(store, "chat", inspect=False)).content

    model, _session = await run_turns(store, ["/compact", "plums?"], compaction=policy)
    request = model.requests[-1]
    assert texts(request.messages) == [SUMMARY_PREFIX + "4 messages about fruit", "plums?"]
    after = (await stored(store, "chat", inspect=False)).content
    whole = (await stored(store, "chat")).events
    assert after.startswith(before)  # every stored byte is still there, unchanged
    kinds = [e.type for e in whole]
    at = kinds.index("compaction/start")
    assert kinds[at : at + 5] == [
        "compaction/start",
        "compaction/summary",
        "user/message",
        "context/compacted",
        "compaction/end",
    ]
    facts = whole[at + 3].data
    assert facts["trigger"] == "explicit"
    assert facts["turn"] == 2
    assert facts["shadowed"] == 4
    assert facts["start"] == whole[at].seq
    assert facts["estimatedTokensBefore"] > facts["estimatedTokensAfter"] > 0
    assert whole[at + 3].ignorable is True
    assert any(e.type == "user/message" and texts([e.data]) == ["apples?"] for e in whole)


async def test_a_resume_reads_from_the_boundary_and_reaches_back_only_when_asked(
    store: str,
) -> None:
    policy = CompactionPolicy(summarize=summary_of)
    await run_turns(store, ["apples?", "pears?", "/compact", "plums?"], compaction=policy)
    whole = (await stored(store, "chat")).events

    model = Model()
    async with AgentRuntime() as runtime:
        runtime.install(open_store(store))
        runtime.install(checkpoint_policy)
        runtime.models.register("m", model)
        session = await runtime.sessions.resume("chat")
        earlier = session.events.parts[0]
        assert isinstance(earlier, EarlierEvents)
        assert not earlier.loaded
        assert len(session.events) == len(whole) + 1  # (and its end-seed)
        assert texts(session.derive_messages())[0].startswith(SUMMARY_PREFIX)
        assert next_turn_number(session.events) == next_turn_number(whole) == 4
        await runtime.agent(session, model="m/x").run_turn("figs?")
        assert texts(model.requests[-1].messages)[1:] == ["plums?", "answer 3", "figs?"]
        assert not earlier.loaded  # a whole turn ran without reading the history
        assert session.events[1] == whole[1]  # reaching back reads it, once
        assert earlier.loaded
        header = [e for e in session.events if e.type == "request/header"][-1]
        assert header.data["reason"] == "resume"


async def test_the_policy_compacts_before_a_turn_when_the_last_request_was_too_big(
    store: str,
) -> None:
    policy = CompactionPolicy(threshold_tokens=120)
    model, _ = await run_turns(store, ["a", "b", "c"], compaction=policy)
    whole = (await stored(store, "chat")).events
    assert [e.type for e in whole].count("compaction/start") == 0  # 55 tokens a request

    big = CompactionPolicy(threshold_tokens=40)
    model, _ = await run_turns(store, ["d"], compaction=big)
    summary_request, request = model.requests
    assert summary_request.system == big.instructions
    assert not summary_request.tools
    assert texts(request.messages)[0] == SUMMARY_PREFIX + "the user asked about fruit"
    whole = (await stored(store, "chat")).events
    facts = next(e for e in whole if e.type == "context/compacted").data
    assert facts["trigger"] == "threshold"
    assert facts["summarizer"] == {
        "provider": "m",
        "model": "x",
        "usage": {"inputTokens": 50, "outputTokens": 5},
    }


async def test_compaction_waits_for_the_turn_to_end(store: str) -> None:
    policy = CompactionPolicy(summarize=summary_of)
    runtime = AgentRuntime()
    session = runtime.sessions.create("open")
    runtime.models.register("m", Model())
    bot = runtime.agent(session, model="m/x", compaction=policy)
    await bot.run_turn("apples?")
    session.append("turn/start", {"turn": 2})
    with pytest.raises(SessionOpenTurnError, match="between turns"):
        await bot.compact()
    assert "compaction/start" not in [e.type for e in session.events]


async def test_the_reference_loads_a_compacted_log_and_derives_the_same_history(
    store: str, tmp_path: Path
) -> None:
    policy = CompactionPolicy(summarize=summary_of)
    prompts = ["apples?", "pears?", "/compact", "plums?", "/compact", "figs?"]
    await run_turns(store, prompts, compaction=policy)
    root = Path(store)
    if store.startswith(("sqlite", "postgres")):
        root = tmp_path / "copy"
        cli("copy", store, str(root), "chat")
    loaded = reference_load(root, "chat", "none")
    assert "error" not in loaded, loaded
    backend = open_store(str(root))
    ours = (await backend.inspect("chat")).events
    await backend.aclose()
    assert [e["type"] for e in loaded["events"]] == [e.type for e in ours]
    assert texts(loaded["derived"]) == [
        SUMMARY_PREFIX + "3 messages about fruit",  # the second summary, of the first and after
        "figs?",
        "answer 4",
    ]


@settings(max_examples=20, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    plan=st.lists(st.sampled_from(["turn", "compact"]), min_size=1, max_size=7), crash=st.booleans()
)
def test_a_resume_from_the_boundary_reads_as_the_whole_log_does(
    store: str, plan: list[str], crash: bool
) -> None:
    """Whatever turns and compactions came before, and whether a crash left the last turn
    open, a resume from the boundary has the surface, the model history, the next turn
    number and (reaching back) the events of a whole read with its repair."""
    if not store.startswith(("sqlite", "postgres")):
        store = tempfile.mkdtemp(dir=store)
    else:
        store = (
            fresh_database()
            if store.startswith("postgres")
            else f"{store[:-3]}-{uuid.uuid4().hex}.db"
        )

    async def check() -> None:
        steps = ["turn", *plan]
        prompts = ["/compact" if step == "compact" else f"q{n}" for n, step in enumerate(steps)]
        await run_turns(store, prompts, compaction=CompactionPolicy(summarize=summary_of))
        if crash:
            async with AgentRuntime() as runtime:
                runtime.install(open_store(store))
                session = await runtime.sessions.open_or_create("chat")
                turn = next_turn_number(session.events)
                session.append("turn/start", {"turn": turn})
                session.append("user/message", user_message("cut short"), surface_op="append")
                await runtime.sessions.flush(session)
        whole = open_store(store)
        expected = (await whole.inspect("chat")).events
        await whole.aclose()
        async with AgentRuntime() as runtime:
            runtime.install(open_store(store))
            session = await runtime.sessions.resume("chat")
            events = session.events
            windowed = isinstance(events.parts[0], EarlierEvents)
            assert windowed == ("compact" in plan)
            nodes = list(session.surface.nodes)
            messages = texts(session.derive_messages())
            number = next_turn_number(events)
            if windowed:
                assert not events.parts[0].loaded
            assert [e.encode() for e in events][: len(expected)] == [e.encode() for e in expected]
        rebuilt = Surface()
        for event in expected:
            rebuilt.apply(event.seq, event.surface_op)
        assert nodes == rebuilt.nodes
        assert messages == texts(Session.derive_event_message(expected[n]) for n in nodes)
        assert number == next_turn_number(expected)

    asyncio.run(check())


async def test_show_stats_view_export_and_traces_show_the_boundary_and_the_whole_history(
    store: str, tmp_path: Path
) -> None:
    policy = CompactionPolicy(summarize=summary_of)
    await run_turns(store, ["apples?", "pears?", "/compact", "plums?"], compaction=policy)

    shown = cli("show", store, "chat").stdout
    assert "user: apples?" in shown  # the history before the boundary is still there
    assert "summary (the model sees it in place of what came before): " in shown
    assert "── compacted (explicit): 4 message(s) replaced by the summary above" in shown
    assert shown.index("user: pears?") < shown.index("── compacted") < shown.index("user: plums?")

    figures = json.loads(cli("stats", store, "chat", "--json").stdout)
    assert figures["sessionStats"]["turns"] == 3  # the whole history counts
    [compaction] = figures["compactions"]
    assert compaction["trigger"] == "explicit"
    assert compaction["shadowed"] == 4
    assert "compactions: 1; the last" in cli("stats", store, "chat").stdout

    page = tmp_path / "chat.html"
    cli("view", store, "chat", "--output", str(page))
    html = page.read_text()
    assert "compacted (explicit): 4 message(s)" in html
    assert "apples?" in html

    def said(document: dict[str, Any]) -> list[str]:
        return [
            m["content"] if isinstance(m["content"], str) else m["content"][0]["text"]
            for m in document["messages"]
            if m["role"] == "user"
        ]

    seen = said(json.loads(cli("export", store, "chat", "--format", "openai", "--json").stdout))
    assert seen == [SUMMARY_PREFIX + "4 messages about fruit", "plums?"]
    whole = cli("export", store, "chat", "--format", "openai", "--json", "--whole").stdout
    assert said(json.loads(whole)) == ["apples?", "pears?", "plums?"]

    loaded = await stored(store, "chat")
    traces = turn_traces("chat", 1, loaded.events)
    names = [trace.spans[0].name for trace in traces]
    assert names == ["invoke_agent", "invoke_agent", "agent_session.compaction", "invoke_agent"]
    span = traces[2].spans[0]
    assert span.attributes["agent_session.compaction.messages_replaced"] == 4
    assert span.attributes["agent_session.compaction.trigger"] == "explicit"
    assert turn_traces("chat", 1, loaded.events)[2].spans[0].span_id == span.span_id


async def test_a_budget_counts_what_was_spent_before_the_boundary(store: str) -> None:
    policy = CompactionPolicy(summarize=summary_of)
    async with AgentRuntime() as runtime:
        runtime.install(open_store(store))
        runtime.install(checkpoint_policy)
        runtime.models.register("m", Model())
        session = await runtime.sessions.open_or_create("chat")
        set_budget(session, {"outputTokens": 1000})
        bot = runtime.agent(session, model="m/x", compaction=policy)
        for prompt in ("a", "b", "/compact", "c"):
            await (bot.compact() if prompt == "/compact" else bot.run_turn(prompt))
    async with AgentRuntime() as runtime:
        runtime.install(open_store(store))
        runtime.models.register("m", Model())
        session = await runtime.sessions.resume("chat")
        agent = runtime.agent(session, model="m/x")
        spent = fold_of(agent, session).spend().to_json()
        assert session.events.parts[0].loaded  # (a budget before it: the history is read)
    assert spent["outputTokens"] == 15  # three answers of 5, two before the boundary
    assert spent["requests"] == 3


async def test_a_boundary_that_does_not_replace_the_whole_surface_is_refused(
    store: str,
) -> None:
    async with AgentRuntime() as runtime:
        runtime.install(open_store(store))
        session = await runtime.sessions.open_or_create("chat")
        first = session.append("user/message", user_message("a"), surface_op="append").seq
        session.append("user/message", user_message("b"), surface_op="append")
        start = session.append("compaction/start", {}).seq
        op = {"op": "replace", "start": first, "end": first}
        summary = session.append(
            "user/message", user_message("sum"), surface_op=op, source_event_seqs=[first]
        ).seq
        facts = {"start": start, "summary": summary, "turn": None}
        with pytest.raises(SessionEventError, match="not the whole surface then"):
            session.append("context/compacted", facts)
        assert session.events[-1].seq == summary  # nothing was appended


async def test_a_boundary_whose_start_is_not_its_bracket_is_read_whole(store: str) -> None:
    """A forged ``context/compacted`` naming an earlier start (a surface event between it and
    the summary, cited by the summary) is not read from: the resume reads the whole log, and
    sees what it holds."""
    async with AgentRuntime() as runtime:
        runtime.install(open_store(store))
        session = await runtime.sessions.open_or_create("chat")
        first = session.append("user/message", user_message("a"), surface_op="append").seq
        second = session.append("user/message", user_message("b"), surface_op="append").seq
        op = {"op": "replace", "start": first, "end": second}
        summary = session.append(
            "user/message", user_message("sum"), surface_op=op, source_event_seqs=[first, second]
        ).seq
        session.append("context/compacted", {"start": second, "summary": summary, "turn": None})
        session.append("user/message", user_message("c"), surface_op="append")
    whole = await stored(store, "chat")
    async with AgentRuntime() as runtime:
        runtime.install(open_store(store))
        resumed = await runtime.sessions.resume("chat")
        assert not isinstance(resumed.events.parts[0], EarlierEvents)
        assert texts(resumed.derive_messages()) == ["sum", "c"]
    assert [e.encode() for e in resumed.events][: len(whole.events)] == [
        e.encode() for e in whole.events
    ]


async def test_a_compaction_cut_before_its_boundary_loads_whole_with_its_summary(
    store: str,
) -> None:
    """What a power loss can leave of a compaction on a JSONL log: its first events, the
    summary among them, without ``context/compacted``."""
    async with AgentRuntime() as runtime:
        runtime.install(open_store(store))
        session = await runtime.sessions.open_or_create("chat")
        first = session.append("user/message", user_message("a"), surface_op="append").seq
        session.append("compaction/start", {})
        session.append("compaction/summary", {})
        op = {"op": "replace", "start": first, "end": first}
        session.append(
            "user/message", user_message("sum"), surface_op=op, source_event_seqs=[first]
        )
    async with AgentRuntime() as runtime:
        runtime.install(open_store(store))
        resumed = await runtime.sessions.resume("chat")
        assert not isinstance(resumed.events.parts[0], EarlierEvents)
        assert texts(resumed.derive_messages()) == ["sum"]


async def test_a_sealed_store_resumes_from_the_boundary_too(store: str, tmp_path: Path) -> None:
    ring = Keyring(str(tmp_path / "ring"), bytes(range(32)))
    model = Model()
    async with AgentRuntime() as runtime:
        runtime.install(open_store(store, keyring=ring))
        runtime.install(checkpoint_policy)
        runtime.models.register("m", model)
        session = await runtime.sessions.open_or_create("chat")
        bot = runtime.agent(session, model="m/x", compaction=CompactionPolicy(summarize=summary_of))
        await bot.run_turn("apples?")
        await bot.compact()
        await bot.run_turn("pears?")
    async with AgentRuntime() as runtime:
        runtime.install(open_store(store, keyring=ring))
        resumed = await runtime.sessions.resume("chat")
        assert isinstance(resumed.events.parts[0], EarlierEvents)
        assert texts(resumed.derive_messages()) == [
            SUMMARY_PREFIX + "2 messages about fruit",
            "pears?",
            "answer 2",
        ]
