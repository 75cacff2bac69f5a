"""``agent-session search STORE "phrase"``: full-text search over what every session of a store
said (its surface: user messages, the model's text, reasoning and tool calls, tool results).

The index is an SQLite FTS5 database *outside* the store (``--index FILE``; by default under
``$XDG_CACHE_HOME/agent-session/search/``, one per store): derived, rebuilt on demand
(``--rebuild``), and brought up to date before each search by reading only what was appended
since (a session whose log shrank or was replaced is read again whole; a removed one leaves
the index, its text zeroed and merged out of the index's segments). A sealed session is never
indexed: its text would outlive its erasure. It reads stored events as they are, never
repairing anything, through a read-only backend: the store is never written.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sqlite3
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, Final

from agent_session.cli.exits import OK, UserError
from agent_session.cli.output import json_line
from agent_session.session import SessionErasedError, SessionSealError

__all__ = ["KINDS", "default_index", "search", "surface_texts"]

KINDS: Final = ("user", "assistant", "reasoning", "call", "tool")
"""What an entry is: a user's message, the model's text, its reasoning, a tool call (name and
arguments), a tool's result."""
_VERSION: Final = "1"
_SCHEMA: Final = """
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS sessions(
    id TEXT PRIMARY KEY, events INTEGER NOT NULL, updated INTEGER, turn TEXT);
CREATE VIRTUAL TABLE IF NOT EXISTS entries USING fts5(
    text, session UNINDEXED, seq UNINDEXED, turn UNINDEXED, kind UNINDEXED);
"""


