"""Google ADK events and this library's events, both ways (pure: no ADK import, no I/O; an
ADK ``Event`` is handled as its JSON, ``event.model_dump(exclude_none=True, mode="json")``,
the shape ADK's own database services store).

An ADK event becomes the event that means the same thing, with the ADK event itself kept
verbatim on the message under :data:`META` (``{"events": [its JSON text]}``: one string, which
a load checks at the cost of one value however deep the event is; a second message made from
the same ADK event keeps ``{"events": []}``), so the service gives back exactly
what was appended while every other reader (``agent-session show``, the exports, the
reference) sees an ordinary transcript:

- a user's text: ``user/message``;
- a model response: ``assistant/message`` (text, thought parts as reasoning, and one
  tool-call block per ``function_call`` part, in the model's order), then a ``tool/call``
  per call (ADK appends the call before it runs the tool);
- ``function_response`` parts answering calls of the open turn: a ``tool/result`` each;
- anything else (state or artifact changes alone, transfers, escalations, code execution,
  responses to calls of an earlier turn ...): ``google-adk/event`` (:data:`ADK_EVENT`),
  ``{"event": its JSON text}``.

Events that carry no ADK event (crash repair's answers, another writer's messages) are
projected to ADK events: a repaired call becomes a ``function_response`` whose ``response``
is ``{"error": {"code", "name", "message"}}`` (``TOOL_OUTCOME_UNKNOWN`` or
``TOOL_NOT_STARTED``), so the next model request answers every call.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Final, Literal

import orjson

from agent_session.integrations.log_ids import joined, split
from agent_session.session.errors import SessionDataError
from agent_session.session.events.builders import (
    model_message,
    tool_call_block,
    tool_result_message,
)
from agent_session.session.events.eventlog import is_run, iter_parts
from agent_session.session.events.types import (
    ADK_EVENT,
    ASSISTANT_MESSAGE,
    TOOL_RESULT,
    USER_MESSAGE,
)

__all__ = [
    "LOG_PREFIX",
    "META",
    "EventKind",
    "assistant_data",
    "calls_of",
    "decode",
    "encode",
    "kind_of",
    "log_id",
    "parse_log_id",
    "project",
    "responses_of",
    "stripped",
    "tool_result_data",
    "user_data",
]

META: Final = "googleAdk"
"""The key, on a message an ADK event became, of ``{"events": [the ADK event, verbatim]}``."""
PROVIDER: Final = "google-adk"
"""The provider an assistant message names (the model is the ADK event's author)."""
LOG_PREFIX: Final = "adk:"
"""Every log the service writes has an id ``adk:<app>:<user>:<session>`` (each part
percent-encoded where it holds ``%`` or ``:``)."""

EventKind = Literal["user", "model", "results", "other"]


def encode(event: Mapping[str, Any]) -> str:
    """The JSON text an ADK event is kept as (standard JSON: a NaN or infinity is refused).

    Raises:
        SessionDataError: The event holds a value JSON cannot (nothing is written).
    """
    try:
        return json.dumps(event, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except (ValueError, TypeError) as e:
        raise SessionDataError(
            f"ADK event {event.get('id')!r} cannot be stored as JSON: {e}; nothing was written"
        ) from None


def decode(text: str) -> dict[str, Any]:
    """The ADK event JSON :func:`encode` kept."""
    value = orjson.loads(text)
    if not isinstance(value, dict):
        raise SessionDataError(f"a kept ADK event is not a JSON object: {text[:80]!r}")
    return value


def log_id(app: str, user: str, session: str) -> str:
    """The id of the log of ADK session ``session`` of ``user`` in ``app``."""
    return joined(LOG_PREFIX, (app, user, session))


def stripped(session_id: str | None) -> str:
    """A session id as ADK's services take it: without surrounding blanks ("" for none)."""
    return session_id.strip() if session_id else ""


def parse_log_id(id: str) -> tuple[str, str, str] | None:
    """``(app, user, session)`` of a log id :func:`log_id` made; ``None`` for another id."""
    parts = split(LOG_PREFIX, id)
    if parts is None or len(parts) != 3:
        return None
    app, user, session = parts
    return app, user, session


def _parts(event: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    content = event.get("content")
    parts = content.get("parts") if isinstance(content, Mapping) else None
    return [p for p in parts or () if isinstance(p, Mapping)]


def calls_of(event: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The ``function_call`` parts of an ADK event, in order."""
    return [
        p["function_call"] for p in _parts(event) if isinstance(p.get("function_call"), Mapping)
    ]


def responses_of(event: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The ``function_response`` parts of an ADK event, in order."""
    return [
        p["function_response"]
        for p in _parts(event)
        if isinstance(p.get("function_response"), Mapping)
    ]


def _texts(event: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return [p for p in _parts(event) if isinstance(p.get("text"), str)]


def kind_of(event: Mapping[str, Any]) -> EventKind:
    """Which event an ADK event becomes (``results`` only says it answers calls; whether they
    are the open turn's is the writer's to check)."""
    calls, responses = calls_of(event), responses_of(event)
    content = event.get("content")
    role = content.get("role") if isinstance(content, Mapping) else None
    if calls and not responses and event.get("author") != "user":
        return "model"
    if responses and not calls:
        return "results"
    if calls or responses or not _texts(event):
        return "other"
    if event.get("author") == "user" and role in (None, "user"):
        return "user"
    return "model" if role == "model" else "other"


def _blocks(event: Mapping[str, Any]) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    for part in _parts(event):
        call = part.get("function_call")
        if isinstance(call, Mapping):
            arguments = json.dumps(call.get("args") or {}, ensure_ascii=False, sort_keys=True)
            blocks.append(tool_call_block(str(call.get("id")), str(call.get("name")), arguments))
        elif isinstance(part.get("text"), str):
            kind = "reasoning" if part.get("thought") is True else "text"
            blocks.append({"type": kind, "text": part["text"]})
    return blocks


def user_data(event: Mapping[str, Any], kept: str, message_id: str) -> dict[str, Any]:
    """``user/message`` data for a user's ADK event (``kept``: its :func:`encode`)."""
    return {
        "content": _blocks(event),
        "source": {"kind": "user"},
        "role": "user",
        "id": message_id,
        META: {"events": [kept]},
    }


def assistant_data(event: Mapping[str, Any], kept: str, turn: int, step: int) -> dict[str, Any]:
    """``assistant/message`` data for a model response's ADK event (``kept``: its
    :func:`encode`)."""
    message = model_message(_blocks(event), provider=PROVIDER, model=str(event.get("author")))
    message[META] = {"events": [kept]}
    return {"turn": turn, "step": step, "message": message}


def tool_result_data(
    kept: str | None, response: Mapping[str, Any], turn: int, step: int
) -> dict[str, Any]:
    """``tool/result`` data for one ``function_response`` part of an ADK event (the first
    part's result keeps the event's :func:`encode`, ``kept``; the others ``None``)."""
    text = json.dumps(response.get("response"), ensure_ascii=False, sort_keys=True)
    message = tool_result_message(str(response.get("id")), [{"type": "text", "text": text}])
    message[META] = {"events": [kept] if kept is not None else []}
    return {"turn": turn, "step": step, "message": message}


def _kept(event: Any) -> list[Any] | None:
    """The ADK events a log event keeps (``None``: it was not written from one)."""
    if event.type == ADK_EVENT:
        return [event.data.get("event")]
    message = event.data if event.type == USER_MESSAGE else event.data.get("message")
    if not isinstance(message, Mapping):
        return None
    kept = message.get(META)
    if isinstance(kept, Mapping) and isinstance(kept.get("events"), Sequence):
        return list(kept["events"])
    return None


_KEEPING: Final = frozenset({USER_MESSAGE, ASSISTANT_MESSAGE, TOOL_RESULT, ADK_EVENT})
"""The types a log event an ADK event wrote can have."""


def project(
    events: Sequence[Any], asked: dict[str, tuple[str, str, str]]
) -> Iterator[tuple[int, dict[str, Any]]]:
    """The ADK events (as JSON) a log stands for, in order, each with the seq of the log
    event it comes from: the kept ones verbatim, and a ``function_response`` event per run of
    results that no ADK event wrote (crash repair's answers; another writer's results).
    ``asked`` (call id: author, invocation id, tool name) carries the calls seen from one
    part of a log to the next."""
    answers: list[dict[str, Any]] = []
    answered_at = 0
    time = 0.0
    for event in iter_parts(events):
        kind = event.type
        if kind not in _KEEPING or is_run(event):
            continue
        kept = _kept(event)
        if kind == TOOL_RESULT and kept is None:
            answers.append(_answer(event, asked))
            answered_at, time = event.seq, event.time / 1000
            continue
        if answers:
            yield answered_at, _answers_event(answers, asked, answered_at, time)
            answers = []
        for text in kept or ():
            if type(text) is not str:
                continue  # (not an ADK event this build wrote)
            adk = decode(text)
            if kind != USER_MESSAGE and kind != TOOL_RESULT:  # (only a model asks)
                for call in calls_of(adk):
                    asked[str(call.get("id"))] = (
                        str(adk.get("author", "")),
                        str(adk.get("invocation_id", "")),
                        str(call.get("name")),
                    )
            yield event.seq, adk
    if answers:
        yield answered_at, _answers_event(answers, asked, answered_at, time)


def _answer(event: Any, asked: Mapping[str, tuple[str, str, str]]) -> dict[str, Any]:
    message = event.data["message"]
    block = message["content"][0]
    call_id = str(block.get("toolCallId"))
    text = "".join(
        str(b.get("text", "")) for b in block.get("content") or () if isinstance(b, Mapping)
    )
    error = event.data.get("error")
    if isinstance(error, Mapping):
        response: dict[str, Any] = {
            "error": {"code": error.get("code"), "name": error.get("name"), "message": text}
        }
    elif block.get("isError"):
        response = {"error": {"message": text}}
    else:
        response = {"result": text}
    name = asked.get(call_id, ("", "", ""))[2]
    return {"function_response": {"id": call_id, "name": name, "response": response}}


def _answers_event(
    parts: list[dict[str, Any]], asked: Mapping[str, tuple[str, str, str]], seq: int, time: float
) -> dict[str, Any]:
    """One ADK event answering ``parts``' calls, as ADK merges parallel responses."""
    first = parts[0]["function_response"]["id"]
    author, invocation, _ = asked.get(first, ("", "", ""))
    return {
        "content": {"parts": parts, "role": "user"},
        "invocation_id": invocation,
        "author": author,
        "actions": {},
        "id": f"agent-session-repair-{seq}",
        "timestamp": time,
    }
