"""The log's messages in the GenAI semantic conventions' message shape: what
``gen_ai.input.messages``, ``gen_ai.output.messages`` and ``gen_ai.system_instructions`` hold
(a JSON array of ``{role, parts}``; a part is ``text``, ``reasoning``, ``tool_call``,
``tool_call_response`` or ``blob``), so a receiver's chat view shows the conversation.

Guarantees: every block of a message becomes one part, in order (a kind the conventions have no
part for keeps its own ``type`` and content); a tool call's arguments are the parsed JSON
object when they parse (and fit lossless JSON), else the text as the model streamed it; the
result is plain JSON (a ``str`` the caller can redact).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

from agent_session.session.json.codec import encode_json

__all__ = ["FINISH_REASONS", "input_messages", "output_messages", "system_instructions"]

FINISH_REASONS = {
    "stop": "stop",
    "max-tokens": "length",
    "tool-calls": "tool_call",
    "error": "error",
    "aborted": "error",
}
"""The reference's finish kinds as the conventions name finish reasons."""


def input_messages(messages: Sequence[Any]) -> str:
    """A request's history (the log's message objects) as ``gen_ai.input.messages``."""
    return _json([_message(message) for message in messages])


def output_messages(message: Mapping[str, Any], finish_reason: str | None) -> str:
    """An answer as ``gen_ai.output.messages`` (one message, with its finish reason)."""
    out = _message(message)
    if finish_reason is not None:
        out["finish_reason"] = finish_reason
    return _json([out])


def system_instructions(system: str) -> str:
    """A system prompt as ``gen_ai.system_instructions``."""
    return _json([{"type": "text", "content": system}])


def _message(message: Any) -> dict[str, Any]:
    message = message if isinstance(message, Mapping) else {}
    blocks = message.get("content") or ()
    source = message.get("source") if isinstance(message.get("source"), Mapping) else {}
    results = [b for b in blocks if isinstance(b, Mapping) and b.get("type") == "tool-result"]
    role = message.get("role")
    if results or (isinstance(source, Mapping) and source.get("kind") == "tool"):
        role = "tool"
    return {"role": role, "parts": [_part(block) for block in blocks]}


def _part(block: Any) -> dict[str, Any]:
    block = block if isinstance(block, Mapping) else {}
    kind = block.get("type")
    if kind in ("text", "reasoning"):
        return {"type": kind, "content": block.get("text", "")}
    if kind == "tool-call":
        return {
            "type": "tool_call",
            "id": block.get("id"),
            "name": block.get("name"),
            "arguments": _arguments(block.get("arguments")),
        }
    if kind == "tool-result":
        inner = block.get("content") or ()
        text = "".join(
            part.get("text", "")
            for part in inner
            if isinstance(part, Mapping) and part.get("type") == "text"
        )
        part: dict[str, Any] = {"type": "tool_call_response", "id": block.get("toolCallId")}
        part["response"] = text
        if block.get("isError") is True:
            part["is_error"] = True
        return part
    if kind == "image":
        return {"type": "blob", "modality": "image", "content": block.get("attachment")}
    return {**block}


def _arguments(text: Any) -> Any:
    if not isinstance(text, str):
        return text
    try:
        parsed = json.loads(text, parse_constant=_refused, parse_float=_finite)
        encode_json(parsed)  # (an integer past 64 bits is JSON, but not the log's JSON)
    except (ValueError, TypeError):
        return text
    return parsed


def _refused(name: str) -> Any:
    raise ValueError(name)  # (NaN, Infinity: not JSON, so the text is kept as it is)


def _finite(text: str) -> float:
    """A JSON number as a float; ``1e400`` overflows to infinity, which no JSON holds (the
    encoder would write it as ``null``), so the text is kept as it is."""
    value = float(text)
    if math.isinf(value):
        raise ValueError(text)
    return value


def _json(value: Any) -> str:
    return encode_json(value).decode()
