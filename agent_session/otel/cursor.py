"""Where a trace sink's export stands, per session: the seq of the last ``turn/end`` a receiver
acknowledged, kept durably in the store beside the sessions and never in their logs.

- A JSONL store keeps one file in its root, :data:`CURSOR_FILE` (replaced atomically: written
  to a temporary file, synced, renamed over, the root synced). The reference's readers look
  only at directories under the root, so they never see it.
- A SQLite or PostgreSQL store keeps the table :data:`CURSOR_TABLE` in its database (the
  reference reads its own tables only).

Guarantees: :meth:`Cursors.advance` returns once the new position is durable; a position is
recorded with the session's incarnation (its ``createdAt``), so a session deleted and created
again under the same id starts from the beginning. One exporter per sink at a time: two
exporters of one sink would each export everything past the position they read.
"""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING, Any, Protocol

from agent_session.beside_logs.replace_file import replace_durably
from agent_session.beside_logs.side_tables import SideDatabase, side_database

if TYPE_CHECKING:
    from agent_session.stores import StoreSpec

__all__ = ["CURSOR_FILE", "CURSOR_TABLE", "Cursors", "cursors_for"]

CURSOR_FILE = ".agent-session-otel-cursors.json"
CURSOR_TABLE = "agent_session_otel_cursor"


class Cursors(Protocol):
    """The export positions of one store."""

    def position(self, sink: str, session_id: str, incarnation: int) -> int:
        """The seq of the last ``turn/end`` ``sink`` acknowledged for that incarnation of
        the session; ``-1`` when none was."""
        ...

    def advance(self, sink: str, session_id: str, incarnation: int, seq: int) -> None:
        """Record ``seq`` durably (it only moves forward for one incarnation)."""
        ...

    def close(self) -> None: ...


def cursors_for(store: StoreSpec) -> Cursors:
    """The cursors of the store ``store`` names."""
    if store.kind == "jsonl":
        return _FileCursors(store.path)
    return _SqlCursors(side_database(store))


class _FileCursors:
    def __init__(self, root: str) -> None:
        self._root = root
        self._path = os.path.join(root, CURSOR_FILE)
        self._state: dict[str, Any] | None = None

    def _load(self) -> dict[str, Any]:
        if self._state is None:
            try:
                with open(self._path, "rb") as file:
                    state = json.loads(file.read())
            except FileNotFoundError:
                state = {}
            except ValueError as e:
                raise ValueError(f'export cursor file "{self._path}" is not valid JSON: {e}') from e
            if not isinstance(state, dict) or not isinstance(state.get("sinks", {}), dict):
                raise ValueError(f'export cursor file "{self._path}" is not a cursor file')
            self._state = state
        return self._state

    def position(self, sink: str, session_id: str, incarnation: int) -> int:
        entry = self._load().get("sinks", {}).get(sink, {}).get(session_id)
        if isinstance(entry, list) and len(entry) == 2 and entry[0] == incarnation:
            return int(entry[1])
        return -1

    def advance(self, sink: str, session_id: str, incarnation: int, seq: int) -> None:
        state = self._load()
        sessions = state.setdefault("sinks", {}).setdefault(sink, {})
        if self.position(sink, session_id, incarnation) >= seq:
            return
        sessions[session_id] = [incarnation, seq]
        state["version"] = 1
        os.makedirs(self._root, mode=0o700, exist_ok=True)
        data = json.dumps(state, ensure_ascii=False, sort_keys=True).encode()
        replace_durably(self._path, data)

    def close(self) -> None:
        self._state = None


_CREATE = (
    f"CREATE TABLE IF NOT EXISTS {CURSOR_TABLE} (sink TEXT NOT NULL, session_id TEXT NOT NULL, "
    "incarnation BIGINT NOT NULL, seq BIGINT NOT NULL, PRIMARY KEY (sink, session_id))"
)
_UPSERT = (
    f"INSERT INTO {CURSOR_TABLE} (sink, session_id, incarnation, seq) VALUES (?, ?, ?, ?) "
    "ON CONFLICT (sink, session_id) DO UPDATE SET incarnation = excluded.incarnation, "
    f"seq = excluded.seq WHERE {CURSOR_TABLE}.incarnation <> excluded.incarnation "
    f"OR {CURSOR_TABLE}.seq < excluded.seq"
)
_SELECT = f"SELECT incarnation, seq FROM {CURSOR_TABLE} WHERE sink = ? AND session_id = ?"


class _SqlCursors:
    """The table in a database."""

    def __init__(self, db: SideDatabase) -> None:
        self._db = db
        db.create_table(CURSOR_TABLE, _CREATE)

    def position(self, sink: str, session_id: str, incarnation: int) -> int:
        found = self._db.execute(_SELECT, (sink, session_id))
        return int(found[0][1]) if found and found[0][0] == incarnation else -1

    def advance(self, sink: str, session_id: str, incarnation: int, seq: int) -> None:
        self._db.execute(_UPSERT, (sink, session_id, incarnation, seq))

    def close(self) -> None:
        self._db.close()
