"""Packed chunk rows (persistence semantics §7): runs of three or more streaming deltas are
stored as one row; reading expands them back to the exact ``assistant/chunk`` events.

Packing is only an encoding: every chunk event keeps its seq and time.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Final

from session.codec import encode_json
from session.events import SessionEvent, build_event
from session.lossless import FrozenDict, JsFloat, is_safe_int, snapshot

__all__ = ["ROW_TYPES", "MalformedRowError", "encode_batch", "expand_row"]

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
        fields["type"] != "assistant/chunk"
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


def _runs(events: Sequence[SessionEvent]) -> Iterator[tuple[bool, list[SessionEvent]]]:
    """Split a batch into packable runs (``True``) and single verbatim events (``False``)."""
    index = 0
    while index < len(events):
        key = _run_key(events[index])
        end = index + 1
        if key is not None:
            while (
                end < len(events)
                and events[end].seq == events[end - 1].seq + 1
                and _run_key(events[end]) == key
                and is_safe_int(events[end].time - events[end - 1].time)
            ):
                end += 1
        if key is not None and end - index >= _MIN_RUN:
            yield True, list(events[index:end])
        else:
            for event in events[index:end]:
                yield False, [event]
        index = end


def _row(run: list[SessionEvent]) -> dict[str, Any]:
    first = run[0]
    chunk = first.data["chunk"]
    kind = chunk["type"]
    data: dict[str, Any] = {
        "turn": first.data["turn"],
        "step": first.data["step"],
        "index": chunk["index"],
        "dt": [b.time - a.time for a, b in itertools.pairwise(run)],
    }
    if kind == "tool-call-delta":
        data["id"] = chunk["id"]
        if "name" in chunk:
            data["name"] = chunk["name"]
        data["args"] = [e.data["chunk"]["argumentsDelta"] for e in run]
    else:
        data["texts"] = [e.data["chunk"]["text"] for e in run]
    return {"type": ROW_TYPES[kind], "seq0": first.seq, "time0": first.time, "data": data}


def encode_batch(events: Sequence[SessionEvent], pack: bool) -> bytes:
    """The bytes appended for one batch: one line per event or packed row, each ending in
    ``\\n``. With ``pack``, runs of three or more eligible deltas become one row."""
    lines: list[bytes] = []
    if not pack:
        lines = [event.encode() for event in events]
    else:
        for packed, run in _runs(events):
            lines.append(encode_json(_row(run)) if packed else run[0].encode())
    lines.append(b"")
    return b"\n".join(lines)


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
        events.append(
            build_event("assistant/chunk", seq0 + k, time, data_k, key_order=_MEMBER_ORDER)
        )
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
