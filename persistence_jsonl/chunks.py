"""Packed chunk rows (persistence semantics §7): runs of three or more streaming deltas are
stored as one row; reading expands them back to the exact ``assistant/chunk`` events.

Packing is only an encoding: every chunk event keeps its seq and time.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

from session.codec import encode_json
from session.eventlog import LazyRun
from session.events import ASSISTANT_CHUNK, SessionEvent, build_plain_events
from session.lossless import MAX_SAFE_INTEGER, FrozenDict, JsFloat, is_safe_int, snapshot

__all__ = [
    "ROW_TYPES",
    "BatchEncoder",
    "MalformedRowError",
    "encode_batch",
    "expand_row",
    "expand_row_events",
    "lazy_row_events",
]

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


_PLAIN_MAPS: Final = (dict, FrozenDict)
_NUMBERS: Final = (int, float, JsFloat)


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
    chunk, turn, step = data["chunk"], data["turn"], data["step"]
    if type(chunk) not in _PLAIN_MAPS or type(turn) not in _NUMBERS or type(step) not in _NUMBERS:
        return None
    kind = chunk.get("type")
    index = chunk.get("index")
    if type(index) not in _NUMBERS:
        return None
    if kind == "text-delta" or kind == "reasoning-delta":
        if len(chunk) != 3 or tuple(chunk) != _TEXT_KEYS or type(chunk["text"]) is not str:
            return None
        return (kind, turn, step, index)
    if kind == "tool-call-delta":
        keys_of = tuple(chunk)
        if keys_of != _TOOL_KEYS and keys_of != _TOOL_NAMED_KEYS:
            return None
        if type(chunk["id"]) is not str or type(chunk["argumentsDelta"]) is not str:
            return None
        if "name" in chunk and type(chunk["name"]) is not str:
            return None
        name = ("name", chunk["name"]) if "name" in chunk else ()
        return (kind, turn, step, index, chunk["id"], name)
    return None


def _prepare(event: SessionEvent, pack: bool) -> tuple[Any, Any]:
    """An event's ``(run key, payload)``: ``(None, its line)`` for an event written verbatim,
    ``(key, its text or arguments delta)`` for a delta that may join a packed row."""
    key = _run_key(event) if pack else None
    if key is None:
        return None, event.encode()
    chunk = event.__dict__["data"]["chunk"]
    return key, chunk["argumentsDelta" if key[0] == "tool-call-delta" else "text"]


def _continues(previous: SessionEvent, event: SessionEvent) -> bool:
    """Whether ``event`` may follow ``previous`` in a packed row (their run keys being equal
    and not ``None``): consecutive seqs and a time step a row can store."""
    return (
        event.seq == previous.seq + 1
        and -MAX_SAFE_INTEGER <= event.time - previous.time <= MAX_SAFE_INTEGER
    )


def _emit(
    events: Sequence[SessionEvent], keys: Sequence[Any], payloads: Sequence[Any], lines: list[bytes]
) -> None:
    """Add a batch's lines to ``lines``, from its events and their prepared keys and payloads
    (parallel columns): a run of three or more events with one key, each continuing the one
    before, becomes one packed row. Runs end exactly where :func:`_continues` fails, so the
    lines of a batch are the lines of its parts when it is cut at such a place."""
    count = len(events)
    index = 0
    while index < count:
        key = keys[index]
        if key is None:
            lines.append(payloads[index])
            index += 1
            continue
        end = index + 1
        while end < count and keys[end] == key and _continues(events[end - 1], events[end]):
            end += 1
        if end - index >= _MIN_RUN:
            lines.append(encode_json(_row(events[index:end], payloads[index:end])))
        else:
            lines.extend(e.encode() for e in events[index:end])
        index = end


def _encode_columns(
    events: Sequence[SessionEvent], keys: Sequence[Any], payloads: Sequence[Any]
) -> bytes:
    """The bytes of a batch from its prepared columns (see :func:`_emit`)."""
    lines: list[bytes] = []
    _emit(events, keys, payloads, lines)
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
    joins lines. :meth:`encode` returns exactly ``encode_batch(events, pack)`` for any batch,
    prepared or not, in any split.

    Each event's run key and payload are kept in flat columns (no container per event, which
    would add to the cyclic GC's work); a run is encoded as soon as an event that cannot join
    it arrives, so a checkpoint of what was prepared encodes at most its last, still open run.
    """

    __slots__ = ("_closed", "_events", "_first", "_keys", "_lines", "_payloads", "pack")

    def __init__(self, pack: bool) -> None:
        self.pack = pack
        self._first = 0  # seq of _events[0]
        self._events: list[SessionEvent] = []
        self._keys: list[Any] = []
        self._payloads: list[Any] = []
        self._lines: list[bytes] = []  # the lines of _events[:_closed], a run boundary
        self._closed = 0

    def prepare(self, event: SessionEvent) -> None:
        """Do the per-event encoding work for ``event`` now (events come in seq order)."""
        events, keys = self._events, self._keys
        count = len(events)
        if not count or event.seq != self._first + count:
            self.clear()
            self._first = event.seq
            count = 0
        key, payload = _prepare(event, self.pack)
        if count > self._closed and (
            key is None or key != keys[-1] or not _continues(events[-1], event)
        ):
            self._close(count)  # the open run ends before this event
        events.append(event)
        keys.append(key)
        self._payloads.append(payload)
        if key is None:
            self._lines.append(payload)
            self._closed = count + 1

    def _close(self, end: int) -> None:
        start = self._closed
        _emit(
            self._events[start:end], self._keys[start:end], self._payloads[start:end], self._lines
        )
        self._closed = end

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
            self._close(len(prepared))
            lines = self._lines
            lines.append(b"")
            self._events, self._keys, self._payloads, self._lines = [], [], [], []
            self._closed = 0
            return b"\n".join(lines)
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
            self._lines.clear()  # the remaining events are re-encoded when their run closes
            self._closed = 0
        return _encode_columns(events, batch_keys, batch_payloads)

    def clear(self) -> None:
        """Drop everything prepared."""
        self._events.clear()
        self._keys.clear()
        self._payloads.clear()
        self._lines.clear()
        self._closed = 0

    def __len__(self) -> int:
        return len(self._events)


