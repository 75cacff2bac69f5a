"""The event envelope: ``{type, seq, time, data}`` plus optional ``surfaceOp``,
``sourceEventSeqs`` and ``ignorable``.

A :class:`SessionEvent` is immutable. Its ``data`` is the frozen lossless-JSON payload, kept in
the key order it was written with, so an event read from a log is written back byte for byte.
``payload`` gives a typed view for known types.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, PrivateAttr

from agent_session.session.errors import SessionEventError
from agent_session.session.events import payloads as p
from agent_session.session.events.messages import UserMessage
from agent_session.session.events.surface import SURFACE_EVENT_TYPES as _SURFACE_TYPES
from agent_session.session.events.surface import SurfaceOp, SurfaceReplace, parse_surface_metadata
from agent_session.session.events.types import (
    ASSISTANT_CHUNK,
    ASSISTANT_MESSAGE,
    END_SEED,
    INBOX_SPLICED,
    INTEGRATION_EVENT_TYPES,
    LLM_RETRY,
    LLM_RETRY_STARTED,
    REQUEST_CONTEXT,
    REQUEST_HEADER,
    STEP_END,
    STEP_START,
    TODO_WRITE,
    TOOL_CALL,
    TOOL_RESULT,
    TURN_END,
    TURN_START,
    USER_MESSAGE,
)
from agent_session.session.events.wire import WireModel
from agent_session.session.json.codec import decode_json, encode_json
from agent_session.session.json.gcpause import untrack as _untrack
from agent_session.session.json.lossless import JsonValue, is_safe_int, snapshot

__all__ = [
    "EVENT_PAYLOADS",
    "KNOWN_EVENT_TYPES",
    "SURFACE_EVENT_TYPES",
    "SessionEvent",
    "SurfaceOp",
    "SurfaceReplace",
    "build_event",
    "build_plain_events",
    "envelope_problem",
    "is_known_event_type",
    "register_event_type",
    "with_data",
]

SURFACE_EVENT_TYPES: Final = _SURFACE_TYPES
"""The only types that enter the surface; they must carry ``surfaceOp``."""

EVENT_PAYLOADS: Final[Mapping[str, type[WireModel]]] = {
    INBOX_SPLICED: p.InboxSplicedData,
    TURN_START: p.TurnStartData,
    STEP_START: p.StepData,
    USER_MESSAGE: UserMessage,
    REQUEST_HEADER: p.RequestHeaderData,
    REQUEST_CONTEXT: p.RequestContextData,
    ASSISTANT_CHUNK: p.AssistantChunkData,
    ASSISTANT_MESSAGE: p.AssistantMessageData,
    TOOL_CALL: p.ToolCallData,
    TOOL_RESULT: p.ToolResultData,
    STEP_END: p.StepData,
    TURN_END: p.TurnEndData,
    LLM_RETRY: p.LlmRetryData,
    LLM_RETRY_STARTED: p.LlmRetryStartedData,
    TODO_WRITE: p.TodoWriteData,
    END_SEED: p.EndSeedData,
}
"""The typed payload model of every known event type."""

KNOWN_EVENT_TYPES: Final = frozenset(EVENT_PAYLOADS)
"""Types this build interprets. Readers refuse others unless marked ``ignorable``."""

KNOWN_EVENT_PREFIXES: Final = ("compaction/", "hook/", "approval/", "tool/code-dispatch")
"""Reference plugin vocabularies whose events this build carries through opaquely."""

_registered_types: set[str] = set()


def register_event_type(name: str) -> None:
    """Declare a plugin event type, so stored logs that contain it load (readers refuse
    unknown types that are not marked ``ignorable``)."""
    _registered_types.add(name)


def is_known_event_type(name: str) -> bool:
    """Whether readers of this build accept ``name`` without ``ignorable``."""
    return (
        name in KNOWN_EVENT_TYPES
        or name in INTEGRATION_EVENT_TYPES
        or name in _registered_types
        or name.startswith(KNOWN_EVENT_PREFIXES)
    )


_ENVELOPE_KEYS: Final = frozenset(
    {"type", "seq", "time", "data", "surfaceOp", "sourceEventSeqs", "ignorable"}
)
_APPEND_ORDER: Final = ("type", "seq", "time", "data", "sourceEventSeqs", "surfaceOp", "ignorable")
_BASE_ORDER: Final = ("type", "seq", "time", "data")
_BASE_KEYS: Final = frozenset(_BASE_ORDER)


class SessionEvent(BaseModel):
    """One immutable log entry.

    Equality compares the envelope and data. ``to_json()`` returns the wire dict with keys in the
    order the event was written (events appended here use the reference's order:
    ``type, seq, time, data, sourceEventSeqs, surfaceOp``).
    """

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    type: str
    """Event type, e.g. ``turn/start``; plugins may add their own."""
    seq: int
    """Index of the event in its log: 0, 1, 2, ... without gaps."""
    time: int
    """Unix epoch milliseconds when appended (repair events reuse an earlier time)."""
    data: Any
    """The payload: frozen lossless JSON (``FrozenDict``/``FrozenList``/scalars)."""
    surface_op: SurfaceOp | None = None
    """``"append"`` or a replace; present exactly on surface events."""
    source_event_seqs: tuple[int, ...] | None = None
    """Seqs of earlier events this surface event cites as its sources."""
    ignorable: Literal[True] | None = None
    """Readers may skip this event if they do not know its type. Never set by ``append``."""

    _key_order: tuple[str, ...] = PrivateAttr(default=_APPEND_ORDER)

    def __eq__(self, other: object) -> bool:
        """Envelope and data equal; the written key order does not matter."""
        if not isinstance(other, SessionEvent):
            return NotImplemented
        mine, theirs = self.__dict__, other.__dict__
        return all(mine[name] == theirs[name] for name in _FIELD_NAMES)

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild, (self.to_json(),))

    __hash__ = None  # type: ignore[assignment]

    @property
    def payload(self) -> WireModel | None:
        """A typed view of ``data`` for known types, ``None`` for unknown ones.

        Raises ``pydantic.ValidationError`` when a known type's data does not have its shape.
        """
        model = EVENT_PAYLOADS.get(self.type)
        return None if model is None else model.from_json(self.data)

    def to_json(self) -> dict[str, Any]:
        """The wire dict (camelCase keys, written order). ``data`` is shared, not copied."""
        fields = self.__dict__
        order = self._key_order
        if order[:4] == _BASE_ORDER:  # every builder here, and most decoded lines
            out: dict[str, Any] = {
                "type": fields["type"],
                "seq": fields["seq"],
                "time": fields["time"],
                "data": fields["data"],
            }
            rest = order[4:]
        else:
            out, rest = {}, order
        for key in rest:
            if key == "surfaceOp":
                op = fields["surface_op"]
                if op is not None:
                    out["surfaceOp"] = op if isinstance(op, str) else op.to_json()
            elif key == "sourceEventSeqs":
                sources = fields["source_event_seqs"]
                if sources is not None:
                    out["sourceEventSeqs"] = list(sources)
            elif key == "ignorable":
                if fields["ignorable"]:
                    out["ignorable"] = True
            elif key in _BASE_KEYS:
                out[key] = fields[key]
        return out

    def encode(self) -> bytes:
        """The compact JSON line (without newline) the reference writes for this event."""
        return encode_json(self.to_json())

    @classmethod
    def from_json(cls, value: Mapping[str, Any]) -> SessionEvent:
        """Validate a wire dict and build the event, keeping its key order.

        Raises :class:`SessionEventError` for a bad envelope (naming the problem) and
        :class:`session.errors.JsonValueError` (a ``TypeError``) when ``data`` is not lossless
        JSON. Numbers are read as JavaScript reads them (see ``snapshot(js_numbers=True)``).
        """
        problem = envelope_problem(value)
        if problem is not None:
            raise SessionEventError(f"invalid event envelope: {problem}")
        event_type, seq = value["type"], value["seq"]
        data = snapshot(value["data"], "data", js_numbers=True)
        surface_op, sources = parse_surface_metadata(
            event_type, seq, value.get("surfaceOp"), value.get("sourceEventSeqs")
        )
        return build_event(
            event_type,
            seq,
            value["time"],
            data,
            surface_op,
            sources,
            value.get("ignorable"),
            tuple(value),
        )

    @classmethod
    def decode(cls, line: bytes | str) -> SessionEvent:
        """Parse one JSON line into an event (see :meth:`from_json`)."""
        value = decode_json(line)
        if not isinstance(value, dict):
            raise SessionEventError("invalid event envelope: the line is not a JSON object")
        return cls.from_json(value)


_new = object.__new__
_set = object.__setattr__
_copy_template = {
    "type": "",
    "seq": 0,
    "time": 0,
    "data": None,
    "surface_op": None,
    "source_event_seqs": None,
    "ignorable": None,
    "_key_order": _APPEND_ORDER,
}.copy
"""A new instance dict with every field in place (copying a dict is cheaper than building it)."""


def build_event(
    type: str,
    seq: int,
    time: int,
    data: JsonValue,
    surface_op: SurfaceOp | None = None,
    source_event_seqs: tuple[int, ...] | None = None,
    ignorable: Literal[True] | None = None,
    key_order: tuple[str, ...] = _APPEND_ORDER,
) -> SessionEvent:
    """Build an event from values that are already validated and frozen (the hot path).

    Skips pydantic validation, which would cost several microseconds per event; every caller
    validates first (``Session.append``, ``SessionEvent.from_json``, the seed checks).
    """
    fields = _copy_template()
    fields["type"] = type
    fields["seq"] = seq
    fields["time"] = time
    fields["data"] = data
    if surface_op is not None:
        fields["surface_op"] = surface_op
    if source_event_seqs is not None:
        fields["source_event_seqs"] = source_event_seqs
    if ignorable is not None:
        fields["ignorable"] = ignorable
    if key_order is not _APPEND_ORDER:
        fields["_key_order"] = key_order
    event = _new(SessionEvent)
    # Only the instance dict is set: the key order lives there too, which pydantic's normal
    # attribute lookup finds before its private-attribute machinery (a 3x cheaper build).
    _set(event, "__dict__", fields)
    _untrack(fields)  # an event holds frozen JSON and scalars: never part of a cycle
    _untrack(event)
    return event


def with_data(event: SessionEvent, data: JsonValue) -> SessionEvent:
    """``event`` with ``data`` (frozen and validated already) in place of its own: the same
    envelope, surface fields and written key order."""
    return build_event(
        event.type,
        event.seq,
        event.time,
        data,
        event.surface_op,
        event.source_event_seqs,
        event.ignorable,
        event._key_order,
    )


def build_plain_events(
    type: str,
    seq0: int,
    times: Iterable[int],
    datas: Iterable[JsonValue],
    key_order: tuple[str, ...] = _APPEND_ORDER,
) -> list[SessionEvent]:
    """Events of one type without surface metadata, with seqs ``seq0, seq0 + 1, ...`` and the
    given times and frozen data (zipped; the shorter ends the list). Like :func:`build_event`,
    for values already validated (a packed chunk row's members: the cold-load hot path)."""
    template = _copy_template()
    template["type"] = type
    template["_key_order"] = key_order
    copy = template.copy
    events: list[SessionEvent] = []
    append = events.append
    for seq, time, data in zip(itertools.count(seq0), times, datas):
        fields = copy()
        fields["seq"] = seq
        fields["time"] = time
        fields["data"] = data
        event = _new(SessionEvent)
        _set(event, "__dict__", fields)
        append(event)
    return events


_FIELD_NAMES: Final = tuple(SessionEvent.model_fields)


def _rebuild(wire: Mapping[str, Any]) -> SessionEvent:
    return SessionEvent.from_json(wire)


def envelope_problem(value: Any) -> str | None:
    """What is wrong with a raw event's envelope, or ``None`` when it is well formed: a JSON
    object of the envelope keys only, a string ``type``, a non-negative safe-integer ``seq``, a
    safe-integer ``time``, ``data`` present, and ``ignorable`` absent or literally ``true``.

    Surface rules (which types carry ``surfaceOp``) are checked separately, by the surface.
    """
    if not isinstance(value, Mapping):
        return "an event must be a JSON object"
    extra = [k for k in value if k not in _ENVELOPE_KEYS]
    if extra:
        return f"unexpected key {extra[0]!r}"
    if not isinstance(value.get("type"), str):
        return "type must be a string"
    seq = value.get("seq")
    if not is_safe_int(seq) or seq < 0:
        return "seq must be a non-negative safe integer"
    if not is_safe_int(value.get("time")):
        return "time must be a safe integer"
    if "data" not in value:
        return "data is missing"
    if "ignorable" in value and value["ignorable"] is not True:
        return "ignorable must be the literal true when present"
    return None
