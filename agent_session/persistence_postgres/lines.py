"""A session's rows as the JSONL lines they hold: a batch of events becomes rows of lines
exactly as the JSONL backend writes them (runs of streamed deltas packed into one line), and
rows read back are scanned by the JSONL reader's rules, so packed runs load lazily and a
stored session exports to a ``.jsonl`` file by concatenation."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from agent_session.persistence_jsonl.encoder import encode_lines
from agent_session.persistence_jsonl.scan import ScannedLog, scan_log
from agent_session.session import SessionEvent
from agent_session.session.events.eventlog import first_seq

__all__ = ["Line", "Scanned", "batch_lines", "scan_rows"]


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


def batch_lines(events: Sequence[SessionEvent], pack: bool = True) -> list[Line]:
    """The rows of a contiguous batch: its JSONL lines, packed as the JSONL backend packs
    (with ``pack``)."""
    if not events:
        return []
    out: list[Line] = []
    seq = first_seq(events)
    for line, count in encode_lines(events, pack):
        kind = line[9 : line.index(b'"', 9)]  # after b'{"type":"'
        out.append(Line(seq, count, kind.decode(), line.decode()))
        seq += count
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
