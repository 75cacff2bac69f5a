"""Packed chunk rows: runs of three or more streaming deltas are stored as one row (the
reference's storage compaction, byte for byte); reading expands them back to the exact
``assistant/chunk`` events.

Packing is only an encoding: every chunk event keeps its seq and time. A live session's
batches are packed as its events arrive (:mod:`persistence_jsonl.encoder`).
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable, Mapping
from typing import Any, Final

from agent_session.session.events.event import SessionEvent, build_plain_events
from agent_session.session.events.eventlog import LazyRun
from agent_session.session.events.livelog import DELTA_KEYS
from agent_session.session.events.types import ASSISTANT_CHUNK
from agent_session.session.json.lossless import (
    MAX_SAFE_INTEGER,
    FrozenDict,
    JsFloat,
    is_safe_int,
    is_text,
    snapshot,
)

__all__ = [
    "MIN_RUN",
    "ROW_TYPES",
    "MalformedRowError",
    "delta_head",
    "lazy_row_events",
    "packed_row",
    "run_head",
    "run_key",
]

ROW_TYPES: Final = {
    "text-delta": "text-chunks",
    "reasoning-delta": "reasoning-chunks",
    "tool-call-delta": "tool-call-chunks",
}
_ROW_TO_DELTA: Final = {row: delta for delta, row in ROW_TYPES.items()}
MIN_RUN: Final = 3
_CHUNK_DATA_KEYS: Final = ("turn", "step", "chunk")
_TOOL_KEYS: Final = ("type", "index", "id", "argumentsDelta")
_TOOL_NAMED_KEYS: Final = ("type", "index", "id", "name", "argumentsDelta")


class MalformedRowError(ValueError):
    """A packed row does not have the shape the reference writes."""


_PLAIN_MAPS: Final = (dict, FrozenDict)
_NUMBERS: Final = (int, float, JsFloat)


def run_key(event: SessionEvent) -> tuple[Any, ...] | None:
    """What a run's members share, or ``None`` if the event cannot be packed. (Called for
    every event a live session commits: written to do few calls.)"""
    fields = event.__dict__
    if fields["type"] != ASSISTANT_CHUNK:
        return None
    data = fields["data"]
    if type(data) not in _PLAIN_MAPS or tuple(data) != _CHUNK_DATA_KEYS:
        return None
    chunk = data["chunk"]
    if (
        type(chunk) not in _PLAIN_MAPS
        or fields["surface_op"] is not None
        or fields["source_event_seqs"] is not None
        or fields["ignorable"] is not None
    ):
        return None
    turn, step = data["turn"], data["step"]
    shape = tuple(chunk)
    if shape == DELTA_KEYS:
        kind, index, text = chunk.values()
        if (kind != "text-delta" and kind != "reasoning-delta") or type(text) is not str:
            return None
        key: tuple[Any, ...] = (kind, turn, step, index)
    elif shape in (_TOOL_KEYS, _TOOL_NAMED_KEYS):
        kind, index, id = chunk["type"], chunk["index"], chunk["id"]
        if (
            kind != "tool-call-delta"
            or type(id) is not str
            or type(chunk["argumentsDelta"]) is not str
        ):
            return None
        if shape == _TOOL_NAMED_KEYS:
            name = chunk["name"]
            if type(name) is not str:
                return None
            key = (kind, turn, step, index, id, ("name", name))
        else:
            key = (kind, turn, step, index, id, ())
    else:
        return None
    if type(turn) not in _NUMBERS or type(step) not in _NUMBERS or type(index) not in _NUMBERS:
        return None
    return key


def run_head(first: SessionEvent) -> dict[str, Any]:
    """What a packed row keeps of its run's first member (see :func:`packed_row`)."""
    data = first.data
    chunk = data["chunk"]
    head = delta_head(
        chunk["type"], data["turn"], data["step"], chunk["index"], first.seq, first.time
    )
    if head["kind"] == "tool-call-delta":
        head["id"] = chunk["id"]
        if "name" in chunk:
            head["name"] = chunk["name"]
    return head


def delta_head(
    kind: str, turn: Any, step: Any, index: Any, seq0: int, time0: int
) -> dict[str, Any]:
    """:func:`run_head` of a run whose first member has these values (a tool-call delta's
    head adds its ``id`` and ``name``)."""
    return {"kind": kind, "turn": turn, "step": step, "index": index, "seq0": seq0, "time0": time0}


def packed_row(head: Mapping[str, Any], dts: list[int], payloads: list[str]) -> dict[str, Any]:
    """The packed row of a run: its first member's :func:`run_head`, the time steps after
    it, every payload."""
    kind = head["kind"]
    row: dict[str, Any] = {
        "turn": head["turn"],
        "step": head["step"],
        "index": head["index"],
        "dt": dts,
    }
    if kind == "tool-call-delta":
        row["id"] = head["id"]
        if "name" in head:
            row["name"] = head["name"]
        row["args"] = payloads
    else:
        row["texts"] = payloads
    return {"type": ROW_TYPES[kind], "seq0": head["seq0"], "time0": head["time0"], "data": row}


