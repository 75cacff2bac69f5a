"""Streamed text and reasoning deltas read back lazily: a run of consecutive
``assistant/chunk`` rows of the plain delta shape is checked column by column as it is read
and handed to the service as one :class:`session.events.eventlog.LazyRun`, built into
events only when somebody reads them (as the JSONL backend hands over its packed rows).
Every other row stays a wire dict for the service to validate."""

from __future__ import annotations

import functools
import itertools
from collections.abc import Mapping, Sequence
from typing import Any, Final

from agent_session.session.events.event import build_plain_events
from agent_session.session.events.eventlog import EventLog, LazyRun
from agent_session.session.events.types import ASSISTANT_CHUNK
from agent_session.session.json.lossless import MAX_SAFE_INTEGER, FrozenDict, is_safe_int

__all__ = ["with_lazy_runs"]

_MIN_RUN: Final = 3
_ENVELOPE: Final = ("type", "seq", "time", "data")
_DATA: Final = ("turn", "step", "chunk")
_CHUNK: Final = ("type", "index", "text")
_DELTAS: Final = ("text-delta", "reasoning-delta")
_SAFE: Final = MAX_SAFE_INTEGER


def _member(event: Mapping[str, Any]) -> tuple[Any, ...] | None:
    """What a run's members share (delta kind, turn, step, index), or ``None`` when the
    event is not a plain delta whose value a lazy member reproduces exactly."""
    if event["type"] != ASSISTANT_CHUNK or tuple(event) != _ENVELOPE:
        return None
    data = event["data"]
    if type(data) is not dict or tuple(data) != _DATA:
        return None
    chunk = data["chunk"]
    if type(chunk) is not dict or tuple(chunk) != _CHUNK:
        return None
    kind, index, text = chunk.values()
    turn, step, time = data["turn"], data["step"], event["time"]
    if (
        kind not in _DELTAS
        or type(text) is not str
        or type(turn) is not int
        or type(step) is not int
        or type(index) is not int
        or not -_SAFE <= turn <= _SAFE
        or not -_SAFE <= step <= _SAFE
        or not -_SAFE <= index <= _SAFE
        or not is_safe_int(time)
    ):
        return None
    return (kind, turn, step, index)


def _run(events: Sequence[Mapping[str, Any]], key: tuple[Any, ...]) -> LazyRun:
    seq0 = events[0]["seq"]
    times = [event["time"] for event in events]
    texts = [event["data"]["chunk"]["text"] for event in events]
    build = functools.partial(_members, key, seq0, times, texts)
    return LazyRun(ASSISTANT_CHUNK, seq0, len(events), build, times[0])


def _members(key: tuple[Any, ...], seq0: int, times: list[int], texts: list[str]) -> list[Any]:
    kind, turn, step, index = key
    datas = [
        FrozenDict(turn=turn, step=step, chunk=FrozenDict(type=kind, index=index, text=text))
        for text in texts
    ]
    return build_plain_events(ASSISTANT_CHUNK, seq0, times, datas, _ENVELOPE)


def with_lazy_runs(events: list[dict[str, Any]]) -> Sequence[Any]:
    """``events`` (contiguous wire dicts from seq 0) with every maximal run of three or more
    plain deltas of one kind, turn, step and index replaced by a :class:`LazyRun`."""
    parts: list[Sequence[Any]] = []
    plain_from = 0
    index = 0
    while index < len(events):
        key = _member(events[index])
        end = index + 1
        if key is not None:
            while end < len(events) and _member(events[end]) == key:
                end += 1
        if key is None or end - index < _MIN_RUN:
            index = end
            continue
        parts.append(events[plain_from:index])
        parts.append(_run(events[index:end], key))
        plain_from = index = end
    if not parts:
        return events
    parts.append(events[plain_from:])
    return EventLog(itertools.chain(parts))
