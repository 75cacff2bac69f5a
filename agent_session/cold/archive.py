"""Moving stopped sessions to the archive and back.

A session is archived as two objects under ``<prefix>/<id, percent-quoted>/``: its log as the
reference writes it by default (``session.jsonl.zstd``, byte for byte what a JSONL store of
the reference's default compression holds), then ``manifest.json`` (its header, how many
events, the bytes' size and SHA-256, and the state of its last turn). The manifest is
written last: an archive without one is not an archive (an archiving a kill cut short),
and is written over by the next.

Guarantees of :func:`archive_session`: the hot copy is dropped only after both objects were
read back, the log's SHA-256 matched and every event decoded from it equals the hot copy's;
the session's writer lock is held from before it is read until it is dropped, so no write
can land in between. A SIGKILL at any instant therefore leaves the session hot (with or
without a complete archive beside it: while the hot copy exists it is the session, and the
next archiving checks and drops it) or archived, never lost and never half of each.

:func:`restore` is the reverse (a session opened for writing): the archive is read back
and checked the same way, published whole into the hot store and read back there, and only
then are its objects removed (the manifest first).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import tempfile
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any, Final

import orjson

from agent_session.cold.objects import Objects
from agent_session.interchange.copying import copy_session
from agent_session.persistence_jsonl import JsonlPersistence
from agent_session.persistence_jsonl.layout import session_dir
from agent_session.sealing.keyring import Keyring
from agent_session.sealing.storage import SealedStorage, keyring_of, seal_like
from agent_session.session import SessionHeader, SessionPersistenceCorruptionError
from agent_session.session.events.holds import check_not_held, standing_holds
from agent_session.session.persistence.api import Diagnosis
from agent_session.session.persistence.kit import failpoint
from agent_session.session.persistence.service import SessionPersistence

__all__ = [
    "DATA",
    "MANIFEST",
    "Archived",
    "Manifest",
    "archive_session",
    "archive_store",
    "materialized",
    "restore",
]

DATA: Final = "session.jsonl.zstd"
MANIFEST: Final = "manifest.json"
FORMAT: Final = "agent-session-archive/1"


@dataclass(frozen=True, slots=True)
class Manifest:
    """What the archive says of one session."""

    id: str
    header: dict[str, Any]
    events: int
    size: int
    sha256: str
    state: str
    """``balanced`` or ``interrupted`` (its last turn open), as it was archived."""
    updated_at: int | None
    """The time of its last event (ms), or ``None`` for a session without events."""
    archived_at: int

    def encode(self) -> bytes:
        return orjson.dumps(
            {
                "format": FORMAT,
                "id": self.id,
                "header": self.header,
                "events": self.events,
                "bytes": self.size,
                "sha256": self.sha256,
                "state": self.state,
                "updatedAt": self.updated_at,
                "archivedAt": self.archived_at,
            }
        )

    @classmethod
    def decode(cls, data: bytes, id: str, where: str) -> Manifest:
        """Raises :class:`SessionPersistenceCorruptionError` naming ``where`` for anything
        but a manifest of session ``id`` in this build's format."""
        try:
            raw = orjson.loads(data)
            if raw.get("format") != FORMAT:
                raise ValueError(f"format {raw.get('format')!r}, not {FORMAT}")
            manifest = cls(
                raw["id"],
                dict(raw["header"]),
                int(raw["events"]),
                int(raw["bytes"]),
                str(raw["sha256"]),
                str(raw["state"]),
                raw["updatedAt"],
                int(raw["archivedAt"]),
            )
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            raise SessionPersistenceCorruptionError(
                f"{where}: not an archive manifest ({e})"
            ) from None
        if manifest.id != id:
            raise SessionPersistenceCorruptionError(
                f"{where}: the manifest of session {manifest.id!r}, not {id!r}"
            )
        return manifest


