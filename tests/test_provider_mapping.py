"""Property: a surface with any tool pairs maps to a request each provider's SDK types accept,
and the provider's view of it (the calls it asked for, the results it was given) is the
surface's, pair for pair and in order, for Chat Completions, Responses and Messages."""

from __future__ import annotations

import itertools
import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from agent_session.interchange.export import to_anthropic, to_openai, to_responses
from agent_session.session.events.builders import model_message, tool_result_message, user_message
from tests.sweeps import examples
from tests.test_provider_crash import valid_for

ids = st.text("abcdefghijklmnopqrstuvwxyz0123456789_", min_size=1, max_size=12)
texts = st.text(st.characters(blacklist_categories=["Cs"]), min_size=1, max_size=20)
arguments = st.dictionaries(
    st.sampled_from(["q", "n", "path"]), st.integers(0, 9) | texts, max_size=3
)


@st.composite
def surfaces(draw: Any) -> tuple[list[dict[str, Any]], list[tuple[str, str, str, str]]]:
    """Messages (user, then steps of an answer with calls and their results) and the tool
    pairs ``(id, name, arguments, result text)`` in order."""
    messages: list[dict[str, Any]] = [dict(user_message(draw(texts)), role="user")]
    pairs: list[tuple[str, str, str, str]] = []
    used: set[str] = set()
    for _ in range(draw(st.integers(1, 3))):
        calls = []
        for _ in range(draw(st.integers(1, 3))):
            id = draw(ids.filter(lambda i: i not in used))
            used.add(id)
            name = draw(st.sampled_from(["lookup", "pay", "notify"]))
            calls.append((id, name, json.dumps(draw(arguments))))
        blocks: list[dict[str, Any]] = []
        said = draw(st.none() | texts)
        if said:
            blocks.append({"type": "text", "text": said})
        blocks += [{"type": "tool-call", "id": i, "name": n, "arguments": a} for i, n, a in calls]
        messages.append(model_message(blocks, provider="p", model="m"))
        for id, name, args in calls:
            result = draw(texts)
            content = [{"type": "text", "text": result}]
            messages.append(tool_result_message(id, content, is_error=draw(st.booleans())))
            pairs.append((id, name, args, result))
    messages.append(model_message([{"type": "text", "text": "Done."}], provider="p", model="m"))
    return messages, pairs


def seen_by_chat(body: dict[str, Any]) -> list[tuple[str, str, str, str]]:
    calls = {
        c["id"]: (c["function"]["name"], c["function"]["arguments"])
        for m in body["messages"]
        for c in m.get("tool_calls") or ()
    }
    return [
        (m["tool_call_id"], *calls[m["tool_call_id"]], m["content"])
        for m in body["messages"]
        if m["role"] == "tool"
    ]


def seen_by_responses(body: dict[str, Any]) -> list[tuple[str, str, str, str]]:
    calls = {
        i["call_id"]: (i["name"], i["arguments"])
        for i in body["input"]
        if i.get("type") == "function_call"
    }
    return [
        (i["call_id"], *calls[i["call_id"]], i["output"])
        for i in body["input"]
        if i.get("type") == "function_call_output"
    ]


def seen_by_messages(body: dict[str, Any]) -> list[tuple[str, str, str, str]]:
    calls = {
        b["id"]: (b["name"], json.dumps(b["input"]))
        for m in body["messages"]
        for b in m["content"]
        if b["type"] == "tool_use"
    }
    return [
        (b["tool_use_id"], *calls[b["tool_use_id"]], b["content"][0]["text"])
        for m in body["messages"]
        for b in m["content"]
        if b["type"] == "tool_result"
    ]


@settings(max_examples=examples(60), deadline=None)
@given(surfaces())
def test_every_provider_sees_the_surface_s_tool_pairs(drawn: Any) -> None:
    messages, pairs = drawn
    chat = {"model": "m", "messages": to_openai(messages, "sys"), "stream": True}
    valid_for("openai-chat", chat)
    assert seen_by_chat(chat) == pairs

    responses = {"model": "m", **to_responses(messages, "sys"), "stream": True}
    valid_for("openai-responses", responses)
    assert seen_by_responses(responses) == pairs

    anthropic = {"model": "m", "max_tokens": 10, **to_anthropic(messages, "sys"), "stream": True}
    valid_for("anthropic", anthropic)
    expected = [(i, n, json.dumps(json.loads(a)), r) for i, n, a, r in pairs]
    assert seen_by_messages(anthropic) == expected
    roles = [m["role"] for m in anthropic["messages"]]
    assert all(a != b for a, b in itertools.pairwise(roles))  # they alternate
