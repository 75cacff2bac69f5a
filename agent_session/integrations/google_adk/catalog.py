"""What ADK keeps beside a session's events, durably, in the store beside the logs: each
session's creation (its initial state, its creation and last update times) and the state
ADK shares across sessions (``app:`` keys per app, ``user:`` keys per app and user).

- A JSONL store keeps one file per app in its root, ``.agent-session-adk-<hash>.json``,
  replaced atomically (a temporary file, synced, renamed over, the root synced) under an
  exclusive ``flock`` of ``.agent-session-adk-<hash>.lock``, so processes sharing the store
  never lose each other's changes. The reference's readers look only at directories under
  the root, so they never see them.
- A SQLite or PostgreSQL store keeps the tables ``agent_session_adk_session`` and
  ``agent_session_adk_state`` in its database (the reference reads its own tables only); a
  change is one transaction.

Guarantees: every write returns once it is durable; a state change only sets the keys it
names (a concurrent change of other keys is kept); ``temp:`` keys never get here.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from agent_session.beside_logs.replace_file import exclusively, replace_durably
from agent_session.beside_logs.side_tables import SideDatabase

if TYPE_CHECKING:
    from agent_session.stores import StoreSpec

__all__ = ["Catalog", "Row", "Touch", "catalog_for"]

SESSION_TABLE = "agent_session_adk_session"
STATE_TABLE = "agent_session_adk_state"


@dataclass
class Row:
    """One ADK session as the catalog knows it."""

    user: str
    id: str
    created: float
    updated: float
    state: dict[str, Any] = field(default_factory=dict)
    """Its session-scoped state when last recorded (at creation, then with its update time):
    the log's state deltas applied over it give the state now, as ADK's deltas only set
    keys."""
    folded: int = 0
    """How many events of the log that state folds in: the deltas of the events from this
    seq on give the state now (a read of the log's end need not go further back)."""


Touch = tuple[float, Mapping[str, Any], int]
"""What a writer records of a session it wrote: its update time, its session-scoped state
and how many log events that state folds in (:attr:`Row.folded`)."""


class Catalog(Protocol):
    """The ADK sessions and shared state of one store."""

    def add(
        self, app: str, row: Row, app_state: Mapping[str, Any], user_state: Mapping[str, Any]
    ) -> bool:
        """Record a new session and the shared state its creation sets; ``False`` (nothing
        written) when the session exists."""
        ...

    def get(self, app: str, user: str, id: str) -> Row | None: ...

    def rows(self, app: str, user: str | None) -> list[Row]:
        """The app's sessions (of ``user`` only when given)."""
        ...

    def remove(self, app: str, user: str, id: str) -> None: ...

    def shared(self, app: str, user: str) -> tuple[dict[str, Any], dict[str, Any]]:
        """The app's state and the user's (unprefixed keys)."""
        ...

    def update(
        self,
        app: str,
        user: str,
        app_delta: Mapping[str, Any],
        user_delta: Mapping[str, Any],
        touched: Mapping[tuple[str, str], Touch],
    ) -> None:
        """Set the keys of the deltas, and the update time (its last event's, whenever that
        was stamped) and session state of the ``(user, id)`` sessions ``touched`` names. Only
        a session's writer records it, and it records what it holds before it lets the
        session go, so no record is older than the one it replaces."""
        ...

    def close(self) -> None: ...


def catalog_for(store: StoreSpec) -> Catalog:
    """The catalog of the store ``store`` names."""
    if store.kind == "jsonl":
        return _FileCatalog(store.path)
    if store.kind == "sqlite":  # (the store's own format first: a new file gets its schema)
        from agent_session.persistence_sqlite.schema import open_database

        db = open_database(os.path.abspath(store.path), None, 5000).connection
        return _SqlCatalog(SideDatabase.sqlite(db))
    return _SqlCatalog(SideDatabase.postgres(store.path))


# --- JSONL: a file per app --------------------------------------------------------------------


class _FileCatalog:
    def __init__(self, root: str) -> None:
        self._root = root

    def _paths(self, app: str) -> tuple[str, str]:
        name = (
            ".agent-session-adk-"
            + hashlib.sha256(app.encode("utf-8", "surrogatepass")).hexdigest()[:24]
        )
        return os.path.join(self._root, name + ".json"), os.path.join(self._root, name + ".lock")

    def _read(self, app: str) -> dict[str, Any]:
        path, _ = self._paths(app)
        try:
            with open(path, "rb") as file:
                data = json.loads(file.read())
        except FileNotFoundError:
            return {"version": 1, "app": app, "state": {}, "users": {}}
        except ValueError as e:
            raise ValueError(f'ADK catalog "{path}" is not valid JSON: {e}') from e
        if (
            not isinstance(data, dict)
            or data.get("app") != app
            or not isinstance(data.get("users"), dict)
        ):
            raise ValueError(f'ADK catalog "{path}" is not the catalog of app {app!r}')
        return data

    @contextlib.contextmanager
    def _changing(self, app: str) -> Iterator[dict[str, Any]]:
        """The app's catalog, locked; written back durably when the block ends normally."""
        path, lock = self._paths(app)
        with exclusively(lock):
            data = self._read(app)
            yield data
            self._write(path, data)

    def _write(self, path: str, data: dict[str, Any]) -> None:
        text = json.dumps(data, ensure_ascii=False, sort_keys=True)
        replace_durably(path, text.encode("utf-8", "surrogatepass"))

    def add(
        self, app: str, row: Row, app_state: Mapping[str, Any], user_state: Mapping[str, Any]
    ) -> bool:
        with self._changing(app) as data:
            user = data["users"].setdefault(row.user, {"state": {}, "sessions": {}})
            if row.id in user["sessions"]:
                return False
            user["sessions"][row.id] = {
                "created": row.created,
                "updated": row.updated,
                "state": row.state,
                "folded": row.folded,
            }
            user["state"].update(user_state)
            data["state"].update(app_state)
        return True

    def get(self, app: str, user: str, id: str) -> Row | None:
        entry = self._read(app)["users"].get(user, {}).get("sessions", {}).get(id)
        if entry is None:
            return None
        return _entry_row(user, id, entry)

    def rows(self, app: str, user: str | None) -> list[Row]:
        users = self._read(app)["users"]
        return [
            _entry_row(name, id, entry)
            for name, of in users.items()
            if user is None or name == user
            for id, entry in of.get("sessions", {}).items()
        ]

    def remove(self, app: str, user: str, id: str) -> None:
        with self._changing(app) as data:
            data["users"].get(user, {}).get("sessions", {}).pop(id, None)

    def shared(self, app: str, user: str) -> tuple[dict[str, Any], dict[str, Any]]:
        data = self._read(app)
        return dict(data["state"]), dict(data["users"].get(user, {}).get("state", {}))

    def update(
        self,
        app: str,
        user: str,
        app_delta: Mapping[str, Any],
        user_delta: Mapping[str, Any],
        touched: Mapping[tuple[str, str], Touch],
    ) -> None:
        with self._changing(app) as data:
            data["state"].update(app_delta)
            if user_delta:
                data["users"].setdefault(user, {"state": {}, "sessions": {}})["state"].update(
                    user_delta
                )
            for (name, id), (time, state, folded) in touched.items():
                entry = data["users"].get(name, {}).get("sessions", {}).get(id)
                if entry is not None:
                    entry.update(updated=time, state=dict(state), folded=folded)

    def close(self) -> None:
        return None


def _entry_row(user: str, id: str, entry: Mapping[str, Any]) -> Row:
    """A session of a catalog file (one written before ``folded`` was kept folds nothing)."""
    state = dict(entry["state"])
    return Row(user, id, entry["created"], entry["updated"], state, int(entry.get("folded", 0)))


# --- SQLite and PostgreSQL: two tables ----------------------------------------------------------


class _SqlCatalog:
    """The tables in a database."""

    def __init__(self, db: SideDatabase) -> None:
        self._db = db
        db.create_table(
            SESSION_TABLE,
            f"CREATE TABLE IF NOT EXISTS {SESSION_TABLE} (app TEXT NOT NULL, user_id TEXT NOT "
            "NULL, id TEXT NOT NULL, created DOUBLE PRECISION NOT NULL, updated DOUBLE PRECISION "
            f"NOT NULL, state TEXT NOT NULL, {_FOLDED}, PRIMARY KEY (app, user_id, id))",
        )
        if "folded" not in db.columns(SESSION_TABLE):  # (a table of an earlier build)
            try:
                db.execute(f"ALTER TABLE {SESSION_TABLE} ADD COLUMN {_FOLDED}")
            except Exception as e:  # (another process may have added it first)
                if "folded" not in db.columns(SESSION_TABLE):
                    raise OSError(f"cannot add column folded to {SESSION_TABLE}: {e}") from e
        db.create_table(
            STATE_TABLE,
            f"CREATE TABLE IF NOT EXISTS {STATE_TABLE} (app TEXT NOT NULL, scope TEXT NOT NULL, "
            "user_id TEXT NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL, "
            "PRIMARY KEY (app, scope, user_id, key))",
        )

    def _set(self, app: str, scope: str, user: str, delta: Mapping[str, Any]) -> None:
        for key, value in delta.items():
            self._db.execute(
                f"INSERT INTO {STATE_TABLE} (app, scope, user_id, key, value) VALUES "
                "(?, ?, ?, ?, ?) ON CONFLICT (app, scope, user_id, key) DO UPDATE SET "
                "value = excluded.value",
                (app, scope, user, key, json.dumps(value, ensure_ascii=False)),
            )

    def add(
        self, app: str, row: Row, app_state: Mapping[str, Any], user_state: Mapping[str, Any]
    ) -> bool:
        with self._db.transaction() as db:
            if db.execute(_SELECT_ONE.format("1"), (app, row.user, row.id)):
                return False
            state = json.dumps(row.state, ensure_ascii=False)
            db.execute(
                f"INSERT INTO {SESSION_TABLE} (app, user_id, id, created, updated, state, folded) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)",
                (app, row.user, row.id, row.created, row.updated, state, row.folded),
            )
            self._set(app, "app", "", app_state)
            self._set(app, "user", row.user, user_state)
        return True

    def get(self, app: str, user: str, id: str) -> Row | None:
        found = self._db.execute(
            _SELECT_ONE.format("created, updated, state, folded"), (app, user, id)
        )
        if not found:
            return None
        created, updated, state, folded = found[0]
        return Row(user, id, created, updated, json.loads(state), folded)

    def rows(self, app: str, user: str | None) -> list[Row]:
        query = (
            f"SELECT user_id, id, created, updated, state, folded FROM {SESSION_TABLE} "
            "WHERE app = ?"
        )
        values: tuple[str, ...] = (app,)
        if user is not None:
            query, values = query + " AND user_id = ?", (app, user)
        found = self._db.execute(query, values)
        return [Row(u, i, c, t, json.loads(state), f) for u, i, c, t, state, f in found]

    def remove(self, app: str, user: str, id: str) -> None:
        self._db.execute(
            f"DELETE FROM {SESSION_TABLE} WHERE app = ? AND user_id = ? AND id = ?",
            (app, user, id),
        )

    def shared(self, app: str, user: str) -> tuple[dict[str, Any], dict[str, Any]]:
        found = self._db.execute(
            f"SELECT scope, key, value FROM {STATE_TABLE} WHERE app = ? AND "
            "((scope = 'app' AND user_id = '') OR (scope = 'user' AND user_id = ?))",
            (app, user),
        )
        app_state = {key: json.loads(value) for scope, key, value in found if scope == "app"}
        user_state = {key: json.loads(value) for scope, key, value in found if scope == "user"}
        return app_state, user_state

    def update(
        self,
        app: str,
        user: str,
        app_delta: Mapping[str, Any],
        user_delta: Mapping[str, Any],
        touched: Mapping[tuple[str, str], Touch],
    ) -> None:
        with self._db.transaction() as db:
            self._set(app, "app", "", app_delta)
            self._set(app, "user", user, user_delta)
            for (name, id), (time, state, folded) in touched.items():
                db.execute(
                    f"UPDATE {SESSION_TABLE} SET updated = ?, state = ?, folded = ? WHERE app = ? "
                    "AND user_id = ? AND id = ?",
                    (time, json.dumps(state, ensure_ascii=False), folded, app, name, id),
                )

    def close(self) -> None:
        self._db.close()


_FOLDED = "folded BIGINT NOT NULL DEFAULT 0"
"""The column a table of an earlier build lacks (its rows fold nothing)."""

_SELECT_ONE = f"SELECT {{}} FROM {SESSION_TABLE} WHERE app = ? AND user_id = ? AND id = ?"
"""One session's columns (``{}``: which)."""