@contextlib.asynccontextmanager
async def _staging() -> AsyncIterator[str]:
    place = tempfile.mkdtemp(prefix="agent-session-archive-")
    try:
        yield place
    finally:
        shutil.rmtree(place, ignore_errors=True)


async def _verified(objects: Objects, id: str) -> tuple[Manifest, bytes] | None:
    """The manifest and log of an archived session, the log checked against the manifest;
    ``None`` when the archive has no manifest of it."""
    import asyncio

    where = f"the archive of session {id!r} in {objects.shown}"
    found = await asyncio.to_thread(objects.get, id, MANIFEST)
    if found is None:
        return None
    manifest = Manifest.decode(found, id, where)
    data = await asyncio.to_thread(objects.get, id, DATA)
    if data is None or len(data) != manifest.size:
        raise SessionPersistenceCorruptionError(f"{where}: its {DATA} is missing or cut short")
    if hashlib.sha256(data).hexdigest() != manifest.sha256:
        raise SessionPersistenceCorruptionError(f"{where}: its {DATA} fails its SHA-256")
    return manifest, data


@contextlib.asynccontextmanager
async def materialized(
    objects: Objects, id: str, keyring: Keyring | None = None
) -> AsyncIterator[JsonlPersistence | None]:
    """A read-only JSONL store in a temporary directory holding the archived session, as
    archived (checked against its manifest), opened with ``keyring`` (the hot store's: a
    sealed session is archived sealed); ``None`` when it is not archived."""
    found = await _verified(objects, id)
    if found is None:
        yield None
        return
    manifest, data = found
    async with _staging() as place:
        header = SessionHeader.model_validate(manifest.header)
        directory = session_dir(place, header)
        os.makedirs(directory, 0o700)
        with open(os.path.join(directory, DATA), "wb") as file:
            file.write(data)
        store = JsonlPersistence(place)
        if keyring is not None:
            store.wrap_storage(lambda storage: SealedStorage(storage, keyring))
        try:
            yield store
        finally:
            await store.aclose()


async def archive_session(
    hot: SessionPersistence, objects: Objects, id: str, *, examined: Diagnosis | None = None
) -> Manifest:
    """Archive the stopped session ``id`` of ``hot`` and drop its hot copy (see the module
    docstring).

    Raises:
        SessionCollisionError: A live writer holds it (nothing is archived).
        SessionHeldError: A legal hold stands on it (nothing is archived).
        SessionCopyError, SessionPersistenceCorruptionError: What was read back is not the
            session (the hot copy is kept).
        OSError: The archive or the hot store failed (the hot copy is kept).
    """
    import asyncio

    await hot.storage.acquire(id)  # (no writer can come in until it is dropped)
    try:
        if examined is None:  # (``examined``: read under the lock already)
            examined = await hot.diagnose(id)
        check_not_held(standing_holds(examined.session.events), id)  # (its drop would delete)
        async with _staging() as place:
            stage = JsonlPersistence(place, new_session_compression="zstd")
            seal_like(stage, hot.storage)  # (a sealed session is archived sealed)
            try:
                await copy_session(hot, stage, id, examined=examined)  # (read back)
                path = stage.locate(examined.session.header)
            finally:
                await stage.aclose()
            assert path is not None
            with open(path, "rb") as file:
                data = file.read()
        events = examined.session.events[: examined.stored_events]
        manifest = Manifest(
            id,
            examined.session.header.to_json(),
            len(events),
            len(data),
            hashlib.sha256(data).hexdigest(),
            "interrupted" if examined.closers else "balanced",
            events[-1].time if events else None,
            int(time.time() * 1000),
        )
        await asyncio.to_thread(objects.put, id, DATA, data)
        failpoint("archive:after-data")
        await asyncio.to_thread(objects.put, id, MANIFEST, manifest.encode())
        failpoint("archive:after-manifest")
        async with materialized(objects, id, keyring_of(hot.storage)) as back:
            if back is None:
                raise SessionPersistenceCorruptionError(
                    f"the archive of session {id!r} in {objects.shown} has no manifest just "
                    "after it was written; the hot copy is kept"
                )
            read = [e.to_json() for e in await back.read_from(id, 0)]
        if read != [e.to_json() for e in events]:
            raise SessionPersistenceCorruptionError(
                f"the archive of session {id!r} in {objects.shown} reads back differently "
                "from the hot copy; the hot copy is kept"
            )
        failpoint("archive:before-drop")
        await hot.delete(id, keep_cold=True)
        return manifest
    finally:
        await hot.storage.release(id)


