"""A whole session written into a store at once: what ``agent-session copy`` publishes, so a
copy cut short (a SIGKILL, a full disk) leaves the destination without the session, never
with a prefix of it that lists and verifies as a session.

- SQLite, PostgreSQL: ``Storage.append_batches``, one transaction (PostgreSQL keeps each
  batch's packing; a SQLite row per event has none to keep).
- JSONL: written as batches into a staging root beside the store (same file system), then
  the session's directory is renamed into place and the directory fsynced; a staging root a
  kill left behind holds nothing a reader of the store sees.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Sequence

from agent_session.persistence_jsonl import JsonlPersistence
from agent_session.persistence_jsonl.layout import session_dir
from agent_session.sealing.storage import seal_like
from agent_session.session import SessionCollisionError, SessionEvent, SessionHeader
from agent_session.session.persistence.service import SessionPersistence

__all__ = ["publish"]


async def publish(
    target: SessionPersistence, header: SessionHeader, batches: Sequence[Sequence[SessionEvent]]
) -> None:
    """Store session ``header.id`` in ``target`` with ``batches`` (contiguous, from seq 0),
    whole or not at all.

    Raises:
        SessionCollisionError: ``target`` already has the session (it is left alone).
    """
    storage = target.storage
    if await storage.revision(header.id) is not None:
        raise SessionCollisionError(
            f'session "{header.id}" already exists in the destination; remove it first'
        )
    if isinstance(target, JsonlPersistence):
        await _staged(target, header, batches)
    else:  # one transaction (PostgreSQL keeps each batch's packing)
        await storage.append_batches(header, batches)


async def _staged(
    target: JsonlPersistence, header: SessionHeader, batches: Sequence[Sequence[SessionEvent]]
) -> None:
    root = target.jsonl.root
    os.makedirs(root, 0o700, exist_ok=True)
    staging = tempfile.mkdtemp(prefix=f".{os.path.basename(root)}.copy-", dir=os.path.dirname(root))
    try:
        stage = JsonlPersistence(staging, new_session_compression=target.jsonl.new_encoding.name)
        seal_like(stage, target.storage, header.id)  # (a sealed session is staged sealed)
        try:
            await stage.create(header)
            for batch in batches:
                await stage.append(header.id, batch)
        finally:
            await stage.aclose()
        final = session_dir(root, header)
        os.makedirs(os.path.dirname(final), 0o700, exist_ok=True)
        if os.path.lexists(final):
            raise SessionCollisionError(
                f'session "{header.id}" already exists in the destination; remove it first'
            )
        os.rename(session_dir(staging, header), final)
        target.jsonl.ops.fsync_dir(os.path.dirname(final))
    finally:
        shutil.rmtree(staging, ignore_errors=True)
