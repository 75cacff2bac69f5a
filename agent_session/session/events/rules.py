"""Validation of a seed or a stored log, the rules a cold load applies to every event.

A seed is checked event by event, in order: lossless JSON, envelope, message shape, seq
contiguity, then the surface transition. Message shapes are checked here only; ``append`` does
not check them (as in the reference). Errors are :class:`SessionEventError` with the
reference's texts.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NamedTuple, TypeGuard

from agent_session.session.errors import JsonValueError, SessionEventError
from agent_session.session.events.compaction import boundary_problem
from agent_session.session.events.event import (
    SessionEvent,
    build_event,
    envelope_problem,
    is_known_event_type,
)
from agent_session.session.events.eventlog import EventLog, LazyRun, is_run, iter_parts
from agent_session.session.events.surface import Surface, SurfaceReplace, parse_surface_metadata
from agent_session.session.events.types import (
    ASSISTANT_MESSAGE,
    CONTEXT_COMPACTED,
    LEGACY_HEADER_DELTA,
    REQUEST_HEADER,
    TOOL_CALL,
    TOOL_RESULT,
    USER_MESSAGE,
)
from agent_session.session.json.lossless import FrozenDict, FrozenList, snapshot

__all__ = [
    "RULED_TYPES",
    "CheckedLog",
    "check_events",
    "check_loadable",
    "message_shape_problem",
    "validate_log",
]

_ADAPTER_DEFAULT_KEYS = frozenset({"reasoningEffort", "maxTokens"})
RULED_TYPES = frozenset(
    {USER_MESSAGE, ASSISTANT_MESSAGE, TOOL_RESULT, TOOL_CALL, REQUEST_HEADER, LEGACY_HEADER_DELTA}
)
"""Types whose data or surface metadata a rule looks into (surface, message shape, the call a
``tool/call`` names, legacy).
Events of any other type, without surface metadata, have only their envelope to check."""


def _non_empty_str(value: object) -> bool:
    return isinstance(value, str) and value != ""


_MAPS: frozenset[type] = frozenset((dict, FrozenDict))
_LISTS: frozenset[type] = frozenset((list, FrozenList, tuple))
"""The containers frozen data is made of: known without an ABC check (the append path)."""


def _is_map(value: object) -> TypeGuard[Mapping[str, Any]]:
    return type(value) in _MAPS or isinstance(value, Mapping)


def _is_array(value: object) -> TypeGuard[Sequence[Any]]:
    return type(value) in _LISTS or (isinstance(value, Sequence) and not isinstance(value, str))


def message_shape_problem(event_type: str, data: Any) -> str | None:
    """What is wrong with the message (request header, recorded call) an event carries, or
    ``None``."""
    if event_type == REQUEST_HEADER:
        return _request_header_problem(data)
    if event_type == TOOL_CALL:
        # Recovery pairs a recorded call with the model's by this id: without it, a call whose
        # body ran would be closed as never started.
        call = data if _is_map(data) else {}
        if not _non_empty_str(call.get("callId")) or not isinstance(call.get("name"), str):
            return "must name the call it records (a non-empty callId and a name)"
        return None
    if event_type == USER_MESSAGE:
        message, role = data, "user"
    elif event_type in (ASSISTANT_MESSAGE, TOOL_RESULT):
        message = data.get("message") if _is_map(data) else None
        role = "assistant" if event_type == ASSISTANT_MESSAGE else "user"
    else:
        return None
    if not _is_map(message) or not _non_empty_str(message.get("id")):
        return "lacks an identified message"
    if message.get("role") != role:
        return f'message must have role "{role}"'
    source = message.get("source")
    if not _is_map(source) or not _non_empty_str(source.get("kind")):
        return "message must have a source kind"
    content = message.get("content")
    if not _is_array(content):
        return "message content must be an array"
    if event_type == ASSISTANT_MESSAGE:
        if source.get("kind") != "model" or not (
            _non_empty_str(source.get("provider")) and _non_empty_str(source.get("model"))
        ):
            return "message must have model source"
    elif event_type == TOOL_RESULT:
        call_id = source.get("callId")
        if source.get("kind") != "tool" or not _non_empty_str(call_id):
            return "message must have tool source"
        block = content[0] if len(content) == 1 else None
        if (
            not _is_map(block)
            or block.get("type") != "tool-result"
            or not _is_array(block.get("content"))
        ):
            return "message must contain one tool-result block"
        if block.get("toolCallId") != call_id:
            return "message has mismatched tool call ids"
    return None


def _request_header_problem(data: Any) -> str | None:
    header = data.get("header") if isinstance(data, Mapping) else None
    config = header.get("config") if isinstance(header, Mapping) else None
    if not isinstance(config, Mapping) or not (
        _non_empty_str(config.get("provider")) and _non_empty_str(config.get("model"))
    ):
        return "lacks provider/model"
    if "reasoningEffort" in config and not _non_empty_str(config["reasoningEffort"]):
        return "reasoningEffort must be a non-empty string"
    defaults = header.get("adapterDefaults")  # type: ignore[union-attr]
    if defaults is not None and (
        not isinstance(defaults, Mapping)
        or any(
            k not in _ADAPTER_DEFAULT_KEYS or v is not True or k not in config
            for k, v in defaults.items()
        )
    ):
        return "has invalid adapterDefaults"
    return None


def legacy_problem(event_type: str, data: Any) -> str | None:
    """Retired header vocabulary the reference refuses everywhere."""
    if event_type == LEGACY_HEADER_DELTA:
        return 'uses the retired legacy event type "request/header-delta"'
    if (
        event_type == REQUEST_HEADER
        and isinstance(data, Mapping)
        and data.get("reason") == "fallback"
    ):
        return 'uses the retired legacy request/header reason "fallback"'
    return None


class CheckedLog(NamedTuple):
    """A validated log: its frozen events and the surface they leave."""

    events: EventLog[SessionEvent]
    surface: Surface


def validate_log(
    seed: Iterable[SessionEvent | Mapping[str, Any]], *, after: CheckedLog | None = None
) -> CheckedLog:
    """Check every event of a seed or a stored log and return the frozen events and the
    resulting surface; with ``after``, check ``seed`` as the continuation of a log already
    checked (its seqs continue it) and return the whole log.

    ``SessionEvent`` items are already frozen and lossless and are reused as they are; raw
    dicts are snapshotted; an unbuilt :class:`LazyRun` of an :class:`EventLog` seed (checked by
    the backend that made it, and never on the surface) is kept unbuilt. Raises
    :class:`SessionEventError` naming the index. ``after`` is never changed.
    """
    parts: list[Sequence[SessionEvent]] = [] if after is None else [after.events]
    events: list[SessionEvent] = []  # the open part
    surface = Surface() if after is None else after.surface.copy()
    index = -1 if after is None else len(after.events) - 1
    for item in iter_parts(seed):
        index += 1
        if is_run(item):
            _check_run(item, index)
            parts += (events, item)
            events = []
            index += len(item) - 1
            continue
        if _in_place(item, index):
            events.append(item)
            continue
        events.append(_checked_event(item, index, parts, events, surface))
    parts.append(events)
    return CheckedLog(EventLog(parts), surface)


def _in_place(item: object, index: int) -> TypeGuard[SessionEvent]:
    """Whether ``item`` needs no rule but its position: a built event has a valid envelope
    and frozen data by construction, and one of a type outside the surface, with no message
    shape, at its seq has nothing else to check."""
    return (
        type(item) is SessionEvent
        and item.seq == index
        and item.surface_op is None
        and item.type not in RULED_TYPES
        and item.type != CONTEXT_COMPACTED
    )


def _check_run(run: LazyRun, index: int) -> None:
    if run.type in RULED_TYPES:  # no backend here makes one: its rules need each event
        raise SessionEventError(
            f"seed run at index {index} is an unbuilt run of {run.type!r} events, "
            "whose rules need each event: build it first"
        )
    if run.seq0 != index:
        raise SessionEventError(
            f"seed event at index {index} has seq {run.seq0} (expected {index}); "
            "seed must be contiguous from 0"
        )


def _checked_event(
    item: SessionEvent | Mapping[str, Any],
    index: int,
    parts: list[Sequence[SessionEvent]],
    events: list[SessionEvent],
    surface: Surface,
) -> SessionEvent:
    """Every rule for one event at ``index`` (after ``parts`` + ``events``); applies it to
    ``surface`` and returns the frozen event."""
    raw, op, sources = _own_rules(item, index)
    try:
        # Only a replace looks events up by seq; after a lazy run or a checked prefix,
        # ``events`` alone no longer starts at seq 0.
        history = EventLog([*parts, events]) if parts and isinstance(op, SurfaceReplace) else events
        surface.check(raw["type"], op, sources, raw["data"], history)
    except SessionEventError as e:
        raise SessionEventError(f"invalid seed event at index {index}: {e}") from e
    surface.apply(index, op)
    if raw["type"] == CONTEXT_COMPACTED:
        problem = boundary_problem(raw, surface.nodes)
        if problem is not None:
            raise SessionEventError(f"invalid seed event at index {index}: {problem}")
    return item if isinstance(item, SessionEvent) else _built(raw, index, op, sources)


def check_events(
    items: Iterable[SessionEvent | Mapping[str, Any]], start: int
) -> list[SessionEvent]:
    """The frozen events of ``items``, which continue a log at seq ``start``, each checked by
    every rule that needs no other event (lossless JSON, envelope, legacy, message shape, seq
    contiguity): what can be checked of a log's tail without reading the events before it
    (the surface's transitions need those). Raises :class:`SessionEventError` naming the
    index."""
    checked: list[SessionEvent] = []
    for index, item in enumerate(items, start):
        if _in_place(item, index):
            checked.append(item)
            continue
        raw, op, sources = _own_rules(item, index)
        checked.append(item if isinstance(item, SessionEvent) else _built(raw, index, op, sources))
    return checked


def _own_rules(item: SessionEvent | Mapping[str, Any], index: int) -> tuple[Any, Any, Any]:
    """The event's JSON, surface op and sources, after every rule of the event on its own."""
    if isinstance(item, SessionEvent):
        raw: Any = item.to_json()
    else:
        try:
            raw = snapshot(item, f"seed[{index}]", js_numbers=True)
        except JsonValueError as e:
            raise SessionEventError(
                f"seed event at index {index} is not losslessly JSON-serializable: {e}"
            ) from e
    problem = envelope_problem(raw)
    if problem is not None:
        raise SessionEventError(
            f"seed event at index {index} has an invalid event envelope: {problem}"
        )
    event_type, data = raw["type"], raw["data"]
    legacy = legacy_problem(event_type, data)
    if legacy is not None:
        raise SessionEventError(f"seed event at index {index} {legacy}")
    shape = message_shape_problem(event_type, data)
    if shape is not None:
        raise SessionEventError(f"seed {event_type} at index {index} {shape}")
    if raw["seq"] != index:
        raise SessionEventError(
            f"seed event at index {index} has seq {raw['seq']} (expected {index}); "
            "seed must be contiguous from 0"
        )
    try:
        op, sources = parse_surface_metadata(
            event_type, index, raw.get("surfaceOp"), raw.get("sourceEventSeqs")
        )
    except SessionEventError as e:
        raise SessionEventError(f"invalid seed event at index {index}: {e}") from e
    return raw, op, sources


def _built(raw: Any, index: int, op: Any, sources: Any) -> SessionEvent:
    return build_event(
        raw["type"], index, raw["time"], raw["data"], op, sources, raw.get("ignorable"), tuple(raw)
    )


def check_loadable(type: str, data: Any) -> None:
    """The load's rules an append could break, applied before the commit, so that nothing
    appended makes the log unreadable: a type readers refuse (neither known nor registered),
    or a message the load would refuse. (The reference's append is laxer; a log written here
    must load here and there.) Raises :class:`SessionEventError`."""
    if not is_known_event_type(type):
        raise SessionEventError(
            f'session event type "{type}" is unknown to this build: call '
            f'register_event_type("{type}") first, or readers refuse the log'
        )
    if type in RULED_TYPES:
        shape = message_shape_problem(type, data)
        if shape is not None:
            raise SessionEventError(f'session event "{type}" {shape}')
