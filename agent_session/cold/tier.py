"""A store's cold tier: the archive ``agent-session archive`` recorded for it, and what its
backend falls back to (:class:`ColdTier`, a
:class:`~agent_session.session.persistence.cold.ColdSource`).

Where the archive is recorded (its URL and its server, never a credential):

- a JSONL store: ``.agent-session-archive.json`` in its root, replaced durably (the
  reference's readers look only at directories);
- a SQLite or PostgreSQL store: the table ``agent_session_archive`` in its database.

A backend :func:`agent_session.open_store` opened reads the record once, at the first read
or resume of a session it does not hold; a store without one costs that one look.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Final
from urllib.parse import urlsplit

from agent_session.beside_logs.replace_file import exclusively, replace_durably
from agent_session.beside_logs.side_tables import SideDatabase, side_database
from agent_session.cold.archive import DATA, MANIFEST, Manifest, materialized, restore
from agent_session.cold.objects import Objects, parse_archive
from agent_session.session import SessionPersistenceCorruptionError

if TYPE_CHECKING:
    from agent_session.sealing.keyring import Keyring
    from agent_session.session.persistence.service import SessionPersistence
    from agent_session.stores import StoreSpec

__all__ = [
    "ARCHIVE_FILE",
    "ARCHIVE_TABLE",
    "ColdTier",
    "archived",
    "record_archive",
    "recorded_archive",
]

ARCHIVE_FILE: Final = ".agent-session-archive.json"
ARCHIVE_TABLE: Final = "agent_session_archive"
_TABLE: Final = (
    f"CREATE TABLE IF NOT EXISTS {ARCHIVE_TABLE} (singleton INTEGER PRIMARY KEY "
    "CHECK (singleton = 1), url TEXT NOT NULL, endpoint TEXT)"
)


def recorded_archive(store: StoreSpec) -> tuple[str, str | None] | None:
    """The archive ``(url, endpoint)`` recorded for ``store``; ``None`` when there is none.
    Reads only (a SQLite database is opened read-only)."""
    if store.kind == "jsonl":
        try:
            raw = json.loads(Path(store.path, ARCHIVE_FILE).read_bytes())
        except FileNotFoundError:
            return None
        return str(raw["url"]), raw.get("endpoint")
    if store.kind == "sqlite":
        if not os.path.exists(store.path):
            return None
        from agent_session.persistence_sqlite.schema import open_read_only

        opened = open_read_only(store.path, 5000)  # (as the store's read-only backend opens it)
        db = SideDatabase(opened.connection, mark="?", begin="BEGIN")
    else:
        db = SideDatabase.postgres(store.path)
    try:
        if "url" not in db.columns(ARCHIVE_TABLE):
            return None
        rows = db.execute(f"SELECT url, endpoint FROM {ARCHIVE_TABLE}")
    finally:
        db.close()
    return (str(rows[0][0]), rows[0][1]) if rows else None


def record_archive(store: StoreSpec, url: str, endpoint: str | None) -> None:
    """Record ``url`` (on ``endpoint``) as the archive of ``store``, durably.

    Raises:
        ValueError: The store archives to another place already (its sessions there would
            no longer be seen), or the URL or the endpoint is not one to record.
    """
    parse_archive(url)
    if endpoint is not None and urlsplit(endpoint).username is not None:
        raise ValueError("an endpoint URL names a server only, never a credential")
    current = recorded_archive(store)
    if current is not None and current[0] != url:
        raise ValueError(
            f"this store archives to {current[0]}; archiving to {url} as well would hide "
            "the sessions archived there"
        )
    if current == (url, endpoint):
        return
    if store.kind == "jsonl":
        os.makedirs(store.path, 0o700, exist_ok=True)
        with exclusively(os.path.join(store.path, ".agent-session-archive.lock")):
            data = json.dumps({"url": url, "endpoint": endpoint}).encode()
            replace_durably(os.path.join(store.path, ARCHIVE_FILE), data)
        return
    db = side_database(store)
    try:
        with db.transaction():
            db.execute(_TABLE)
            db.execute(f"DELETE FROM {ARCHIVE_TABLE}")
            db.execute(
                f"INSERT INTO {ARCHIVE_TABLE} (singleton, url, endpoint) VALUES (1, ?, ?)",
                (url, endpoint),
            )
    finally:
        db.close()


class ColdTier:
    """The cold tier of the store ``store``, read from its record on first use; a sealed
    session archived there opens with ``keyring`` (the store's)."""

    def __init__(self, store: StoreSpec, keyring: Keyring | None = None) -> None:
        self._store = store
        self._keyring = keyring
        self._objects: Objects | None = None
        self._looked = False

    async def objects(self) -> Objects | None:
        """The archive's objects (``None``: the store has no archive)."""
        if not self._looked:
            found = await asyncio.to_thread(recorded_archive, self._store)
            self._objects = None if found is None else Objects(found[0], endpoint=found[1])
            self._looked = True
        return self._objects

    @contextlib.asynccontextmanager
    async def reader(self, id: str) -> AsyncIterator[SessionPersistence | None]:
        objects = await self.objects()
        if objects is None:
            yield None
            return
        async with materialized(objects, id, self._keyring) as archived:
            yield archived

    def where(self, id: str) -> str:
        objects = self._objects
        if objects is None:
            return "(no archive)"
        return f"s3://{objects.url.bucket}/{objects.url.key(id, DATA)}"

    async def restore(self, into: SessionPersistence, id: str) -> bool:
        objects = await self.objects()
        return objects is not None and await restore(into, objects, id)

    async def forget(self, id: str) -> bool:
        objects = await self.objects()
        if objects is None or await asyncio.to_thread(objects.get, id, MANIFEST) is None:
            return False
        await asyncio.to_thread(objects.delete, id, MANIFEST)
        await asyncio.to_thread(objects.delete, id, DATA)
        return True


def archived(store: StoreSpec) -> Iterator[tuple[str, Manifest | None, str, Exception | None]]:
    """Each session the archive recorded for ``store`` holds: its id, its manifest (or
    ``None`` and the error that refused it) and where its log lives."""
    found = recorded_archive(store)
    if found is None:
        return
    objects = Objects(found[0], endpoint=found[1])
    for id in objects.ids(MANIFEST):
        where = f"s3://{objects.url.bucket}/{objects.url.key(id, DATA)}"
        try:
            data = objects.get(id, MANIFEST)
            if data is None:
                continue  # (removed meanwhile)
            yield id, Manifest.decode(data, id, f"{objects.shown}: {id!r}"), where, None
        except SessionPersistenceCorruptionError as e:
            yield id, None, where, e
