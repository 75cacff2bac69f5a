"""The derived message history in provider request shapes, after a pairing check.

``openai``: Chat Completions ``messages`` (``tool_calls`` on assistant messages, one
``role: "tool"`` message per result). ``anthropic``: Messages API ``{system, messages}`` with
``tool_use``/``tool_result`` blocks and consecutive same-role messages merged (tool results
first in their user message), as that API requires.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["PairingError", "check_pairing", "to_anthropic", "to_openai"]


class PairingError(ValueError):
    """The history has a tool call without exactly one result, or a stray result."""


def _text(blocks: Sequence[Mapping[str, Any]]) -> str:
    return "".join(str(b.get("text", "")) for b in blocks if b.get("type") == "text")


def _is_tool_result(message: Mapping[str, Any]) -> bool:
    source = message.get("source")
    return isinstance(source, Mapping) and source.get("kind") == "tool"


def check_pairing(messages: Sequence[Mapping[str, Any]]) -> None:
    """Every tool call must be followed by exactly one result before the next assistant
    message, and every result must answer such a call. Raises :class:`PairingError`."""
    pending: dict[str, int] = {}

    def close() -> None:
        for call, count in pending.items():
            if count != 1:
                raise PairingError(
                    f"tool call {call} has {count} results before the next "
                    "assistant message (exactly 1 is required)"
                )

    for message in messages:
        if message.get("role") == "assistant":
            close()
            pending = {
                str(b["id"]): 0 for b in message.get("content", ()) if b.get("type") == "tool-call"
            }
        elif _is_tool_result(message):
            call = str(message["source"]["callId"])
            if call not in pending:
                raise PairingError(f"tool result for {call} answers no open tool call")
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
                {
                    "id": b["id"],
                    "type": "function",
                    "function": {"name": b["name"], "arguments": b["arguments"]},
                }
                for b in content
                if b.get("type") == "tool-call"
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


def _arguments(raw: str) -> Any:
    try:
        value = json.loads(raw) if raw.strip() else {}
    except ValueError:
        return {"_raw_arguments": raw}
    return value if isinstance(value, dict) else {"_value": value}


def to_anthropic(messages: Sequence[Mapping[str, Any]], system: str | None) -> dict[str, Any]:
    """Messages API ``{system?, messages}``."""
    merged: list[dict[str, Any]] = []
    for message in messages:
        content = message.get("content", ())
        if message.get("role") == "assistant":
            role, blocks = "assistant", []
            for b in content:
                if b.get("type") == "text" and b.get("text"):
                    blocks.append({"type": "text", "text": b["text"]})
                elif b.get("type") == "tool-call":
                    blocks.append(
                        {
                            "type": "tool_use",
                            "id": b["id"],
                            "name": b["name"],
                            "input": _arguments(b["arguments"]),
                        }
                    )
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
