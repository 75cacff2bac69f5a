"""The OpenAI Agents SDK's own compaction session over ``EventLogSession``: its compaction
"deletes the rest of the stored history" over the SDK's stores (openai-agents-python #5010);
over the event log it appends, and every earlier item stays in the log, on every store. The
``responses.compact`` call goes to the real ``openai`` client over a mocked HTTP transport."""

from __future__ import annotations

import json
from typing import Any

import httpx2
import openai
import pytest
from agents.memory import OpenAIResponsesCompactionSession

from agent_session import open_store
from agent_session.integrations.openai_agents import EventLogSession

pytestmark = pytest.mark.parametrize("store", ["jsonl", "sqlite", "postgres"], indirect=True)

COMPACTED = {
    "id": "cmp_1",
    "created_at": 1,
    "object": "response.compaction",
    "output": [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]},
        {"type": "compaction", "id": "cmp_item_1", "encrypted_content": "opaque-summary"},
    ],
    "usage": {
        "input_tokens": 40,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": 8,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": 48,
    },
}


async def test_the_sdk_s_compaction_appends_and_deletes_nothing(store: str) -> None:
    asked: list[dict[str, Any]] = []

    def compact(request: httpx2.Request) -> httpx2.Response:
        assert request.url.path.endswith("/responses/compact")
        asked.append(json.loads(request.content))
        return httpx2.Response(200, json=COMPACTED)

    client = openai.AsyncOpenAI(
        api_key="sk-test", http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(compact))
    )
    underlying = EventLogSession("chat", store, warn_without_hooks=False)
    history = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "Hello! What can I do?"},
        {"role": "user", "content": "tell me about pears"},
        {"role": "assistant", "content": "Pears are pomes."},
    ]
    await underlying.add_items(history)
    session = OpenAIResponsesCompactionSession(
        "chat", underlying, client=client, compaction_mode="input"
    )
    await session.run_compaction({"force": True, "compaction_mode": "input"})
    assert len(asked) == 1  # (the SDK sent the whole history to be compacted)
    items = await session.get_items()
    assert [item.get("type") for item in items] == ["message", "compaction"]
    await underlying.aclose()

    backend = open_store(store)
    raw = (await backend.read_raw("chat")).content.decode()
    whole = (await backend.inspect("chat")).events
    await backend.aclose()
    for item in history:  # every item the compaction replaced is still stored
        assert json.dumps(item["content"]) in raw
    assert "opaque-summary" in raw
    again = EventLogSession("chat", store)
    assert [item.get("type") for item in await again.get_items()] == ["message", "compaction"]
    await again.aclose()
    assert len(whole) > len(history)  # appended: nothing was rewritten or cut