def expand_row(raw: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The ``assistant/chunk`` wire events a packed row stands for. Raises
    :class:`MalformedRowError` naming what is wrong."""
    return [e.to_json() for e in expand_row_events(raw)]


def expand_row_events(raw: Mapping[str, Any]) -> list[SessionEvent]:
    """The ``assistant/chunk`` events a packed row stands for, built frozen directly (the row's
    shape is checked here, so their data needs no further walk)."""
    return lazy_row_events(raw).events()


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
    if not all(_number(data[k]) for k in ("turn", "step", "index")):
        raise bad("turn, step and index must be numbers")
    payload, dt = data[payload_key], data["dt"]
    # The member checks run over whole columns in C (map, min, sum): this is the cold-load
    # hot path, at up to hundreds of thousands of members per row.
    strings = f"{payload_key} must be a non-empty array of strings"
    if not isinstance(payload, list) or not payload:
        raise bad(strings)
    try:
        ascii = all(map(str.isascii, payload))  # raises TypeError for a non-string
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
    if not ascii and not all(map(_valid_text, payload)):
        raise bad(f"{payload_key} must be valid text")
    _check_times(time0, dt, bad)
    if delta == "tool-call-delta":
        name = data.get("name", _NO_NAME)
        build = functools.partial(
            _tool_members, seq0, time0, dt, payload, turn, step, index, data["id"], name
        )
    else:
        build = functools.partial(_text_members, delta, seq0, time0, dt, payload, turn, step, index)
    return LazyRun(ASSISTANT_CHUNK, seq0, len(payload), build)


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


def _valid_text(text: str) -> bool:
    if text.isascii():
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
