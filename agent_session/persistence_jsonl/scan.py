"""The raw scanner: which bytes of a log are committed, and what they say.

A final fragment without a newline is a torn tail: ignored, and cut by the next repair. A
complete line that does not parse, or whose seq breaks contiguity, is tolerated only when no
later line holds a ``turn/end``: then it is an uncommitted tail of a crashed turn. Otherwise the
committed region is damaged and the scan refuses, naming the file and the line.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Final, Literal

from agent_session.persistence_jsonl.layout import parse_header
from agent_session.persistence_jsonl.rows import ROW_TYPES, MalformedRowError, lazy_row_events
from agent_session.session import SessionHeader, SessionPersistenceCorruptionError
from agent_session.session.events.eventlog import EventLog, LazyRun, is_run
from agent_session.session.events.turns import bracket
from agent_session.session.json.codec import decode_json, encode_json
from agent_session.session.json.gcpause import gc_paused

__all__ = [
    "MAX_SUMMARY_LINE",
    "LogSummary",
    "ScannedLog",
    "line_entry",
    "scan_log",
    "summarize_log",
]

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
    recovered: bytes = b""
    """Lines recovered from a torn final zstd frame (their events are in ``events``): the
    repair that cuts the file at ``committed_bytes`` appends them again before the
    closers."""

    @property
    def torn(self) -> bool:
        """Whether bytes past the committed prefix exist."""
        return self.committed_bytes < self.size


def _corrupt(path: str, what: str) -> SessionPersistenceCorruptionError:
    return SessionPersistenceCorruptionError(f'corrupt session log: {what} in "{path}"')


def line_entry(line: bytes) -> dict[str, Any] | LazyRun | None:
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
    ``path`` and the line, the header being line 1) for a damaged committed region,
    and the header's own errors for a bad first line. The cyclic GC is paused meanwhile
    (:func:`session.json.gcpause.gc_paused`): the values decoded cannot form cycles. Packed rows
    are only checked here; their events are built on first read, under the same pause."""
    with gc_paused():
        return _scan_log(data, path, check_version)


class _Scanner:
    """The committed-region rules, fed one complete line at a time (the bytes of a line
    without its newline, or ``None`` for a line too long to parse, and the offset just past
    its newline). ``keep`` collects the events; otherwise only their count is kept."""

    def __init__(self, path: str, committed: int, *, keep: bool) -> None:
        self.path = path
        self.keep = keep
        self.parts: list[Any] = []  # lists of wire dicts, and lazy runs
        self.plain: list[Any] = []  # the open list part
        self.count = 0
        self.committed = committed
        self.last_bracket: Literal["start", "end"] | None = None
        self.turns = 0
        self.line_number = 1  # as an editor counts: the header is line 1
        self.defect: SessionPersistenceCorruptionError | None = None

    def feed(self, line: bytes | None, end: int) -> None:
        self.line_number += 1
        entry = None if line is None else line_entry(line)
        if self.defect is not None:
            if entry is not None and bracket(entry) == "end":
                raise self.defect
            return
        if entry is None:
            self.defect = _corrupt(
                self.path, f"unparsable committed event at line {self.line_number}"
            )
            return
        # A run's members follow its first one without gaps.
        seq = entry.seq0 if is_run(entry) else entry.get("seq")
        if seq != self.count or isinstance(seq, bool):
            self.defect = _corrupt(
                self.path,
                f"seq gap in committed region at line {self.line_number} (expected "
                f"{self.count}, got {seq})",
            )
            if bracket(entry) == "end":
                raise self.defect
            return
        kind = bracket(entry)
        if kind is not None:
            self.last_bracket = kind
            self.turns += kind == "start"
        if is_run(entry):
            if self.keep:
                if self.plain:
                    self.parts.append(self.plain)
                    self.plain = []
                self.parts.append(entry)
            self.count += len(entry)
        else:
            if self.keep:
                self.plain.append(entry)
            self.count += 1
        self.committed = end


