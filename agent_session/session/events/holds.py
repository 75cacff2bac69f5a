"""Legal holds as a log records them (``hold/set``, ``hold/released``): which stand, read
from events or leniently from stored bytes, and the refusal every delete path raises. Placing
and releasing them is ``agent_session.governance.holds``'s."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from agent_session.session.errors import SessionHeldError
from agent_session.session.events.eventlog import is_run, iter_parts
from agent_session.session.events.types import HOLD_RELEASED, HOLD_SET

__all__ = ["Hold", "check_not_held", "holds_in_lines", "records_in_lines", "standing_holds"]


@dataclass(frozen=True, slots=True)
class Hold:
    """A hold that stands: placed by the ``hold/set`` event at ``seq``."""

    seq: int
    reason: str
    time: int
    by: str | None = None

    def named(self) -> str:
        """How messages name it."""
        by = f" by {self.by}" if self.by else ""
        return f"hold at seq {self.seq}{by}: {self.reason!r}"


def _fold(records: Iterable[tuple[str, int, int, Mapping[str, Any]]]) -> list[Hold]:
    standing: dict[int, Hold] = {}
    for kind, seq, time, data in records:
        if kind == HOLD_SET:
            by = data.get("by")
            standing[seq] = Hold(seq, str(data.get("reason", "")), time, by if by else None)
        elif kind == HOLD_RELEASED:
            released = data.get("holds")
            for held in released if isinstance(released, list) else []:
                if isinstance(held, int):
                    standing.pop(held, None)
    return sorted(standing.values(), key=lambda hold: hold.seq)


def standing_holds(events: Iterable[Any]) -> list[Hold]:
    """The holds that stand at the end of a log (its events)."""

    def records() -> Iterable[tuple[str, int, int, Mapping[str, Any]]]:
        for event in iter_parts(events):
            if not is_run(event) and event.type in (HOLD_SET, HOLD_RELEASED):
                yield event.type, event.seq, event.time, event.data

    return _fold(records())


def records_in_lines(
    content: bytes, types: Collection[str]
) -> Iterator[tuple[str, int, int, Mapping[str, Any]]]:
    """``(type, seq, time, data)`` of each stored line of ``types`` in a log's JSONL text
    (``read_raw``), each line read on its own: a line that does not parse is skipped (it
    cannot be a record the store kept whole)."""
    marks = [f'"{kind}"'.encode() for kind in types]
    for line in content.split(b"\n")[1:]:
        if not any(mark in line for mark in marks):
            continue
        try:
            value = orjson.loads(line)
        except orjson.JSONDecodeError:
            continue
        if not isinstance(value, dict) or not isinstance(value.get("data"), dict):
            continue
        kind, seq, time = value.get("type"), value.get("seq"), value.get("time")
        if isinstance(kind, str) and kind in types and isinstance(seq, int):
            yield kind, seq, time if isinstance(time, int) else 0, value["data"]


def holds_in_lines(content: bytes) -> list[Hold]:
    """The holds that stand in a log's stored JSONL text (:func:`records_in_lines`)."""
    return _fold(records_in_lines(content, (HOLD_SET, HOLD_RELEASED)))


def check_not_held(holds: Sequence[Hold], id: str) -> None:
    """Refuse a delete while ``holds`` stand.

    Raises:
        SessionHeldError: Naming every standing hold.
    """
    if holds:
        named = "; ".join(hold.named() for hold in holds)
        raise SessionHeldError(
            f'session "{id}" is under legal hold ({named}): release it first '
            "(agent-session release); nothing was deleted"
        )
