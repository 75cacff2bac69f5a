"""Packed chunk rows (persistence semantics §7): runs of three or more streaming deltas are
stored as one row; reading expands them back to the exact ``assistant/chunk`` events.

Packing is only an encoding: every chunk event keeps its seq and time.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from typing import Any, Final

from session.codec import encode_json
from session.events import ASSISTANT_CHUNK, SessionEvent, build_event
from session.lossless import MAX_SAFE_INTEGER, FrozenDict, JsFloat, is_safe_int, snapshot

__all__ = ["ROW_TYPES", "BatchEncoder", "MalformedRowError", "encode_batch", "expand_row"]

ROW_TYPES: Final = {
    "text-delta": "text-chunks",
    "reasoning-delta": "reasoning-chunks",
    "tool-call-delta": "tool-call-chunks",
}
_ROW_TO_DELTA: Final = {row: delta for delta, row in ROW_TYPES.items()}
_MIN_RUN: Final = 3
_TEXT_KEYS: Final = ("type", "index", "text")
_TOOL_KEYS: Final = ("type", "index", "id", "argumentsDelta")
_TOOL_NAMED_KEYS: Final = ("type", "index", "id", "name", "argumentsDelta")


class MalformedRowError(ValueError):
    """A packed row does not have the shape the reference writes."""


_PLAIN_MAPS = (dict, FrozenDict)


def _number(value: object) -> bool:
    kind = type(value)
    return kind is int or kind is float or kind is JsFloat


def _run_key(event: SessionEvent) -> tuple[Any, ...] | None:
    """What a run's members share, or ``None`` if the event cannot be packed."""
    fields = event.__dict__
    if (
        fields["type"] != ASSISTANT_CHUNK
        or fields["surface_op"] is not None
        or fields["source_event_seqs"] is not None
        or fields["ignorable"] is not None
    ):
        return None
    data = fields["data"]
    if type(data) not in _PLAIN_MAPS or len(data) != 3:
        return None
    keys = iter(data)
    if next(keys) != "turn" or next(keys) != "step" or next(keys) != "chunk":
        return None
    chunk = data["chunk"]
    if type(chunk) not in _PLAIN_MAPS or not _number(data["turn"]) or not _number(data["step"]):
        return None
    kind = chunk.get("type")
    if not _number(chunk.get("index")):
        return None
    if kind == "text-delta" or kind == "reasoning-delta":
        if len(chunk) != 3 or tuple(chunk) != _TEXT_KEYS or type(chunk["text"]) is not str:
            return None
        return (kind, data["turn"], data["step"], chunk["index"])
    if kind == "tool-call-delta":
        keys_of = tuple(chunk)
        if keys_of != _TOOL_KEYS and keys_of != _TOOL_NAMED_KEYS:
            return None
        if type(chunk["id"]) is not str or type(chunk["argumentsDelta"]) is not str:
            return None
        if "name" in chunk and type(chunk["name"]) is not str:
            return None
        name = ("name", chunk["name"]) if "name" in chunk else ()
        return (kind, data["turn"], data["step"], chunk["index"], chunk["id"], name)
    return None


def _prepare(event: SessionEvent, pack: bool) -> tuple[Any, Any]:
    """An event's ``(run key, payload)``: ``(None, its line)`` for an event written verbatim,
    ``(key, its text or arguments delta)`` for a delta that may join a packed row."""
    key = _run_key(event) if pack else None
    if key is None:
        return None, event.encode()
    chunk = event.__dict__["data"]["chunk"]
    return key, chunk["argumentsDelta" if key[0] == "tool-call-delta" else "text"]