def default_index(store_name: str) -> Path:
    """Where the index of the store named ``store_name`` (its masked name) lives by default."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    digest = hashlib.sha256(store_name.encode()).hexdigest()[:24]
    return Path(base, "agent-session", "search", f"{digest}.sqlite3")


def surface_texts(events: Iterable[Any], turn: Any = None) -> Iterator[tuple[int, Any, str, str]]:
    """``(seq, turn, kind, text)`` for each piece of text the events put on the surface
    (``turn``: the turn open before the first of them)."""
    from agent_session.session.events.eventlog import is_run, iter_parts

    for event in iter_parts(events):
        if is_run(event):
            continue  # streamed deltas: their text is in the answer's message
        data = event.data if isinstance(event.data, Mapping) else {}
        kind = event.type
        if kind == "turn/start":
            turn = data.get("turn")
        elif kind == "user/message":
            yield from _blocks(event.seq, turn, "user", data.get("content"))
        elif kind == "assistant/message":
            message = _mapping(data.get("message"))
            yield from _blocks(event.seq, turn, "assistant", message.get("content"))
        elif kind == "tool/result":
            for block in _mapping(data.get("message")).get("content") or ():
                if isinstance(block, Mapping):
                    yield from _blocks(event.seq, turn, "tool", block.get("content"))


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _blocks(seq: int, turn: Any, kind: str, content: Any) -> Iterator[tuple[int, Any, str, str]]:
    for block in content if isinstance(content, list | tuple) else ():
        if not isinstance(block, Mapping):
            continue
        shape = block.get("type")
        if shape == "text" and block.get("text"):
            yield seq, turn, kind, str(block["text"])
        elif shape == "reasoning" and block.get("text"):
            yield seq, turn, "reasoning", str(block["text"])
        elif shape == "tool-call":
            yield seq, turn, "call", f"{block.get('name')}({block.get('arguments')})"


def _open(path: Path, rebuild: bool) -> sqlite3.Connection:
    path.parent.mkdir(parents=True, exist_ok=True)
    if rebuild and path.exists():
        path.unlink()
    index = sqlite3.connect(path)
    index.execute("PRAGMA secure_delete = ON")  # (a removed session's text is zeroed)
    index.executescript(_SCHEMA)
    found = index.execute("SELECT value FROM meta WHERE key = 'version'").fetchone()
    if found is not None and found[0] != _VERSION:  # an index another build wrote: rebuild it
        index.close()
        return _open(path, True)
    index.execute("INSERT OR REPLACE INTO meta VALUES ('version', ?)", (_VERSION,))
    return index


async def refresh(index: sqlite3.Connection, reader: Any, rows: Iterable[Any]) -> int:
    """Bring the index up to date with the readable sessions of ``rows`` (read through
    ``reader``); return how many sessions were read."""
    known = {
        id: (events, updated, turn)
        for id, events, updated, turn in index.execute("SELECT * FROM sessions")
    }
    seen: set[str] = set()
    read = 0
    for row in rows:
        if row.problem_flag is not None:
            continue
        seen.add(row.id)
        events, updated, turn = known.get(row.id, (0, None, None))
        if row.id in known and events == row.events and updated == row.updated_at:
            continue
        start = events if row.id in known and row.events >= events else 0
        if start == 0:
            index.execute("DELETE FROM entries WHERE session = ?", (row.id,))
            turn = None
        try:
            new = await reader.read_from(row.id, start)
        except (SessionSealError, SessionErasedError):
            new = None
        if new is None or _sealed(reader, row.id):  # (its text would outlive an erasure)
            index.execute("DELETE FROM entries WHERE session = ?", (row.id,))
            index.execute(
                "INSERT OR REPLACE INTO sessions VALUES (?, ?, ?, NULL)",
                (row.id, row.events, row.updated_at),
            )
            continue
        read += 1
        last_turn = turn
        for seq, at, kind, text in surface_texts(new, turn):
            index.execute(
                "INSERT INTO entries VALUES (?, ?, ?, ?, ?)", (text, row.id, seq, at, kind)
            )
            last_turn = at
        total = start + len(new)
        index.execute(
            "INSERT OR REPLACE INTO sessions VALUES (?, ?, ?, ?)",
            (row.id, total, row.updated_at, None if last_turn is None else str(last_turn)),
        )
    gone = set(known) - seen
    for id in gone:
        index.execute("DELETE FROM entries WHERE session = ?", (id,))
        index.execute("DELETE FROM sessions WHERE id = ?", (id,))
    if gone:  # (merged, so no token of a deleted session stays in the index's segments)
        index.execute("INSERT INTO entries(entries) VALUES ('optimize')")
    index.commit()
    return read


def _sealed(reader: Any, id: str) -> bool:
    """Whether ``id`` is a sealed session (``agent_session.sealing``): never indexed."""
    key_of = getattr(reader.storage, "key_of", None)
    return key_of is not None and key_of(id) is not None


def query(
    index: sqlite3.Connection, phrase: str, kinds: Iterable[str] | None, limit: int
) -> list[dict[str, Any]]:
    """The entries holding ``phrase`` (as a phrase: its words in order), best first."""
    quoted = '"' + phrase.replace('"', '""') + '"'
    sql = (
        "SELECT session, seq, turn, kind, snippet(entries, 0, '[', ']', '…', 12) "
        "FROM entries WHERE entries MATCH ?"
    )
    args: list[Any] = [f"text : {quoted}"]
    chosen = list(kinds or ())
    if chosen:
        sql += f" AND kind IN ({', '.join('?' * len(chosen))})"
        args += chosen
    sql += " ORDER BY rank LIMIT ?"
    args.append(limit)
    return [
        {"sessionId": s, "seq": seq, "turn": _number(turn), "type": kind, "snippet": snippet}
        for s, seq, turn, kind, snippet in index.execute(sql, args)
    ]


def _number(turn: Any) -> Any:
    try:
        return int(turn)
    except (TypeError, ValueError):
        return turn


async def search(args: argparse.Namespace) -> int:
    """``agent-session search``: refresh the index, then print the matches."""
    from agent_session.cli.commands import check_exists, max_log_bytes, open_backend
    from agent_session.see.inventory import rows

    if not args.phrase.strip():
        raise UserError("the phrase to search for is empty")
    check_exists(args.store)
    path = Path(args.index) if args.index else default_index(args.store.named)
    index = _open(path, args.rebuild)
    reader = open_backend(args.store, read_only=True)
    try:
        await refresh(index, reader, rows(args.store, max_log_bytes()))
        found = query(index, args.phrase, args.type, args.limit)
    finally:
        await reader.aclose()
        index.close()
    for match in found:
        if args.json:
            print(json_line(match))
        else:
            where = (
                f"{match['sessionId']} seq {match['seq']} (turn {match['turn']}, {match['type']})"
            )
            print(f"{where}: {match['snippet']}")
    if not found and not args.json:
        print(f"no session says {args.phrase!r}")
    return OK