def _scan_log(data: bytes, path: str, check_version: bool, *, strict: bool = False) -> ScannedLog:
    """:func:`scan_log` without the GC pause; ``strict`` raises a damaged line or seq gap
    that the plain rules would tolerate as an uncommitted tail (a complete zstd frame holds
    no such tail)."""
    end = data.find(b"\n")
    if end < 0:
        raise SessionPersistenceCorruptionError(f'empty or header-less session log: "{path}"')
    header = parse_header(data[:end], path, check_version=check_version)
    pos = end + 1
    scanner = _Scanner(path, pos, keep=True)
    while True:
        end = data.find(b"\n", pos)
        if end < 0:
            break  # a torn final fragment: never committed
        scanner.feed(data[pos:end], end + 1)
        pos = end + 1
    if strict and scanner.defect is not None:
        raise scanner.defect
    scanner.parts.append(scanner.plain)
    return ScannedLog(header, EventLog(scanner.parts), scanner.committed, len(data))


@dataclass(frozen=True, slots=True)
class LogSummary:
    """What a streaming pass over a log file says of it, without keeping its events."""

    header: SessionHeader
    events: int
    """How many committed events it holds."""
    last_bracket: Literal["start", "end"] | None
    """The last committed turn bracket: ``"start"`` when the last turn is open."""
    committed_bytes: int
    size: int
    turns: int = 0
    """How many turns it holds (its committed ``turn/start`` events)."""

    @property
    def torn(self) -> bool:
        """Whether bytes past the committed prefix exist."""
        return self.committed_bytes < self.size


MAX_SUMMARY_LINE: Final = 64 << 20
"""The longest line a summary holds in memory; a longer one is judged by its envelope's
first bytes (``{"type":…,"seq":…``, as every writer of the format begins a line)."""

_ENVELOPE = re.compile(rb'\{"type":"((?:[^"\\]|\\.)*)","seq":(0|[1-9][0-9]{0,15})[,}]')


def summarize_log(chunks: Iterable[bytes], path: str) -> LogSummary:
    """The committed-region verdict of :func:`scan_log` from a stream of the file's bytes, in
    memory bounded by :data:`MAX_SUMMARY_LINE`. The header of any version is read (a listing
    reports other versions). Raises like :func:`scan_log`."""
    header: SessionHeader | None = None
    scanner: _Scanner | None = None
    buffer = bytearray()
    oversized = b""  # the first bytes of a line longer than the limit, while skipping it
    offset = 0  # file offset of buffer[0]
    size = 0
    with gc_paused():
        for chunk in chunks:
            size += len(chunk)
            buffer += chunk
            while True:
                newline = buffer.find(b"\n")
                if newline < 0:
                    if len(buffer) > MAX_SUMMARY_LINE:
                        if header is None:
                            raise _corrupt(path, "header line longer than 64 MiB")
                        oversized = oversized or bytes(buffer[:4096])
                        offset += len(buffer)
                        buffer.clear()
                    break
                line = bytes(buffer[:newline])
                del buffer[: newline + 1]
                offset += newline + 1
                if header is None:
                    header = parse_header(line, path, check_version=False)
                    scanner = _Scanner(path, offset, keep=False)
                    continue
                assert scanner is not None
                if oversized:
                    scanner.feed(_sniffed(oversized + line[:4096]), offset)
                    oversized = b""
                else:
                    scanner.feed(line, offset)
    if header is None or scanner is None:
        raise SessionPersistenceCorruptionError(f'empty or header-less session log: "{path}"')
    return LogSummary(
        header, scanner.count, scanner.last_bracket, scanner.committed, size, scanner.turns
    )


def _sniffed(prefix: bytes) -> bytes | None:
    """A stand-in line for an oversized one: its envelope's type and seq, or ``None`` when
    its first bytes are not an envelope (then it is unparsable)."""
    found = _ENVELOPE.match(prefix)
    if found is None:
        return None
    kind = decode_json(b'"' + found.group(1) + b'"')
    return encode_json({"type": kind, "seq": int(found.group(2)), "time": 0, "data": None})