def _encode_columns(
    events: Sequence[SessionEvent], keys: Sequence[Any], payloads: Sequence[Any]
) -> bytes:
    """Join a batch's lines from its events and their prepared keys and payloads (parallel
    columns); a run of three or more events with one key that continue each other
    (consecutive seqs, a safe time step) becomes one packed row."""
    lines: list[bytes] = []
    count = len(events)
    index = 0
    while index < count:
        key = keys[index]
        if key is None:
            lines.append(payloads[index])
            index += 1
            continue
        event = events[index]
        end = index + 1
        seq, time = event.seq, event.time
        while end < count and keys[end] == key:
            following = events[end]
            step = following.time - time
            if following.seq != seq + 1 or not -MAX_SAFE_INTEGER <= step <= MAX_SAFE_INTEGER:
                break
            seq, time = following.seq, following.time
            end += 1
        if end - index >= _MIN_RUN:
            lines.append(encode_json(_row(events[index:end], payloads[index:end])))
        else:
            lines.extend(e.encode() for e in events[index:end])
        index = end
    lines.append(b"")
    return b"\n".join(lines)


def _row(run: Sequence[SessionEvent], payloads: Sequence[Any]) -> dict[str, Any]:
    first = run[0]
    chunk = first.data["chunk"]
    kind = chunk["type"]
    times = [e.time for e in run]
    data: dict[str, Any] = {
        "turn": first.data["turn"],
        "step": first.data["step"],
        "index": chunk["index"],
        "dt": [b - a for a, b in itertools.pairwise(times)],
    }
    if kind == "tool-call-delta":
        data["id"] = chunk["id"]
        if "name" in chunk:
            data["name"] = chunk["name"]
        data["args"] = list(payloads)
    else:
        data["texts"] = list(payloads)
    return {"type": ROW_TYPES[kind], "seq0": first.seq, "time0": first.time, "data": data}


def encode_batch(events: Sequence[SessionEvent], pack: bool) -> bytes:
    """The bytes appended for one batch: one line per event or packed row, each ending in
    ``\\n``. With ``pack``, runs of three or more eligible deltas become one row."""
    keys: list[Any] = []
    payloads: list[Any] = []
    for event in events:
        key, payload = _prepare(event, pack)
        keys.append(key)
        payloads.append(payload)
    return _encode_columns(events, keys, payloads)


class BatchEncoder:
    """Encodes a session's events as they are committed, so that writing a batch later only
    joins prepared lines (and packs runs). :meth:`encode` returns exactly
    ``encode_batch(events, pack)`` for any batch, prepared or not, in any split.

    Prepared work is kept in flat lists (no container per event, which would add to the
    cyclic GC's work) until a batch reaching that far is encoded, or :meth:`clear`.
    """

    __slots__ = ("_events", "_first", "_keys", "_payloads", "pack")

    def __init__(self, pack: bool) -> None:
        self.pack = pack
        self._first = 0  # seq of _events[0]
        self._events: list[SessionEvent] = []
        self._keys: list[Any] = []
        self._payloads: list[Any] = []

    def prepare(self, event: SessionEvent) -> None:
        """Do the per-event encoding work for ``event`` now (events come in seq order)."""
        if not self._events or event.seq != self._first + len(self._events):
            self.clear()
            self._first = event.seq
        key, payload = _prepare(event, self.pack)
        self._events.append(event)
        self._keys.append(key)
        self._payloads.append(payload)

    def encode(self, events: Sequence[SessionEvent]) -> bytes:
        """The batch's bytes; prepared work up to its last event is used and released."""
        if not events:
            return b""
        prepared, keys, payloads, pack = self._events, self._keys, self._payloads, self.pack
        offset = events[0].seq - self._first
        if (
            offset == 0
            and len(events) == len(prepared)
            and events[0] is prepared[0]
            and events[-1] is prepared[-1]
        ):
            # The common case: the batch is exactly what was prepared (one session's events,
            # contiguous by seq, so equal ends mean equal members).
            data = _encode_columns(prepared, keys, payloads)
            self._events, self._keys, self._payloads = [], [], []
            return data
        batch_keys: list[Any] = []
        batch_payloads: list[Any] = []
        for position, event in enumerate(events, offset):
            if 0 <= position < len(prepared) and prepared[position] is event:
                key, payload = keys[position], payloads[position]
            else:
                key, payload = _prepare(event, pack)
            batch_keys.append(key)
            batch_payloads.append(payload)
        used = offset + len(events)
        if used >= len(prepared):
            self.clear()
        elif used > 0:
            del prepared[:used], keys[:used], payloads[:used]
            self._first += used
        return _encode_columns(events, batch_keys, batch_payloads)

    def clear(self) -> None:
        """Drop everything prepared."""
        self._events.clear()
        self._keys.clear()
        self._payloads.clear()

    def __len__(self) -> int:
        return len(self._events)


