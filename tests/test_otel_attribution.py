"""What the spans are attributed to: each model request's cost from the price table given to
``export-otel --prices`` (none without one, none for a model the table does not price), and
the agent of a Google ADK session's turn as ``gen_ai.agent.name``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agent_session import open_store
from agent_session.otel.spans import turn_traces
from tests.otlp_receiver import receiver
from tests.test_otel_export import CLIENT, _export, _plant

pytestmark = pytest.mark.process


def _chats(spans: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [s["attributes"] for s in spans if s["kind"] == CLIENT]


def test_each_request_s_cost_is_on_its_span_with_a_price_table(tmp_path: Path) -> None:
    _plant(tmp_path / "s", "complete:2")
    prices = tmp_path / "prices.json"
    table = {"currency": "EUR", "models": {"scripted-1": {"input": 2, "output": 10}}}
    prices.write_text(json.dumps(table))
    with receiver() as priced:
        assert _export(tmp_path / "s", priced.url, "--prices", str(prices)) == 0
    chats = [c for c in _chats(priced.spans) if "gen_ai.usage.input_tokens" in c]
    assert len(chats) >= 2
    assert not any("gen_ai.usage.cost" in c for c in _chats(priced.spans) if c not in chats)
    for chat in chats:
        tokens = (chat["gen_ai.usage.input_tokens"], chat["gen_ai.usage.output_tokens"])
        assert chat["gen_ai.usage.cost"] == pytest.approx((tokens[0] * 2 + tokens[1] * 10) / 1e6)
        assert chat["agent_session.cost.currency"] == "EUR"
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"models": {"gpt-4.1*": {"input": 2, "output": 8}}}))
    for extra in ([], ["--prices", str(other)]):
        with receiver() as plain:
            store = tmp_path / f"copy{len(extra)}"
            _plant(store, "complete:2")
            assert _export(store, plain.url, *extra) == 0
        assert _chats(plain.spans)
        assert not any("gen_ai.usage.cost" in chat for chat in _chats(plain.spans))


async def test_an_adk_turn_names_its_agent(tmp_path: Path) -> None:
    from agent_session.integrations.google_adk import EventLogSessionService
    from agent_session.integrations.google_adk.mapping import log_id
    from tests.adk_kit import APP
    from tests.test_google_adk import _converse

    store = str(tmp_path / "s")
    async with EventLogSessionService(store) as service:
        await _converse(service)
    backend = open_store(store)
    try:
        loaded = await backend.load(log_id(APP, "u", "s1"))
    finally:
        await backend.aclose()
    traces = turn_traces(loaded.header.id, loaded.header.created_at, loaded.events)
    assert len(traces) == 2
    for trace in traces:
        turn = trace.spans[0]
        assert turn.name == "invoke_agent"
        assert turn.attributes["gen_ai.agent.name"] == "calc"  # the LlmAgent of tests.adk_kit
    home = tmp_path / "home"
    _plant(home, "complete:2")  # a log that records no agent names none
    backend = open_store(str(home))
    try:
        (header,) = await backend.list_headers()
        events = (await backend.load(header.id)).events
    finally:
        await backend.aclose()
    assert all(
        "gen_ai.agent.name" not in t.spans[0].attributes for t in turn_traces("x", 0, events)
    )
