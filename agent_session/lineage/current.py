"""Which branch of a conversation is current: the pointer ``rewind`` moves, kept durably in
the store beside the sessions and never in their logs (so the reference, which never reads
it, still loads every branch, and nothing is deleted).

- A JSONL store keeps one file in its root, :data:`BRANCH_FILE` (replaced atomically, under
  the lock of :data:`BRANCH_LOCK`).
- A SQLite or PostgreSQL store keeps the table :data:`BRANCH_TABLE` in its database.

A conversation is named by the id an application first gave its session; its current
branch is that session until a rewind points it at a fork. An application follows the
current branch by opening ``current_branch(store, id)`` instead of ``id``.

Guarantees: :meth:`Branches.point` returns once the pointer is durable; a crash before
leaves the previous pointer."""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING, Any, Protocol

from agent_session.beside_logs.replace_file import exclusively, replace_durably
from agent_session.beside_logs.side_tables import SideDatabase, side_database

if TYPE_CHECKING:
    from agent_session.stores import StoreSpec

__all__ = ["BRANCH_FILE", "BRANCH_TABLE", "Branches", "branches_for"]

BRANCH_FILE = ".agent-session-branches.json"
BRANCH_LOCK = ".agent-session-branches.lock"
"""Held while the branch file is changed (a rewind in another process waits for it)."""
BRANCH_TABLE = "agent_session_branch"


class Branches(Protocol):
    """The current-branch pointers of one store."""

    def current(self, conversation: str) -> str | None:
        """The session that is ``conversation``'s current branch, when a rewind set one."""
        ...

    def point(self, conversation: str, session_id: str) -> None:
        """Make ``session_id`` the current branch of ``conversation``, durably."""
        ...

    def all(self) -> dict[str, str]:
        """Every pointer: conversation -> its current branch."""
        ...

    def close(self) -> None: ...


def branches_for(store: StoreSpec, *, read_only: bool = False) -> Branches:
    """The pointers of the store ``store`` names; ``read_only``: for reading them only (a
    SQLite database is opened as the read-only commands open it: nothing is written,
    checkpointed or locked)."""
    if store.kind == "jsonl":
        return _FileBranches(store.path)
    if store.kind == "sqlite" and read_only:
        from agent_session.persistence_sqlite.schema import open_read_only

        opened = open_read_only(store.path, 5000).connection
        return _SqlBranches(SideDatabase(opened, mark="?", begin="BEGIN"))
    if store.kind == "postgres":
        from agent_session.stores import require_postgres

        require_postgres()  # (the install hint, not a driver's ImportError)
    return _SqlBranches(side_database(store))


class _FileBranches:
    def __init__(self, root: str) -> None:
        self._root = root
        self._path = os.path.join(root, BRANCH_FILE)
        self._lock = os.path.join(root, BRANCH_LOCK)

    def all(self) -> dict[str, str]:
        try:
            with open(self._path, "rb") as file:
                state: Any = json.loads(file.read())
        except FileNotFoundError:
            return {}
        except ValueError as e:
            raise ValueError(f'branch file "{self._path}" is not valid JSON: {e}') from e
        current = state.get("current") if isinstance(state, dict) else None
        if not isinstance(current, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in current.items()
        ):
            raise ValueError(f'branch file "{self._path}" is not a branch file')
        return dict(current)

    def current(self, conversation: str) -> str | None:
        return self.all().get(conversation)

    def point(self, conversation: str, session_id: str) -> None:
        with exclusively(self._lock):  # (another conversation's rewind is not written over)
            current = self.all()
            current[conversation] = session_id
            data = json.dumps(
                {"version": 1, "current": current}, ensure_ascii=False, sort_keys=True
            )
            replace_durably(self._path, data.encode())

    def close(self) -> None:
        return None


_CREATE = (
    f"CREATE TABLE IF NOT EXISTS {BRANCH_TABLE} (conversation TEXT PRIMARY KEY, "
    "session_id TEXT NOT NULL)"
)
_UPSERT = (
    f"INSERT INTO {BRANCH_TABLE} (conversation, session_id) VALUES (?, ?) "
    "ON CONFLICT (conversation) DO UPDATE SET session_id = excluded.session_id"
)


class _SqlBranches:
    """The table in a database."""

    def __init__(self, db: SideDatabase) -> None:
        self._db = db
        self._made = False

    def _there(self) -> bool:
        """Whether the table exists (reading never creates it: a read writes nothing)."""
        self._made = self._made or bool(self._db.columns(BRANCH_TABLE))
        return self._made

    def all(self) -> dict[str, str]:
        if not self._there():
            return {}
        rows = self._db.execute(f"SELECT conversation, session_id FROM {BRANCH_TABLE}")
        return {str(a): str(b) for a, b in rows}

    def current(self, conversation: str) -> str | None:
        if not self._there():
            return None
        found = self._db.execute(
            f"SELECT session_id FROM {BRANCH_TABLE} WHERE conversation = ?", (conversation,)
        )
        return str(found[0][0]) if found else None

    def point(self, conversation: str, session_id: str) -> None:
        if not self._there():
            self._db.create_table(BRANCH_TABLE, _CREATE)
            self._made = True
        self._db.execute(_UPSERT, (conversation, session_id))

    def close(self) -> None:
        self._db.close()
