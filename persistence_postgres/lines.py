"""A session's rows as the JSONL lines they hold: a batch of events becomes rows of lines
exactly as the JSONL backend writes them (runs of streamed deltas packed into one line), and
rows read back are scanned by the JSONL reader's rules, so packed runs load lazily and a
stored session exports to a ``.jsonl`` file by concatenation."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

import orjson

from persistence_jsonl.rows import ROW_TYPES, encode_batch
from persistence_jsonl.scan import ScannedLog, scan_log
from session import SessionEvent

__all__ = ["Line", "Scanned", "batch_lines", "scan_rows"]

_PACKED: Final = {
    row.encode(): "args" if delta == "tool-call-delta" else "texts"
    for delta, row in ROW_TYPES.items()
}


@dataclass(frozen=True, slots=True)
class Line:
    """One ``agent_session_event`` row."""

    seq: int
    """The seq of its (first) event."""
    n: int
    """How many events it holds (more than one for a packed run)."""
    type: str
    """Its line's ``type`` (an event type, or a packed row's type)."""
    text: str
    """The JSONL line, without its newline."""


def batch_lines(events: Sequence[SessionEvent]) -> list[Line]:
    """The rows of a contiguous batch: its JSONL lines, packed as the JSONL backend packs."""
    if not events:
        return []
    out: list[Line] = []
    seq, index = events[0].seq, 0
    for line in encode_batch(events, True).split(b"\n")[:-1]:
        kind = line[9 : line.index(b'"', 9)]  # after b'{"type":"'
        members = _PACKED.get(kind)
        count = 1 if members is None else len(orjson.loads(line)["data"][members])
        out.append(Line(seq, count, kind.decode(), line.decode()))
        seq, index = seq + count, index + count
    return out


@dataclass(frozen=True, slots=True)
class Scanned:
    """A stored session read back."""

    log: ScannedLog
    cut_seq: int | None
    """The seq of the first row of a torn tail (rows a load must delete), or ``None``."""


def scan_rows(header: str, rows: Sequence[tuple[int, str]], where: str) -> Scanned:
    """Scan ``header`` and the ``(seq, line)`` rows (ordered by seq) with the JSONL rules.

    Raises:
        SessionPersistenceCorruptionError: A damaged committed region (naming ``where`` and
            the line, the header being line 1).
    """
    parts = [header.encode()]
    starts = []
    offset = len(parts[0]) + 1
    for _, text in rows:
        data = text.encode()
        starts.append(offset)
        parts.append(data)
        offset += len(data) + 1
    scanned = scan_log(b"\n".join(parts) + b"\n", where)
    cut = None
    if scanned.committed_bytes < offset:
        torn = next(i for i, start in enumerate(starts) if start >= scanned.committed_bytes)
        cut = rows[torn][0]
    return Scanned(scanned, cut)
