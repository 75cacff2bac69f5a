"""The reference's row mapping: a header as ``sessions`` columns, an event as one ``events``
row, and the scan rule that reads a session's rows back into its valid prefix.

Rows are read with ``bytes`` text (the connection's ``text_factory``), so a column holding
invalid UTF-8 is replaced as Node reads it instead of failing the whole query.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any, Final

from agent_session.session import (
    SessionEvent,
    SessionEventError,
    SessionHeader,
    SessionPersistenceCorruptionError,
)
from agent_session.session.events.eventlog import EventLog
from agent_session.session.events.header import SESSION_FORMAT_VERSION, header_problem
from agent_session.session.events.livelog import DeltaRun, delta_data
from agent_session.session.events.types import ASSISTANT_CHUNK, MARKED_IGNORABLE
from agent_session.session.json.codec import decode_json, encode_json

__all__ = [
    "EVENT_COLUMNS",
    "HEADER_COLUMNS",
    "EventRow",
    "batch_values",
    "event_values",
    "header_of",
    "header_values",
    "parsed_row",
    "read_back",
    "render_row",
    "rendered_size",
    "row_line",
    "scan",
]

HEADER_COLUMNS: Final = (
    "id, version, created_at, cwd, parent_session, seed_length, origin, delegation_depth, "
    "agent_preset"
)
"""The ``sessions`` columns that hold the header, in :func:`header_values` order."""
EVENT_COLUMNS: Final = "seq, type, time, data, source_event_seqs, surface_op"
"""The ``events`` columns read back, in :data:`EventRow` order."""

EventRow = tuple[int, bytes, int, bytes, bytes | None, bytes | None]
"""``(seq, type, time, data, source_event_seqs, surface_op)`` as read (text as bytes)."""

_OPTIONAL: Final = (
    ("cwd", 3),
    ("parentSession", 4),
    ("seedLength", 5),
    ("origin", 6),
    ("delegationDepth", 7),
    ("agentPreset", 8),
)


def header_values(header: SessionHeader) -> tuple[Any, ...]:
    """The header's ``sessions`` columns (:data:`HEADER_COLUMNS`); absent fields ``NULL``."""
    wire = header.to_json()
    return (
        header.id,
        header.version,
        header.created_at,
        *(wire.get(key) for key, _ in _OPTIONAL),
    )


def header_of(row: Sequence[Any], where: str) -> SessionHeader:
    """The header a ``sessions`` row (:data:`HEADER_COLUMNS` first) holds; ``NULL`` columns are
    omitted fields, as the reference reads them. The version is not checked here (a header
    of another version is refused as an unsupported format by the reader of the events).

    Raises:
        SessionPersistenceCorruptionError: A column breaks a header rule (naming it).
    """
    value: dict[str, Any] = {"version": row[1], "id": _text(row[0]), "createdAt": row[2]}
    for key, index in _OPTIONAL:
        column = row[index]
        if column is not None:
            value[key] = _text(column) if isinstance(column, bytes) else column
    problem = header_problem(
        {"delegationDepth": 0, **value, "version": SESSION_FORMAT_VERSION}, stored=True
    )
    if problem is not None:
        raise SessionPersistenceCorruptionError(
            f'stored session "{value["id"]}" header {problem} ({where})'
        )
    return SessionHeader.model_validate({"delegationDepth": None, **value})


def event_values(id: str, event: SessionEvent) -> tuple[Any, ...]:
    """The ``events`` row of ``event``: ``data`` (and the two surface columns) as the same
    JSON text the event's JSONL line holds.

    Raises:
        SessionEventError: The event is marked ``ignorable``, which this format has no column
            for (nothing is written); a type of :data:`MARKED_IGNORABLE` drops the mark,
            which its rows give back when read.
    """
    wire = event.to_json()
    if "ignorable" in wire and event.type not in MARKED_IGNORABLE:
        raise SessionEventError(
            f'event seq {event.seq} ("{event.type}") of session "{id}" is marked ignorable, '
            "which the SQLite session format cannot store; keep this session in a JSONL store"
        )
    sources = wire.get("sourceEventSeqs")
    op = wire.get("surfaceOp")
    return (
        id,
        event.seq,
        event.type,
        event.time,
        encode_json(wire["data"]).decode(),
        None if sources is None else encode_json(sources).decode(),
        None if op is None else encode_json(op).decode(),
    )


def batch_values(id: str, events: Sequence[SessionEvent]) -> list[tuple[Any, ...]]:
    """The ``events`` rows of a batch (:func:`event_values` of each event), a live run of
    streamed deltas made from its columns without building its events."""
    rows: list[tuple[Any, ...]] = []
    for part in events.parts if isinstance(events, EventLog) else (events,):
        if type(part) is not DeltaRun:
            rows.extend(event_values(id, event) for event in part)
            continue
        run = part.source
        turn, step, kind, index = run.turn, run.step, run.kind, run.index
        for seq, time, text in zip(itertools.count(part.seq0), part.times(), part.texts()):
            data = encode_json(delta_data(turn, step, text, index, kind)).decode()
            rows.append((id, seq, ASSISTANT_CHUNK, time, data, None, None))
    return rows


