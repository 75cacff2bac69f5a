"""What is in a store: one row per session, read one session at a time (never the whole
store in memory), without writing anything."""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from persistence_jsonl import JsonlPersistence
from persistence_jsonl.layout import LOCK_NAME, LOG_NAME
from persistence_jsonl.scan import scan_log
from session import (
    SessionError,
    SessionEvent,
    SessionFormatUnsupportedError,
    SessionPersistenceCorruptionError,
)
from session.events.eventlog import LazyRun, blocks

__all__ = ["SessionRow", "Status", "rows", "status_of"]

Status = str
"""``balanced``, ``interrupted``, ``torn tail``, ``corrupt`` or ``unsupported``."""


@dataclass
class SessionRow:
    """One session of a store, as ``ls`` shows it."""

    id: str
    cwd: str | None
    created_at: int | None
    events: int
    state: str
    """Last turn: ``complete``; ``open`` (a live writer holds the session, the turn is still
    running); ``interrupted`` (open with no writer: it needs recovery); or ``-``."""
    size: int
    path: str
    flags: list[str] = field(default_factory=list)
    """``torn tail``, ``corrupt``, ``unsupported``."""
    problem: str | None = None
    """The error message for a corrupt or unsupported log."""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _turn_state(events: Sequence[Any]) -> str:
    state = "-"
    for event in blocks(events):
        if type(event) is LazyRun:
            continue  # streaming deltas: never a turn bracket
        kind = event.type if isinstance(event, SessionEvent) else event.get("type")
        if kind == "turn/start":
            state = "interrupted"
        elif kind == "turn/end":
            state = "complete"
    return state


def _logs(root: str) -> Iterator[str]:
    for project in sorted(os.listdir(root)) if os.path.isdir(root) else ():
        project_path = os.path.join(root, project)
        if not os.path.isdir(project_path):
            continue
        for entry in sorted(os.listdir(project_path)):
            path = os.path.join(project_path, entry, LOG_NAME)
            if os.path.isfile(path):
                yield path


def rows(root: str) -> Iterator[SessionRow]:
    """A row per session log under ``root``, from a scan of its bytes (header, events,
    torn tail); one log is in memory at a time."""
    held = held_locks()
    for path in _logs(root):
        with open(path, "rb") as f:
            data = f.read()
        fallback = os.path.basename(os.path.dirname(path))
        try:
            scanned = scan_log(data, path, check_version=False)
        except SessionFormatUnsupportedError as e:
            yield SessionRow(fallback, None, None, 0, "-", len(data), path, ["unsupported"], str(e))
            continue
        except SessionError as e:
            yield SessionRow(fallback, None, None, 0, "-", len(data), path, ["corrupt"], str(e))
            continue
        header = scanned.header
        flags = ["torn tail"] if scanned.torn else []
        if header.version != 0:
            flags.append("unsupported")
        state = _turn_state(scanned.events)
        if state == "interrupted" and writer_active(os.path.dirname(path), held):
            state = "open"  # a live writer holds the session: its turn is still running
        yield SessionRow(
            header.id,
            header.cwd,
            header.created_at,
            len(scanned.events),
            state,
            len(data),
            path,
            flags,
        )


def held_locks() -> set[tuple[int, int, int]] | None:
    """``(major, minor, inode)`` of every file lock held on this machine, from
    ``/proc/locks`` (Linux); ``None`` where that is not available. Reading it takes no lock,
    so it can never make a writer's lock attempt fail."""
    try:
        with open("/proc/locks", encoding="ascii") as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    held: set[tuple[int, int, int]] = set()
    for line in lines:
        fields = line.split()
        if len(fields) >= 6 and fields[1] != "->":
            try:
                major, minor, inode = fields[5].split(":")
                held.add((int(major, 16), int(minor, 16), int(inode)))
            except ValueError:
                continue
    return held


def writer_active(session_dir: str, held: set[tuple[int, int, int]] | None) -> bool:
    """Whether a live process holds the session's writer lock."""
    if not held:
        return False
    try:
        info = os.stat(os.path.join(session_dir, LOCK_NAME))
    except OSError:
        return False
    return (os.major(info.st_dev), os.minor(info.st_dev), info.st_ino) in held


async def status_of(backend: JsonlPersistence, id: str) -> tuple[Status, str]:
    """The full read-only verdict on one session and a detail line. Nothing is written:
    this uses the backend's storage read and the in-memory validation of ``inspect``."""
    try:
        stored = await backend.load_stored(id)
        if stored is None:
            return "corrupt", f'session "{id}" not found'
        inspected = await backend.inspect(id)
    except SessionFormatUnsupportedError as e:
        return "unsupported", str(e)
    except SessionPersistenceCorruptionError as e:
        return "corrupt", str(e)
    closers = len(inspected.events) - len(stored.events)
    if closers:
        detail = f"{len(stored.events)} events; the last turn is open ({closers} closers needed)"
        if stored.torn_marker is not None:
            detail += "; torn tail"
        return "interrupted", detail
    if stored.torn_marker is not None:
        return "torn tail", f"{len(stored.events)} events; a torn final fragment to cut"
    return "balanced", f"{len(stored.events)} events"
