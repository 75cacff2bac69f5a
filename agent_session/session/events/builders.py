"""Builders for the events an embedding application writes itself, in the reference's shapes
and key orders, so nobody copies shapes out of a log.

Each builder returns the ``data`` of one event; append it with the event type it is named
after (the surface op is ``"append"`` for messages)::

    session.append("turn/start", turn_start(1))
    session.append("user/message", user_message("hi"), surface_op="append")
    session.append(
        "assistant/message",
        assistant_message(1, 1, text="Reading it.", calls=[tool_call_block("c1", "read", "{}")],
                          provider="openai", model="gpt-5"),
        surface_op="append",
    )
    call = session.append("tool/call", tool_call(1, 1, "c1", "read", "{}"))
    session.append("tool/result", tool_result(1, 1, "c1", "42"), surface_op="append",
                   source_event_seqs=[call.seq])

Whatever a builder returns passes the rules ``append`` and a cold load apply. Message ids
default to a random UUID.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = [
    "assistant_message",
    "model_message",
    "step_end",
    "step_start",
    "tool_call",
    "tool_call_block",
    "tool_result",
    "tool_result_message",
    "turn_end",
    "turn_start",
    "user_message",
]


def _id(id: str | None) -> str:
    return id or str(uuid.uuid4())


def turn_start(turn: int) -> dict[str, Any]:
    """``turn/start`` of turn ``turn`` (numbered from 1)."""
    return {"turn": turn}


def turn_end(turn: int, kind: str | Mapping[str, Any] = "completed") -> dict[str, Any]:
    """``turn/end``: ``kind`` is ``completed``, ``blocked`` or ``max-tokens``, or a whole
    reason (an abort or an error carries its detail: ``{"kind": "error", "error": ...}``)."""
    return {"turn": turn, "reason": {"kind": kind} if isinstance(kind, str) else dict(kind)}


def step_start(turn: int, step: int) -> dict[str, Any]:
    """``step/start``: one model request and its tool calls."""
    return {"turn": turn, "step": step}


def step_end(turn: int, step: int) -> dict[str, Any]:
    """``step/end``."""
    return {"turn": turn, "step": step}


def user_message(text: str, *, id: str | None = None) -> dict[str, Any]:
    """``user/message``: a text message from the user."""
    return {
        "content": [{"type": "text", "text": text}],
        "source": {"kind": "user"},
        "role": "user",
        "id": _id(id),
    }


def tool_call_block(call_id: str, name: str, arguments: str) -> dict[str, Any]:
    """A tool-call block of an assistant message; ``arguments`` is the raw JSON text the
    model produced."""
    return {"type": "tool-call", "id": call_id, "name": name, "arguments": arguments}


def assistant_message(
    turn: int,
    step: int,
    *,
    provider: str,
    model: str,
    text: str | None = None,
    reasoning: str | None = None,
    calls: Sequence[dict[str, Any]] = (),
    id: str | None = None,
) -> dict[str, Any]:
    """``assistant/message``: the model's answer in a step: reasoning, then text, then tool
    calls (built with :func:`tool_call_block`)."""
    content: list[dict[str, Any]] = []
    if reasoning is not None:
        content.append({"type": "reasoning", "text": reasoning})
    if text is not None:
        content.append({"type": "text", "text": text})
    content.extend(calls)
    message = model_message(content, provider=provider, model=model, id=id)
    return {"turn": turn, "step": step, "message": message}


def model_message(
    content: Sequence[dict[str, Any]],
    *,
    provider: str,
    model: str,
    id: str | None = None,
    replay_state: Any = None,
) -> dict[str, Any]:
    """The message of an ``assistant/message``, from its content blocks (``replay_state``:
    what the provider needs to replay it, kept in its source)."""
    source: dict[str, Any] = {"kind": "model", "provider": provider, "model": model}
    if replay_state is not None:
        source["replayState"] = replay_state
    return {"role": "assistant", "content": list(content), "source": source, "id": _id(id)}


def tool_call(turn: int, step: int, call_id: str, name: str, arguments: str) -> dict[str, Any]:
    """``tool/call``: the call is recorded before its body runs (crash repair answers a
    recorded call with "outcome unknown", an unrecorded one with "not started")."""
    return {"turn": turn, "step": step, "callId": call_id, "name": name, "arguments": arguments}


def tool_result_message(
    call_id: str,
    content: Sequence[Mapping[str, Any]],
    *,
    is_error: bool = False,
    id: str | None = None,
) -> dict[str, Any]:
    """The message of a ``tool/result``: one tool-result block answering ``call_id``."""
    return {
        "source": {"kind": "tool", "callId": call_id},
        "content": [
            {
                "type": "tool-result",
                "toolCallId": call_id,
                "content": list(content),
                "isError": is_error,
            }
        ],
        "role": "user",
        "id": _id(id),
    }


def tool_result(
    turn: int,
    step: int,
    call_id: str,
    text: str,
    *,
    is_error: bool = False,
    id: str | None = None,
) -> dict[str, Any]:
    """``tool/result``: a text answer to call ``call_id`` (append it with
    ``source_event_seqs=[<the tool/call's seq>]``)."""
    message = tool_result_message(
        call_id, [{"type": "text", "text": text}], is_error=is_error, id=id
    )
    return {"turn": turn, "step": step, "message": message}
