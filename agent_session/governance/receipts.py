"""Where a store keeps the receipts of what was deleted from it (``purge``, ``erase``): an
append-only file ``.agent-session-receipts.jsonl`` in a JSONL store's directory, or the table
``agent_session_receipt`` beside a database's logs. The reference never reads either.

Guarantees: a receipt is durable when :meth:`Receipts.add` returns (the file is synced, a
SQLite commit is ``synchronous = FULL``, a PostgreSQL commit is acknowledged); receipts are
read back in the order they were added; reading never creates the file or the table.
"""

from __future__ import annotations

import os
import time
from typing import TYPE_CHECKING, Any, Protocol

import orjson

from agent_session.beside_logs.replace_file import sync_directory
from agent_session.beside_logs.side_tables import SideDatabase, side_database

if TYPE_CHECKING:
    from agent_session.stores import StoreSpec

__all__ = ["RECEIPT_FILE", "RECEIPT_TABLE", "Receipts", "receipts_for", "utc_stamp"]

RECEIPT_FILE = ".agent-session-receipts.jsonl"
RECEIPT_TABLE = "agent_session_receipt"


def utc_stamp() -> str:
    """Now, as receipts and tombstones say it: ``2026-12-04T23:37:42Z`` (UTC)."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


class Receipts(Protocol):
    """The receipts of one store."""

    where: str
    """Where they are, as the docs and messages name it."""

    def add(self, receipt: dict[str, Any]) -> None:
        """Append one receipt, durably."""
        ...

    def all(self) -> list[dict[str, Any]]:
        """Every receipt, oldest first."""
        ...

    def close(self) -> None: ...


def receipts_for(store: StoreSpec) -> Receipts:
    """The receipts of the store ``store`` names."""
    if store.kind == "jsonl":
        path = os.path.join(store.path, RECEIPT_FILE)
        return _FileReceipts(path, os.path.join(store.shown, RECEIPT_FILE))
    return _TableReceipts(side_database(store), f"table {RECEIPT_TABLE} of {store.shown}")


class _FileReceipts:
    def __init__(self, path: str, where: str) -> None:
        self._path = path
        self.where = where

    def add(self, receipt: dict[str, Any]) -> None:
        new = not os.path.exists(self._path)
        fd = os.open(self._path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            line = orjson.dumps(receipt) + b"\n"
            end = os.fstat(fd).st_size
            if end and os.pread(fd, 1, end - 1) != b"\n":  # (a receipt a crash tore)
                line = b"\n" + line
            os.write(fd, line)
            os.fsync(fd)
        finally:
            os.close(fd)
        if new:
            sync_directory(os.path.dirname(self._path))

    def all(self) -> list[dict[str, Any]]:
        try:
            with open(self._path, "rb") as file:
                lines = file.read().split(b"\n")
        except FileNotFoundError:
            return []
        found = []
        for line in lines:
            try:
                value = orjson.loads(line) if line else None
            except orjson.JSONDecodeError:
                continue  # (a receipt torn by a crash while it was written: never synced)
            if isinstance(value, dict):
                found.append(value)
        return found

    def close(self) -> None:
        return None


_CREATE = (
    f"CREATE TABLE IF NOT EXISTS {RECEIPT_TABLE} (ord BIGINT PRIMARY KEY, "
    "session_id TEXT NOT NULL, receipt TEXT NOT NULL)"
)
_ADD = (
    f"INSERT INTO {RECEIPT_TABLE} (ord, session_id, receipt) "
    f"SELECT COALESCE(MAX(ord), 0) + 1, ?, ? FROM {RECEIPT_TABLE}"
)


class _TableReceipts:
    def __init__(self, db: SideDatabase, where: str) -> None:
        self._db = db
        self.where = where
        self._made = False

    def _there(self) -> bool:
        self._made = self._made or bool(self._db.columns(RECEIPT_TABLE))
        return self._made

    def add(self, receipt: dict[str, Any]) -> None:
        if not self._there():
            self._db.create_table(RECEIPT_TABLE, _CREATE)
            self._made = True
        row = (str(receipt.get("id", "")), orjson.dumps(receipt).decode())
        with self._db.transaction() as db:
            if db.on_postgres:  # (SQLite's BEGIN IMMEDIATE already lets one writer in)
                db.execute(f"LOCK TABLE {RECEIPT_TABLE} IN SHARE ROW EXCLUSIVE MODE")
            db.execute(_ADD, row)

    def all(self) -> list[dict[str, Any]]:
        if not self._there():
            return []
        rows = self._db.execute(f"SELECT receipt FROM {RECEIPT_TABLE} ORDER BY ord")
        found = [orjson.loads(str(row[0])) for row in rows]
        return [value for value in found if isinstance(value, dict)]

    def close(self) -> None:
        self._db.close()
