"""The derived message history in provider request shapes, after a validity check.

``openai``: Chat Completions ``messages`` (``tool_calls`` on assistant messages, one
``role: "tool"`` message per result); the Responses API's ``input`` items. Provider blocks an
answer keeps for replay (``replayState``: signed thinking, encrypted reasoning) go back
verbatim to that provider. ``anthropic``: Messages API ``{system, messages}`` with
``tool_use``/``tool_result`` blocks and consecutive same-role messages merged (tool results
first in their user message), as that API requires.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from agent_session.session.json.lossless import thaw

__all__ = [
    "TranscriptError",
    "check_transcript",
    "to_anthropic",
    "to_openai",
    "to_responses",
    "tool_calls",
]


class TranscriptError(ValueError):
    """The history is not one a provider accepts: a tool-call block not in this format's
    shape, a tool call without exactly one result, or a result that answers no call."""


def tool_calls(message: Mapping[str, Any]) -> list[tuple[str, str, str]]:
    """``(id, name, arguments)`` of each tool-call block of an assistant message. Raises
    :class:`TranscriptError` for a block without those three strings (another SDK's shape,
    such as ``toolCallId``/``toolName``/``input``)."""
    calls: list[tuple[str, str, str]] = []
    for index, block in enumerate(message.get("content", ())):
        if not isinstance(block, Mapping) or block.get("type") != "tool-call":
            continue
        id, name, arguments = (block.get(key) for key in ("id", "name", "arguments"))
        if not (isinstance(id, str) and isinstance(name, str) and isinstance(arguments, str)):
            keys = ", ".join(sorted(str(key) for key in block))
            raise TranscriptError(
                f"assistant message {message.get('id')!r} has a tool-call block (#{index}) "
                f"without string id, name and arguments (it has: {keys}): not this format's "
                "tool-call shape"
            )
        calls.append((id, name, arguments))
    return calls


def _text(blocks: Sequence[Mapping[str, Any]]) -> str:
    return "".join(str(b.get("text", "")) for b in blocks if b.get("type") == "text")


def _is_tool_result(message: Mapping[str, Any]) -> bool:
    source = message.get("source")
    return isinstance(source, Mapping) and source.get("kind") == "tool"


def check_transcript(messages: Sequence[Mapping[str, Any]]) -> None:
    """Every tool-call block must have this format's shape and an id no other call of the
    history has, every tool call must be followed by exactly one result before the next
    assistant message, and every result must answer such a call. Raises
    :class:`TranscriptError` naming the first violation."""
    pending: dict[str, int] = {}
    asked: dict[str, int] = {}  # each call id, and the message that asked for it

    def close() -> None:
        for call, count in pending.items():
            if count != 1:
                raise TranscriptError(
                    f"tool call {call} has {count} results before the next "
                    "assistant message (exactly 1 is required)"
                )

    for index, message in enumerate(messages):
        if message.get("role") == "assistant":
            close()
            pending = {}
            for id, _, _ in tool_calls(message):
                if id in asked:
                    raise TranscriptError(
                        f"tool call id {id} is asked for twice (history messages "
                        f"{asked[id]} and {index}): every call needs an id of its own"
                    )
                asked[id], pending[id] = index, 0
        elif _is_tool_result(message):
            call = str(message["source"]["callId"])
            if call not in pending:
                raise TranscriptError(f"tool result for {call} answers no open tool call")
            pending[call] += 1
    close()


def _result_block(message: Mapping[str, Any]) -> Mapping[str, Any]:
    return message["content"][0]  # type: ignore[no-any-return]


def to_openai(messages: Sequence[Mapping[str, Any]], system: str | None) -> list[dict[str, Any]]:
    """Chat Completions ``messages``."""
    out: list[dict[str, Any]] = [{"role": "system", "content": system}] if system else []
    for message in messages:
        content = message.get("content", ())
        if message.get("role") == "assistant":
            entry: dict[str, Any] = {"role": "assistant", "content": _text(content) or None}
            calls = [
                {"id": id, "type": "function", "function": {"name": name, "arguments": arguments}}
                for id, name, arguments in tool_calls(message)
            ]
            if calls:
                entry["tool_calls"] = calls
            out.append(entry)
        elif _is_tool_result(message):
            block = _result_block(message)
            out.append(
                {
                    "role": "tool",
                    "tool_call_id": block["toolCallId"],
                    "content": _text(block.get("content", ())),
                }
            )
        else:
            out.append({"role": "user", "content": _text(content)})
    return out


def to_responses(messages: Sequence[Mapping[str, Any]], system: str | None) -> dict[str, Any]:
    """Responses API ``{instructions?, input}``: messages, ``function_call`` and
    ``function_call_output`` items, and the reasoning items an answer keeps for replay."""
    items: list[dict[str, Any]] = []
    for message in messages:
        content = message.get("content", ())
        if message.get("role") == "assistant":
            items += _replayed(message, "openai-responses")
            text = _text(content)
            if text:
                items.append({"role": "assistant", "content": text})
            items += [
                {"type": "function_call", "call_id": id, "name": name, "arguments": arguments}
                for id, name, arguments in tool_calls(message)
            ]
        elif _is_tool_result(message):
            block = _result_block(message)
            items.append(
                {
                    "type": "function_call_output",
                    "call_id": block["toolCallId"],
                    "output": _text(block.get("content", ())),
                }
            )
        else:
            items.append(
                {"role": "user", "content": [{"type": "input_text", "text": _text(content)}]}
            )
    request: dict[str, Any] = {"input": items}
    return {"instructions": system, **request} if system else request


def _arguments(raw: str) -> Any:
    try:
        value = json.loads(raw) if raw.strip() else {}
    except ValueError:
        return {"_raw_arguments": raw}
    return value if isinstance(value, dict) else {"_value": value}


def _replayed(message: Mapping[str, Any], provider: str) -> list[dict[str, Any]]:
    """The provider's own blocks an assistant message keeps for replay (``replayState``
    ``{"provider", "blocks"}`` in its source: signed or redacted thinking), verbatim."""
    source = message.get("source")
    state = source.get("replayState") if isinstance(source, Mapping) else None
    if not isinstance(state, Mapping) or state.get("provider") != provider:
        return []
    return [thaw(block) for block in state.get("blocks") or () if isinstance(block, Mapping)]


def to_anthropic(messages: Sequence[Mapping[str, Any]], system: str | None) -> dict[str, Any]:
    """Messages API ``{system?, messages}``."""
    merged: list[dict[str, Any]] = []
    for message in messages:
        content = message.get("content", ())
        if message.get("role") == "assistant":
            role = "assistant"
            blocks = _replayed(message, "anthropic") + [
                {"type": "text", "text": b["text"]}
                for b in content
                if b.get("type") == "text" and b.get("text")
            ]
            blocks += [
                {"type": "tool_use", "id": id, "name": name, "input": _arguments(arguments)}
                for id, name, arguments in tool_calls(message)
            ]
        elif _is_tool_result(message):
            block = _result_block(message)
            role = "user"
            blocks = [
                {
                    "type": "tool_result",
                    "tool_use_id": block["toolCallId"],
                    "content": [
                        {"type": "text", "text": _text(block.get("content", ())) or "(empty)"}
                    ],
                    "is_error": bool(block.get("isError")),
                }
            ]
        else:
            role = "user"
            blocks = [{"type": "text", "text": _text(content) or "(empty)"}]
        if not blocks:
            continue
        if merged and merged[-1]["role"] == role:
            merged[-1]["content"].extend(blocks)
        else:
            merged.append({"role": role, "content": blocks})
    for entry in merged:  # tool results lead their user message, as the API requires
        if entry["role"] == "user":
            entry["content"].sort(key=lambda b: b["type"] != "tool_result")
    request: dict[str, Any] = {"messages": merged}
    if system:
        request = {"system": system, **request}
    return request
