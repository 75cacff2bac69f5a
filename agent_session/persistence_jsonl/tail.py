"""Reading a plain JSONL log from its end: the last events of a session without reading the
lines before them, so that the cost of a short read does not grow with the log.

Guarantees: what is returned is exactly what a whole read would return as the log's last
events (complete lines, contiguous seqs); whenever the end of the file is not plainly that
(a torn or unparsable last line, a seq gap, a file that shrank or was replaced while it was
read, a compressed log), the whole log is read instead (``Storage.load``'s rules) and its
tail returned. Never writes.
"""

from __future__ import annotations

from typing import Any

from agent_session.persistence_jsonl.encoding import PLAIN, encoding_of
from agent_session.persistence_jsonl.layout import parse_header
from agent_session.persistence_jsonl.reader import LogReader, too_large
from agent_session.persistence_jsonl.scan import line_entry
from agent_session.session.events.eventlog import EventLog, is_run
from agent_session.session.json.codec import encode_json
from agent_session.session.persistence.kit import StoredTail, tail_of

__all__ = ["line_events", "read_from_last", "read_tail"]

_FIRST_WINDOW = 1 << 16
"""Bytes read from the end first; each further read takes what the events read so far say
the asked ones need (at least twice as many)."""


def read_tail(reader: LogReader, id: str, count: int) -> StoredTail | None:
    """At least the last ``count`` events of ``id``'s log (see ``Storage.read_tail``)."""
    path = reader.find(id)
    if path is None:
        return None
    if encoding_of(path) is not PLAIN:
        return tail_of(reader.load(id), count)  # (zstd frames cannot be read backwards)
    plain = _plain(reader, path)
    if plain is None:
        return None
    size, first = plain
    window = _FIRST_WINDOW
    while first is not None:
        offset = max(0, size - window)
        data = reader.ops.read_range(path, offset, size - offset)
        if data is None or len(data) != size - offset or not data.endswith(b"\n"):
            break  # (it shrank, was replaced, or ends torn: the whole read says how)
        lines = data.split(b"\n")[1:-1]  # (the first is the header, or a line's end)
        read = line_events(lines, at_start=offset == 0)
        if read is None:
            break
        start, events = read
        if (events and len(events) >= count) or offset == 0:
            header = parse_header(first, path)
            reader.check_identity(path, header, id)
            return StoredTail(header, start, events, False).last(count)
        # (the bytes the asked events likely take, from those read: fewer reads than x4)
        window = max(window * 2, window * count * 5 // (4 * max(len(events), 1)))
    return tail_of(reader.load(id), count)


def line_events(lines: list[bytes], *, at_start: bool) -> tuple[int, EventLog[Any]] | None:
    """The seq of the first and the events of complete lines, in order (a packed row's run
    stays unbuilt until one of its events is read); ``None`` when a line does not parse or
    the seqs are not contiguous (from 0 when ``at_start``)."""
    parts: list[Any] = []
    plain: list[Any] = []
    expected: int | None = 0 if at_start else None
    first: int | None = None
    for line in lines:
        entry = line_entry(line)
        if entry is None:
            return None
        seq: Any
        if is_run(entry):
            seq, size = entry.seq0, len(entry)
            parts += (plain, entry)
            plain = []
        else:
            seq, size = entry.get("seq"), 1
            plain.append(entry)
        if type(seq) is not int or (expected is not None and seq != expected):
            return None
        first = seq if first is None else first
        expected = seq + size
    parts.append(plain)
    return (first or 0), EventLog(parts)


_SEARCH_CHUNK = 1 << 20
"""Bytes searched per read, from the end back."""


def read_from_last(reader: LogReader, id: str, type: str) -> StoredTail | None:
    """The events of ``id``'s plain log from its last line of ``type`` on, found by a byte
    search from the end: only that line and those after it are parsed (see
    ``Storage.read_from_last``). ``None`` when there is no such line, and for a compressed
    log (its frames cannot be searched without reading it whole)."""
    path = reader.find(id)
    plain = None if path is None or encoding_of(path) is not PLAIN else _plain(reader, path)
    if path is None or plain is None:
        return None
    size, first = plain
    at = None if first is None else _last_line(reader, path, size, type)
    if first is None or at is None:
        return None
    data = reader.ops.read_range(path, at, size - at)
    if data is None or len(data) != size - at:
        return None  # (it shrank or was replaced: the whole read says how)
    read = line_events(data.split(b"\n")[:-1], at_start=False)  # (complete lines)
    if read is None:
        return None
    header = parse_header(first, path)
    reader.check_identity(path, header, id)
    return StoredTail(header, *read, not data.endswith(b"\n"))


def _plain(reader: LogReader, path: str) -> tuple[int, bytes | None] | None:
    """The size of the plain log at ``path`` and its header line (``None`` without a whole
    first line); ``None`` when the file is gone. Raises ``too_large`` past the limit."""
    found = reader.ops.stat(path)
    if found is None:
        return None
    if found.size > reader.max_log_bytes:
        raise too_large(path, found.size, reader.max_log_bytes)
    return found.size, PLAIN.first_line(reader.ops, path, reader.max_log_bytes)


def _last_line(reader: LogReader, path: str, size: int, type: str) -> int | None:
    """Where the last line of ``type`` starts in the file (a byte offset), or ``None``."""
    needle = b'\n{"type":' + encode_json(type) + b',"seq":'
    end, carry = size, b""
    while end > 0:
        offset = max(0, end - _SEARCH_CHUNK)
        data = reader.ops.read_range(path, offset, end - offset)
        if data is None:
            return None
        data += carry
        at = data.rfind(needle)
        if at >= 0:
            return offset + at + 1
        carry, end = data[: len(needle)], offset
    return None
