"""pydantic-ai message histories (``ModelMessagesTypeAdapter`` JSON) and sessions, both ways
(install ``agent-session-runtime[pydantic-ai]``).

- :func:`export_messages`: a session's surface as pydantic-ai messages. A message that came
  from pydantic-ai comes back exactly (its parts and envelope are kept on the events it became,
  under :data:`META`); any other is projected: user text to a ``user-prompt``, an assistant
  message to ``thinking``/``text``/``tool-call`` parts, a tool result to a ``tool-return``
  (crash repair's answers with ``outcome: "interrupted"``), consecutive results in one
  request.
- :func:`import_messages`: appends a pydantic-ai history to a live session as the events a run
  would have written: a request with a user prompt opens a turn, each response is a step with
  its ``assistant/message`` and a ``tool/call`` per tool-call part, each ``tool-return``
  a ``tool/result`` citing it. A turn whose calls are all answered is closed; one left with
  an unanswered call stays open, so the next load answers it as a crash would. The history is
  checked whole first (pydantic-ai's own validation, and every return answering an earlier
  call): a refused import writes nothing.

``import_messages`` then ``export_messages`` gives back the same messages.
"""

from __future__ import annotations

import datetime
import json
import uuid
from collections.abc import Mapping, Sequence
from typing import Any, Final

from pydantic_ai.messages import ModelMessagesTypeAdapter

from agent_session.integrations.turns import (
    OpenTurn,
    end_turn,
    next_step,
    open_turn,
    record_call,
)
from agent_session.integrations.turns import start_turn as _start_turn
from agent_session.session.errors import JsonValueError, SessionDataError, SessionEventError
from agent_session.session.events.builders import (
    model_message,
    tool_call_block,
    tool_result_message,
)
from agent_session.session.events.outcomes import (
    TOOL_NOT_STARTED,
    TOOL_OUTCOME_UNKNOWN,
    TOOL_OUTCOME_UNKNOWN_NAME,
)
from agent_session.session.events.types import ASSISTANT_MESSAGE, TOOL_RESULT, USER_MESSAGE
from agent_session.session.json.lossless import snapshot, thaw
from agent_session.session.live.session import Session

__all__ = ["META", "append_history", "export_messages", "import_messages", "parse_history"]

META: Final = "pydanticAi"
"""The key, on a message a pydantic-ai message's parts became, of ``{"parts": [...]}`` and,
on the first such message, ``"message"``: the pydantic-ai message without its parts."""
PROVIDER: Final = "pydantic-ai"
"""The provider an imported response names when it names none."""
_REPAIRED: Final = frozenset({TOOL_OUTCOME_UNKNOWN, TOOL_NOT_STARTED})
ARGS_AS_TEXT: Final = "argsAsText"
"""Marks a kept tool-call part whose ``args`` object is kept as its JSON text (an integer
beyond 2**53 fits in text, not in an event's JSON)."""


def _restored(part: dict[str, Any]) -> dict[str, Any]:
    if part.pop(ARGS_AS_TEXT, False):
        part["args"] = json.loads(part["args"])
    return part


def _text(blocks: Sequence[Any]) -> str:
    return "".join(str(b.get("text", "")) for b in blocks if b.get("type") == "text")


# --- export -------------------------------------------------------------------------------


def _moment(ms: int) -> str:
    """An event's ``time`` (epoch milliseconds) as pydantic-ai's ISO 8601 timestamp."""
    return datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC).isoformat()


def _derived(
    event_type: str, data: Any, names: Mapping[str, str], time: int
) -> tuple[str, list[Any]]:
    """The kind and parts of a message that did not come from pydantic-ai (stamped with the
    event's recorded time: an export is the same whenever it runs)."""
    message = data if event_type == USER_MESSAGE else data["message"]
    content: Sequence[Any] = message.get("content") or []
    if event_type == USER_MESSAGE:
        prompt = {"part_kind": "user-prompt", "content": _text(content), "timestamp": _moment(time)}
        return "request", [prompt]
    if event_type == TOOL_RESULT:
        block = content[0]
        error = data.get("error") or {}
        outcome = (
            "interrupted"
            if error.get("code") in _REPAIRED
            else "failed"
            if block.get("isError")
            else "success"
        )
        call = block["toolCallId"]
        part: dict[str, Any] = {
            "part_kind": "tool-return",
            "tool_name": names.get(call, ""),
            "content": _text(block.get("content") or ()),
            "tool_call_id": call,
            "outcome": outcome,
            "timestamp": _moment(time),
        }
        if outcome == "interrupted":  # which repair answered it, for an import to restore
            part["metadata"] = {META: {"error": thaw(error)}}
        return "request", [part]
    parts: list[Any] = []
    for block in content:
        kind = block.get("type")
        if kind == "reasoning":
            parts.append({"part_kind": "thinking", "content": block.get("text", "")})
        elif kind == "text":
            parts.append({"part_kind": "text", "content": block.get("text", "")})
        elif kind == "tool-call":
            parts.append(
                {
                    "part_kind": "tool-call",
                    "tool_name": block["name"],
                    "args": block["arguments"],
                    "tool_call_id": block["id"],
                }
            )
    return "response", parts