def lazy_row_events(raw: Mapping[str, Any]) -> LazyRun:
    """Check a packed row completely, now, and return its members as a :class:`LazyRun`
    (built on first read). Raises :class:`MalformedRowError` naming what is wrong. The row's
    lists are used as they are: pass a row nobody else changes (one just decoded)."""
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
    if not all(type(data[k]) in _NUMBERS for k in ("turn", "step", "index")):
        raise bad("turn, step and index must be numbers")
    payload, dt = data[payload_key], data["dt"]
    # The member checks run over whole columns in C (map, min, sum): this is the cold-load
    # hot path, at up to hundreds of thousands of members per row.
    strings = f"{payload_key} must be a non-empty array of strings"
    if not isinstance(payload, list) or not payload:
        raise bad(strings)
    try:
        ascii = "".join(payload).isascii()  # join raises TypeError for a non-string
    except TypeError:
        raise bad(strings) from None
    if not ascii and not all(map(isinstance, payload, itertools.repeat(str))):
        raise bad(strings)
    steps = "dt must hold one safe integer per member after the first"
    if not isinstance(dt, list) or len(dt) != len(payload) - 1:
        raise bad(steps)
    if dt and set(map(type, dt)) != {int}:
        raise bad(steps)
    if delta == "tool-call-delta" and (
        not isinstance(data["id"], str) or ("name" in data and not isinstance(data["name"], str))
    ):
        raise bad("id and name must be strings")
    if not is_safe_int(seq0 + len(payload) - 1):
        raise bad("seq out of the safe-integer range")
    turn, step, index = (
        snapshot(data[k], "row", js_numbers=True) for k in ("turn", "step", "index")
    )
    if not ascii and not all(map(is_text, payload)):
        raise bad(f"{payload_key} must be valid text")
    _check_times(time0, dt, bad)
    if delta == "tool-call-delta":
        name = data.get("name", _NO_NAME)
        build = functools.partial(
            _tool_members, seq0, time0, dt, payload, turn, step, index, data["id"], name
        )
    else:
        build = functools.partial(_text_members, delta, seq0, time0, dt, payload, turn, step, index)
    return LazyRun(ASSISTANT_CHUNK, seq0, len(payload), build, time0)


def _check_times(time0: int, dt: list[int], bad: Callable[[str], MalformedRowError]) -> None:
    """Every step and every member's time must be a safe integer (``dt`` holds ints)."""
    if not dt:
        return
    low = min(dt)
    if low >= 0:
        total = sum(dt)
        if total <= MAX_SAFE_INTEGER and time0 + total <= MAX_SAFE_INTEGER:
            return  # no step goes back (the usual case): every step and time lies in range
    if not _safe_range(low, max(dt)):
        raise bad("dt must hold one safe integer per member after the first")
    lowest = min(itertools.accumulate(dt, initial=time0))
    if not _safe_range(lowest, max(itertools.accumulate(dt, initial=time0))):
        raise bad("time out of the safe-integer range")


_NO_NAME: Final = object()


def _text_members(
    delta: str,
    seq0: int,
    time0: int,
    dt: list[int],
    texts: list[str],
    turn: Any,
    step: Any,
    index: Any,
) -> list[SessionEvent]:
    datas = [
        FrozenDict(turn=turn, step=step, chunk=FrozenDict(type=delta, index=index, text=text))
        for text in texts
    ]
    times = itertools.accumulate(dt, initial=time0)
    return build_plain_events(ASSISTANT_CHUNK, seq0, times, datas, _MEMBER_ORDER)


def _tool_members(
    seq0: int,
    time0: int,
    dt: list[int],
    args: list[str],
    turn: Any,
    step: Any,
    index: Any,
    id: str,
    name: Any,
) -> list[SessionEvent]:
    datas = []
    for text in args:
        chunk = FrozenDict(type="tool-call-delta", index=index, id=id)
        if name is not _NO_NAME:
            dict.__setitem__(chunk, "name", name)
        dict.__setitem__(chunk, "argumentsDelta", text)
        datas.append(FrozenDict(turn=turn, step=step, chunk=chunk))
    times = itertools.accumulate(dt, initial=time0)
    return build_plain_events(ASSISTANT_CHUNK, seq0, times, datas, _MEMBER_ORDER)


_MEMBER_ORDER: Final = ("type", "seq", "time", "data")


def _safe_range(low: int, high: int) -> bool:
    return low >= -MAX_SAFE_INTEGER and high <= MAX_SAFE_INTEGER