def expand_row(raw: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The ``assistant/chunk`` wire events a packed row stands for. Raises
    :class:`MalformedRowError` naming what is wrong."""
    return [e.to_json() for e in expand_row_events(raw)]


def expand_row_events(raw: Mapping[str, Any]) -> list[SessionEvent]:
    """The ``assistant/chunk`` events a packed row stands for, built frozen directly (the row's
    shape is checked here, so their data needs no further walk)."""
    tag = raw.get("type")
    delta = _ROW_TO_DELTA[str(tag)]

    def bad(why: str) -> MalformedRowError:
        return MalformedRowError(f"malformed {tag} storage row: {why}")

    if tuple(sorted(raw)) != ("data", "seq0", "time0", "type"):
        raise bad("unexpected envelope keys")
    seq0, time0, data = raw["seq0"], raw["time0"], raw["data"]
    if not is_safe_int(seq0) or seq0 < 0 or not is_safe_int(time0):
        raise bad("seq0 and time0 must be safe integers")
    payload_key = "args" if delta == "tool-call-delta" else "texts"
    expected = {"turn", "step", "index", "dt", payload_key}
    if not isinstance(data, Mapping):
        raise bad("data must be an object")
    if delta == "tool-call-delta":
        expected.add("id")
        if "name" in data:
            expected.add("name")
    if set(data) != expected:
        raise bad("unexpected data keys")
    if not all(_number(data[k]) for k in ("turn", "step", "index")):
        raise bad("turn, step and index must be numbers")
    payload, dt = data[payload_key], data["dt"]
    if not isinstance(payload, list) or not payload or not all(isinstance(p, str) for p in payload):
        raise bad(f"{payload_key} must be a non-empty array of strings")
    if (
        not isinstance(dt, list)
        or len(dt) != len(payload) - 1
        or not all(is_safe_int(d) for d in dt)
    ):
        raise bad("dt must hold one safe integer per member after the first")
    if delta == "tool-call-delta" and (
        not isinstance(data["id"], str) or ("name" in data and not isinstance(data["name"], str))
    ):
        raise bad("id and name must be strings")
    if not is_safe_int(seq0 + len(payload) - 1):
        raise bad("seq out of the safe-integer range")
    turn, step, index = (
        snapshot(data[k], "row", js_numbers=True) for k in ("turn", "step", "index")
    )
    if not all(_valid_text(p) for p in payload):
        raise bad(f"{payload_key} must be valid text")
    events: list[SessionEvent] = []
    time = time0
    for k, text in enumerate(payload):
        if k:
            time += dt[k - 1]
            if not is_safe_int(time):
                raise bad("time out of the safe-integer range")
        if delta == "tool-call-delta":
            chunk = FrozenDict(type=delta, index=index, id=data["id"])
            if "name" in data:
                dict.__setitem__(chunk, "name", data["name"])
            dict.__setitem__(chunk, "argumentsDelta", text)
        else:
            chunk = FrozenDict(type=delta, index=index, text=text)
        data_k = FrozenDict(turn=turn, step=step, chunk=chunk)
        events.append(build_event(ASSISTANT_CHUNK, seq0 + k, time, data_k, key_order=_MEMBER_ORDER))
    return events


_MEMBER_ORDER: Final = ("type", "seq", "time", "data")


def _valid_text(text: str) -> bool:
    if text.isascii():
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