def export_messages(session: Session) -> bytes:
    """The session's surface as pydantic-ai ``ModelMessagesTypeAdapter`` JSON."""
    out: list[dict[str, Any]] = []
    derived: set[int] = set()  # ids of the messages projected here, which later ones may join
    names: dict[str, str] = {}
    events = session.events
    for seq in session.surface.nodes:
        event = events[seq]
        data = event.data
        message = data if event.type == USER_MESSAGE else data["message"]
        for block in message.get("content") or ():
            if block.get("type") == "tool-call":
                names[block["id"]] = block["name"]
        kept = message.get(META)
        if isinstance(kept, Mapping):
            parts = [_restored(thaw(part)) for part in kept.get("parts") or ()]
            if "message" in kept or not out:
                out.append({**thaw(kept.get("message") or {}), "parts": parts})
            else:
                out[-1]["parts"].extend(parts)
            continue
        kind, parts = _derived(event.type, data, names, event.time)
        if not parts:
            continue
        last = out[-1] if out else None
        if last is not None and id(last) in derived and last["kind"] == kind == "request":
            last["parts"].extend(parts)
            continue
        entry: dict[str, Any] = {"kind": kind, "parts": parts, "timestamp": _moment(event.time)}
        if kind == "response":
            source = message.get("source") or {}
            entry["model_name"] = source.get("model")
            entry["provider_name"] = source.get("provider")
        out.append(entry)
        derived.add(id(entry))
    return ModelMessagesTypeAdapter.dump_json(ModelMessagesTypeAdapter.validate_python(out))


# --- import -------------------------------------------------------------------------------


def _user_text(part: Mapping[str, Any]) -> str:
    content = part.get("content")
    if isinstance(content, str):
        return content
    return "".join(c for c in content or () if isinstance(c, str))


def _content_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _events_of(message: dict[str, Any]) -> list[tuple[str, list[Any]]]:
    """The events one pydantic-ai message becomes, as ``(event type, its parts)``; parts with
    no event of their own (system prompts ...) ride on the next event, or the last."""
    parts = message["parts"]
    if message["kind"] == "response":
        return [(ASSISTANT_MESSAGE, list(parts))]
    out: list[tuple[str, list[Any]]] = []
    riders: list[Any] = []
    for part in parts:
        kind = part.get("part_kind")
        if kind == "user-prompt" or (kind == "retry-prompt" and not part.get("tool_call_id")):
            out.append((USER_MESSAGE, [*riders, part]))
        elif kind in ("tool-return", "retry-prompt"):
            out.append((TOOL_RESULT, [*riders, part]))
        else:
            riders.append(part)
            continue
        riders = []
    if riders:
        if out:
            out[-1][1].extend(riders)
        else:  # nothing to ride on: an empty assistant message, which no model sees
            out.append((ASSISTANT_MESSAGE, riders))
    return out


def _check(messages: list[dict[str, Any]]) -> None:
    """Every tool return must answer a tool call of an earlier response since the last
    user prompt (the calls of the turn it belongs to)."""
    asked: set[str] = set()
    for index, message in enumerate(messages):
        for part in message["parts"]:
            kind, call = part.get("part_kind"), part.get("tool_call_id")
            if kind == "user-prompt":
                asked = set()
            elif message["kind"] == "response" and kind == "tool-call":
                asked.add(call)
            elif (kind == "tool-return" or (kind == "retry-prompt" and call)) and call not in asked:
                raise SessionEventError(
                    f"pydantic-ai message #{index}: {kind} for call {call!r} answers no "
                    "tool call of an earlier response; nothing was imported"
                )


def parse_history(document: bytes | str) -> list[dict[str, Any]]:
    """The messages of a pydantic-ai history (``ModelMessagesTypeAdapter`` JSON), checked.
    Raises ``pydantic.ValidationError`` for JSON pydantic-ai refuses and
    :class:`SessionEventError` for a return that answers no call."""
    validated = ModelMessagesTypeAdapter.validate_json(document)
    messages: list[dict[str, Any]] = ModelMessagesTypeAdapter.dump_python(validated, mode="json")
    _check(messages)
    for message in messages:
        for index, part in enumerate(message["parts"]):
            if part.get("part_kind") == "tool-call" and not isinstance(part.get("args"), str):
                # kept as the JSON text (any number fits), read back on export
                text = json.dumps(part.get("args"), ensure_ascii=False)
                message["parts"][index] = {**part, "args": text, ARGS_AS_TEXT: True}
    try:
        snapshot(messages, "history")
    except JsonValueError as e:
        raise SessionDataError(f"the pydantic-ai history cannot be stored: {e}") from None
    return messages