async def restore(hot: SessionPersistence, objects: Objects, id: str) -> bool:
    """Bring the archived session ``id`` back into ``hot`` (see the module docstring);
    ``False`` when it is not archived.

    Raises:
        SessionCollisionError: ``hot`` has the session already (the archive is left).
        SessionPersistenceCorruptionError: The archive is damaged (nothing is restored).
    """
    import asyncio

    async with materialized(objects, id, keyring_of(hot.storage)) as archived:
        if archived is None:
            return False
        await copy_session(archived, hot, id)
    failpoint("restore:before-forget")
    await asyncio.to_thread(objects.delete, id, MANIFEST)
    await asyncio.to_thread(objects.delete, id, DATA)
    return True


@dataclass(frozen=True, slots=True)
class Archived:
    """What :func:`archive_store` did with one session."""

    id: str
    action: str
    """``archived``; ``kept`` (written to within ``older_than``, or held by a live writer:
    ``detail`` says which); ``held`` (a legal hold stands: dropping the hot copy would delete
    it); ``refused`` (an error, ``detail`` says which; the hot copy is kept)."""
    detail: str


async def archive_store(
    store: str | os.PathLike[str],
    to: str,
    *,
    older_than_ms: int,
    ids: list[str] | None = None,
    endpoint: str | None = None,
) -> list[Archived]:
    """Archive the sessions of ``store`` (``ids``, else every one) whose last event is older
    than ``older_than_ms`` and that no live writer holds, to the archive ``to`` (``s3://``,
    on ``endpoint``), which is recorded as the store's cold tier first: from then on the
    store's readers see the archived sessions and a resume brings one back.

    Raises:
        ValueError: ``to`` is not an archive URL, or the store archives elsewhere already.
    """
    import asyncio

    from agent_session.cold.tier import record_archive
    from agent_session.session import SessionCollisionError, SessionError, SessionHeldError
    from agent_session.stores import parse_store

    spec = parse_store(os.fspath(store))
    objects = Objects(to, endpoint=endpoint)
    await asyncio.to_thread(record_archive, spec, to, objects.endpoint)
    hot = spec.open()
    done: list[Archived] = []
    cutoff = int(time.time() * 1000) - older_than_ms
    try:
        for id in ids if ids is not None else [h.id for h in await hot.list_headers()]:
            try:
                try:  # (a writer killed on this host is waited out, as a resume waits)
                    await hot.storage.acquire(id)
                except SessionCollisionError:
                    done.append(Archived(id, "kept", "a live writer holds it"))
                    continue
                seen = await hot.diagnose(id)
                events = seen.session.events[: seen.stored_events]
                last = events[-1].time if events else seen.session.header.created_at
                if last > cutoff:
                    await hot.storage.release(id)
                    done.append(Archived(id, "kept", "written to within the age given"))
                else:
                    manifest = await archive_session(hot, objects, id, examined=seen)
                    detail = f"{manifest.events} events, {manifest.size} bytes to {objects.shown}"
                    done.append(Archived(id, "archived", detail))
            except SessionHeldError as e:
                await hot.storage.release(id)
                done.append(Archived(id, "held", f"{e}; the hot copy is kept"))
            except (SessionError, OSError) as e:
                await hot.storage.release(id)
                done.append(Archived(id, "refused", f"{e}; the hot copy is kept"))
    finally:
        await hot.aclose()
    return done
