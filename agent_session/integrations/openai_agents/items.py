"""OpenAI Agents SDK items and this library's events, both ways (pure: no SDK import, no I/O).

An item becomes the event that means the same thing, with the item itself kept verbatim on the
event's message under :data:`META` (``{"items": [...]}``), so ``get_items`` gives back exactly
what ``add_items`` was given while every other reader (the exports, the reference loop, crash
repair, the TypeScript reference) sees ordinary messages:

- a user ``message``: ``user/message`` (text and image blocks);
- the ``message``, ``reasoning`` and ``function_call`` items of one model response: one
  ``assistant/message`` (text, reasoning and tool-call blocks, in item order);
- ``function_call_output``: ``tool/result`` answering the call;
- anything else (hosted tools, MCP, compaction, system messages ...): ``openai-agents/item``.

Events that carry no SDK item (the reference loop's, crash repair's closers) are projected to
plain items: an easy-input message, ``function_call``, ``function_call_output``.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from typing import Any, Final, Literal

from agent_session.session.events.builders import (
    model_message,
    tool_call_block,
    tool_result_message,
)
from agent_session.session.events.event import SessionEvent
from agent_session.session.events.types import ASSISTANT_MESSAGE, TOOL_RESULT, USER_MESSAGE
from agent_session.session.json.lossless import thaw

__all__ = [
    "FAKE_ID",
    "META",
    "PROVIDER",
    "ItemKind",
    "assistant_data",
    "blocks_of",
    "item_kind",
    "items_of",
    "plain_item",
    "tool_result_data",
    "user_data",
]

META: Final = "openaiAgents"
"""The key, on a message an item became, of ``{"items": [the SDK items, verbatim]}``."""
PROVIDER: Final = "openai"
"""The provider named by the assistant messages the SDK's models produced."""
FAKE_ID: Final = "__fake_id__"
"""The id the SDK gives every item of a Chat Completions model: not an identity."""

ItemKind = Literal["user", "model", "output", "other"]
"""``model``: an item of a model response (assistant message, reasoning, function call)."""


def item_kind(item: Mapping[str, Any]) -> ItemKind:
    """What an SDK input item is, for the mapping."""
    kind, role = item.get("type"), item.get("role")
    if kind in (None, "message"):
        if role == "user":
            return "user"
        return "model" if role == "assistant" else "other"
    if kind in ("reasoning", "function_call"):
        return "model"
    return "output" if kind == "function_call_output" else "other"


def _parts(content: Any) -> list[dict[str, Any]]:
    """Content blocks of an SDK message content or tool output: a string, or a list of
    ``input_text``/``output_text``/``refusal``/``input_image`` parts (others stay only in
    the kept item)."""
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    blocks: list[dict[str, Any]] = []
    for part in content if isinstance(content, Sequence) else ():
        if not isinstance(part, Mapping):
            continue
        kind = part.get("type")
        if kind in ("input_text", "output_text") and isinstance(part.get("text"), str):
            blocks.append({"type": "text", "text": part["text"]})
        elif kind == "refusal" and isinstance(part.get("refusal"), str):
            blocks.append({"type": "text", "text": part["refusal"]})
        elif kind == "input_image":
            blocks.append({"type": "image", "attachment": dict(part)})
    return blocks


def blocks_of(item: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The assistant-message blocks of one model-response item."""
    kind = item.get("type")
    if kind == "function_call":
        return [tool_call_block(item["call_id"], item["name"], item["arguments"])]
    if kind == "reasoning":
        summary = item.get("summary") or ()
        text = "\n\n".join(str(s.get("text", "")) for s in summary if isinstance(s, Mapping))
        if not text:
            content = item.get("content") or ()
            text = "".join(str(c.get("text", "")) for c in content if isinstance(c, Mapping))
        return [{"type": "reasoning", "text": text}]
    return _parts(item.get("content"))


def user_data(item: Mapping[str, Any]) -> dict[str, Any]:
    """``user/message`` data for a user message item."""
    return {
        "content": _parts(item.get("content")),
        "source": {"kind": "user"},
        "role": "user",
        "id": str(uuid.uuid4()),
        META: {"items": [dict(item)]},
    }


def assistant_data(
    items: Sequence[Mapping[str, Any]], turn: int, step: int, model: str
) -> dict[str, Any]:
    """``assistant/message`` data for the items of one model response (possibly none: an
    empty message, which projects nothing, is how ``pop_item`` takes a message away)."""
    blocks = [block for item in items for block in blocks_of(item)]
    message = model_message(blocks, provider=PROVIDER, model=model)
    message[META] = {"items": [dict(item) for item in items]}
    return {"turn": turn, "step": step, "message": message}


def tool_result_data(item: Mapping[str, Any], turn: int, step: int) -> dict[str, Any]:
    """``tool/result`` data for a ``function_call_output`` item."""
    message = tool_result_message(item["call_id"], _parts(item.get("output")))
    message[META] = {"items": [dict(item)]}
    return {"turn": turn, "step": step, "message": message}


def _text(blocks: Sequence[Mapping[str, Any]]) -> str:
    return "".join(str(b.get("text", "")) for b in blocks if b.get("type") == "text")


def items_of(event: SessionEvent) -> list[dict[str, Any]]:
    """The SDK items a surface event stands for, in order: the kept items when it came from
    the SDK, else a projection of its message (reasoning without a kept item is left out:
    the Responses API cannot replay it)."""
    message = event.data if event.type == USER_MESSAGE else event.data.get("message")
    if not isinstance(message, Mapping):
        return []
    kept = message.get(META)
    if isinstance(kept, Mapping) and isinstance(kept.get("items"), Sequence):
        return [thaw(item) for item in kept["items"]]
    content: Sequence[Any] = message.get("content") or []
    if event.type == USER_MESSAGE:
        return [{"role": "user", "content": _text(content)}]
    if event.type == TOOL_RESULT:
        block = content[0]
        output = _text(block.get("content") or ())
        return [{"type": "function_call_output", "call_id": block["toolCallId"], "output": output}]
    assert event.type == ASSISTANT_MESSAGE
    items: list[dict[str, Any]] = []
    text = _text(content)
    if text:
        items.append({"role": "assistant", "content": text})
    items.extend(
        {
            "type": "function_call",
            "call_id": b["id"],
            "name": b["name"],
            "arguments": b["arguments"],
        }
        for b in content
        if b.get("type") == "tool-call"
    )
    return items


def plain_item(item: Any) -> dict[str, Any]:
    """An SDK item as the dict it is stored as (a mapping, or an SDK output object handed
    over as is).

    Raises:
        TypeError: Neither.
    """
    if isinstance(item, Mapping):
        return dict(item)
    dump = getattr(item, "model_dump", None)
    if callable(dump):
        return dict(dump(exclude_unset=True))
    raise TypeError(f"an SDK item must be a mapping, got {type(item).__name__}")