def import_messages(session: Session, document: bytes | str) -> int:
    """Append the pydantic-ai history ``document`` to the live ``session``; return how many
    messages it held. Raises as :func:`parse_history`, before anything is appended."""
    return append_history(session, parse_history(document))


def append_history(session: Session, messages: Sequence[dict[str, Any]]) -> int:
    """Append the messages :func:`parse_history` returned to the live ``session``."""
    for message in messages:
        envelope = {key: value for key, value in message.items() if key != "parts"}
        for index, (event_type, parts) in enumerate(_events_of(message)):
            kept = {"message": envelope, "parts": parts} if index == 0 else {"parts": parts}
            _append(session, event_type, parts, kept, message)
    turn = open_turn(session.events)
    if turn is not None and not turn.unanswered:
        end_turn(session, turn, _reason(session, turn))
    return len(messages)


def _reason(session: Session, turn: OpenTurn) -> str:
    """``interrupted`` for a turn a repair answered (as the exported one ended), else
    ``completed``."""
    repaired = any(
        event.type == TOOL_RESULT and (event.data.get("error") or {}).get("code") in _REPAIRED
        for event in session.events[turn.start :]
    )
    return "interrupted" if repaired else "completed"


def _append(
    session: Session,
    event_type: str,
    parts: list[Any],
    kept: dict[str, Any],
    message: Mapping[str, Any],
) -> None:
    turn = open_turn(session.events)
    if event_type == USER_MESSAGE:
        if turn is None or turn.answered_any:
            if turn is not None and not turn.unanswered:
                end_turn(session, turn, _reason(session, turn))
                turn = None
            _start_turn(session, turn)
        text = "".join(_user_text(p) for p in parts if p.get("part_kind") != "system-prompt")
        data: dict[str, Any] = {
            "content": [{"type": "text", "text": text}],
            "source": {"kind": "user"},
            "role": "user",
            "id": str(uuid.uuid4()),
            META: kept,
        }
        session.append(USER_MESSAGE, data, surface_op="append")
    elif event_type == TOOL_RESULT:
        part = next(p for p in parts if p.get("part_kind") in ("tool-return", "retry-prompt"))
        assert turn is not None  # checked: it answers a call of the open turn
        call = part["tool_call_id"]
        seq = record_call(session, turn, call)
        interrupted = part.get("outcome") == "interrupted"
        error = part["part_kind"] == "retry-prompt" or part.get("outcome") == "failed"
        result = tool_result_message(
            call,
            [{"type": "text", "text": _content_text(part.get("content"))}],
            is_error=error or interrupted,
        )
        result[META] = kept
        answer: dict[str, Any] = {"turn": turn.number, "step": turn.calls[call][0]}
        answer["message"] = result
        if interrupted:  # a repair's answer: its error, as the export carried it
            carried = ((part.get("metadata") or {}).get(META) or {}).get("error")
            answer["error"] = carried or {
                "name": TOOL_OUTCOME_UNKNOWN_NAME,
                "code": TOOL_OUTCOME_UNKNOWN,
            }
        session.append(TOOL_RESULT, answer, surface_op="append", source_event_seqs=[seq])
    else:
        turn = next_step(session, turn)
        blocks = [b for part in parts for b in _blocks(part)]
        model = message.get("model_name") or "unknown"
        provider = message.get("provider_name") or PROVIDER
        reply = model_message(blocks, provider=provider, model=model)
        reply[META] = kept
        data = {"turn": turn.number, "step": turn.last_step}
        data["message"] = reply
        session.append(ASSISTANT_MESSAGE, data, surface_op="append", source_event_seqs=[])


def _blocks(part: Mapping[str, Any]) -> list[dict[str, Any]]:
    kind = part.get("part_kind")
    if kind == "text":
        return [{"type": "text", "text": part["content"]}]
    if kind == "thinking":
        return [{"type": "reasoning", "text": part["content"]}]
    if kind == "tool-call":
        args = part.get("args")
        arguments = args if isinstance(args, str) else json.dumps(args or {}, ensure_ascii=False)
        return [tool_call_block(part["tool_call_id"], part["tool_name"], arguments)]
    return []