def row_line(id: str, event: SessionEvent, line: bytes | None = None) -> bytes:
    """The line :func:`render_row` makes of the row :func:`event_values` writes of
    ``event`` (what ``read_raw`` returns for it once written). ``line``, the event's JSONL
    line when the caller has it, is that line itself when it has the row's keys in the
    row's order (type, seq, time, data, then surfaceOp: no ``sourceEventSeqs``)."""
    if line is not None and event.source_event_seqs is None:
        head = b'{"type":%s,"seq":%d,"time":%d,"data":' % (
            encode_json(event.type),
            event.seq,
            event.time,
        )
        if line.startswith(head):
            return line
    _, seq, kind, time, data, sources, op = event_values(id, event)
    return render_row((seq, kind.encode(), time, data.encode(), _utf8(sources), _utf8(op)))


def read_back(values: tuple[Any, ...]) -> dict[str, Any]:
    """The wire dict a row written as ``values`` (:func:`event_values`) reads back as."""
    _, seq, kind, time, data, sources, op = values
    row: EventRow = (seq, kind.encode(), time, data.encode(), _utf8(sources), _utf8(op))
    event = parsed_row(row)
    assert event is not None  # what event_values wrote always parses
    return event


def _utf8(text: str | None) -> bytes | None:
    return None if text is None else text.encode()


def parsed_row(row: EventRow) -> dict[str, Any] | None:
    """The wire dict of a row, in the reference's key order; ``None`` when a JSON column does
    not parse (the reference's "hole")."""
    seq, kind, time, data, sources, op = row
    try:
        event = {
            "type": kind.decode("utf-8", "replace"),
            "seq": seq,
            "time": time,
            "data": decode_json(data),
        }
        if sources is not None:
            event["sourceEventSeqs"] = decode_json(sources)
        if op is not None:
            event["surfaceOp"] = decode_json(op)
        if event["type"] in MARKED_IGNORABLE:
            event["ignorable"] = True
    except ValueError:
        return None
    return event


def scan(rows: Sequence[EventRow]) -> tuple[list[dict[str, Any]], int | None]:
    """The reference's scan rule over one session's rows (ordered by seq): the preserved
    prefix, and the seq a torn tail starts at (``None`` when there is none).

    A row that does not parse, or whose seq is not the next one, at or before the last
    parsable ``turn/end`` row is corruption; after it, it starts a torn tail, and every row
    from there on is dropped.

    Raises:
        SessionPersistenceCorruptionError: With the reference's message.
    """
    parsed = [parsed_row(row) for row in rows]
    last_end = -1
    for index in range(len(rows) - 1, -1, -1):
        if parsed[index] is not None and rows[index][1] == b"turn/end":
            last_end = index
            break
    preserved: list[dict[str, Any]] = []
    for index, (row, event) in enumerate(zip(rows, parsed, strict=True)):
        if event is None:
            if index <= last_end:
                raise SessionPersistenceCorruptionError(
                    f"corrupt session log: unparsable committed event at seq {row[0]}"
                )
            break
        if row[0] != index:
            if index <= last_end:
                raise SessionPersistenceCorruptionError(
                    "corrupt session log: seq gap in committed region "
                    f"(expected {index}, got {row[0]})"
                )
            break
        preserved.append(event)
    return preserved, (len(preserved) if len(preserved) < len(rows) else None)


def render_row(row: EventRow) -> bytes:
    """The JSONL line a row stands for, with its JSON columns inserted verbatim (so an
    unparsable row renders as an unparsable line, as a torn line would)."""
    seq, kind, time, data, sources, op = row
    name = _text(kind)
    line = b'{"type":' + encode_json(name) + b',"seq":%d,"time":%d,"data":' % (seq, time)
    line += data
    if sources is not None:
        line += b',"sourceEventSeqs":' + sources
    if op is not None:
        line += b',"surfaceOp":' + op
    if name in MARKED_IGNORABLE:
        line += _MARK
    return line + b"}"


_RENDERED: Final = len(b'{"type":,"seq":,"time":,"data":}\n')
_SOURCES: Final = len(b',"sourceEventSeqs":')
_OP: Final = len(b',"surfaceOp":')
_MARK: Final = b',"ignorable":true'


def rendered_size(rows: Sequence[EventRow]) -> int:
    """``len`` of the lines :func:`render_row` makes of ``rows``, newlines included, without
    building them."""
    if not rows:
        return 0
    seqs, kinds, times, datas, sources, ops = zip(*rows, strict=True)
    names = {kind: _text(kind) for kind in set(kinds)}
    kind_sizes = {
        kind: len(encode_json(name)) + (name in MARKED_IGNORABLE) * len(_MARK)
        for kind, name in names.items()
    }
    return (
        _RENDERED * len(rows)
        + sum(map(kind_sizes.__getitem__, kinds))
        + sum(len(str(n)) for n in seqs)
        + sum(len(str(n)) for n in times)
        + sum(map(len, datas))
        + sum(_SOURCES + len(s) for s in sources if s is not None)
        + sum(_OP + len(o) for o in ops if o is not None)
    )


def _text(value: bytes | str) -> str:
    """A text column as Node reads it (invalid UTF-8 replaced)."""
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else value
