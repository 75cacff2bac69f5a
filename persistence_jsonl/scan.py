"""The raw scanner: which bytes of a log are committed, and what they say.

A final fragment without a newline is a torn tail: ignored, and cut by the next repair. A
complete line that does not parse, or whose seq breaks contiguity, is tolerated only when no
later line holds a ``turn/end``: then it is an uncommitted tail of a crashed turn. Otherwise the
committed region is damaged and the scan refuses, naming the file and the line.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from persistence_jsonl.layout import parse_header
from persistence_jsonl.rows import ROW_TYPES, MalformedRowError, lazy_row_events
from session import SessionHeader, SessionPersistenceCorruptionError
from session.events.eventlog import EventLog, LazyRun
from session.events.turns import bracket
from session.json.codec import decode_json
from session.json.gcpause import gc_paused

__all__ = ["ScannedLog", "scan_log"]

_ROW_TAGS = frozenset(ROW_TYPES.values())


@dataclass(frozen=True, slots=True)
class ScannedLog:
    """The committed content of one log file."""

    header: SessionHeader
    """The parsed header line."""
    events: EventLog[Any]
    """The contiguous committed events: wire dicts, and each packed row as a
    :class:`session.events.eventlog.LazyRun` (checked now, built on first read)."""
    committed_bytes: int
    """Length of the committed prefix; bytes past it are a tail to cut."""
    size: int
    """Length of the scanned bytes."""

    @property
    def torn(self) -> bool:
        """Whether bytes past the committed prefix exist."""
        return self.committed_bytes < self.size


def _corrupt(path: str, what: str) -> SessionPersistenceCorruptionError:
    return SessionPersistenceCorruptionError(f'corrupt session log: {what} in "{path}"')


def _entry(line: bytes) -> dict[str, Any] | LazyRun | None:
    """What a complete line holds: one wire event, a packed row's checked run, or ``None``
    if it does not parse."""
    try:
        raw = decode_json(line)
    except ValueError:
        return None
    if not isinstance(raw, dict):
        return None
    if raw.get("type") in _ROW_TAGS:
        try:
            return lazy_row_events(raw)
        except MalformedRowError:
            return None
    return raw


def scan_log(data: bytes, path: str, *, check_version: bool = True) -> ScannedLog:
    """Scan a whole log file. Raises :class:`SessionPersistenceCorruptionError` (naming
    ``path`` and the line, counted from 1 after the header) for a damaged committed region,
    and the header's own errors for a bad first line. The cyclic GC is paused meanwhile
    (:func:`session.json.gcpause.gc_paused`): the values decoded cannot form cycles. Packed rows
    are only checked here; their events are built on first read, under the same pause."""
    with gc_paused():
        return _scan_log(data, path, check_version)


def _scan_log(data: bytes, path: str, check_version: bool) -> ScannedLog:
    end = data.find(b"\n")
    if end < 0:
        raise SessionPersistenceCorruptionError(f'empty or header-less session log: "{path}"')
    header = parse_header(data[:end], path, check_version=check_version)
    parts: list[Any] = []  # lists of wire dicts, and lazy runs
    plain: list[Any] = []  # the open list part
    count = 0
    committed = pos = end + 1
    line_number = 0
    defect: SessionPersistenceCorruptionError | None = None
    while True:
        end = data.find(b"\n", pos)
        if end < 0:
            break  # a torn final fragment: never committed
        line_number += 1
        entry = _entry(data[pos:end])
        pos = end + 1
        if defect is not None:
            if entry is not None and bracket(entry) == "end":
                raise defect
            continue
        if entry is None:
            defect = _corrupt(path, f"unparsable committed event at line {line_number}")
            continue
        # A run's members follow its first one without gaps.
        seq = entry.seq0 if isinstance(entry, LazyRun) else entry.get("seq")
        if seq != count or isinstance(seq, bool):
            defect = _corrupt(
                path,
                f"seq gap in committed region at line {line_number} (expected {count}, got {seq})",
            )
            if bracket(entry) == "end":
                raise defect
            continue
        if isinstance(entry, LazyRun):
            if plain:
                parts.append(plain)
                plain = []
            parts.append(entry)
            count += len(entry)
        else:
            plain.append(entry)
            count += 1
        committed = pos
    parts.append(plain)
    return ScannedLog(header, EventLog(parts), committed, len(data))
