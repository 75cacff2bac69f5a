"""Compaction that keeps history: the model sees a summary and what follows it, nothing of the
log is removed, a resume reads from the last boundary on every store, and the reference loads
what a compaction writes."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Any

import pytest

from agent_session import AgentRuntime, checkpoint_policy, open_store
from agent_session.agent_loop.compaction import SUMMARY_PREFIX, CompactionPolicy
from agent_session.agent_loop.models import ModelRequest
from agent_session.session.errors import SessionOpenTurnError
from agent_session.session.events.eventlog import EarlierEvents
from agent_session.session.events.turns import next_turn_number

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
    backend = open_store(store)
    before = (await backend.read_raw("chat")).content
    await backend.aclose()

    model, session = await run_turns(store, ["/compact", "plums?"], compaction=policy)
    request = model.requests[-1]
    assert texts(request.messages) == [SUMMARY_PREFIX + "4 messages about fruit", "plums?"]
    backend = open_store(store)
    after = (await backend.read_raw("chat")).content
    whole = (await backend.inspect("chat")).events
    await backend.aclose()
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
    assert facts["turn"] == 2 and facts["shadowed"] == 4 and facts["start"] == whole[at].seq
    assert facts["estimatedTokensBefore"] > facts["estimatedTokensAfter"] > 0
    assert whole[at + 3].ignorable is True
    assert any(e.type == "user/message" and texts([e.data]) == ["apples?"] for e in whole)


async def test_a_resume_reads_from_the_boundary_and_reaches_back_only_when_asked(
    store: str,
) -> None:
    policy = CompactionPolicy(summarize=summary_of)
    await run_turns(store, ["apples?", "pears?", "/compact", "plums?"], compaction=policy)
    backend = open_store(store)
    whole = (await backend.inspect("chat")).events
    await backend.aclose()

    model = Model()
    async with AgentRuntime() as runtime:
        runtime.install(open_store(store))
        runtime.install(checkpoint_policy)
        runtime.models.register("m", model)
        session = await runtime.sessions.resume("chat")
        earlier = session.events.parts[0]
        assert isinstance(earlier, EarlierEvents) and not earlier.loaded
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
    backend = open_store(store)
    whole = (await backend.inspect("chat")).events
    await backend.aclose()
    assert [e.type for e in whole].count("compaction/start") == 0  # 55 tokens a request

    big = CompactionPolicy(threshold_tokens=40)
    model, _ = await run_turns(store, ["d"], compaction=big)
    summary_request, request = model.requests
    assert summary_request.system == big.instructions and not summary_request.tools
    assert texts(request.messages)[0] == SUMMARY_PREFIX + "the user asked about fruit"
    backend = open_store(store)
    whole = (await backend.inspect("chat")).events
    await backend.aclose()
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
