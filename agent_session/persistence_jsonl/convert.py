"""Rewriting a stopped session's log into the other encoding (``session.jsonl`` to
``session.jsonl.zstd`` and back), for operators.

Crash guarantee: at every instant the session has a complete log. The new file is created
beside the old one by the same protocol as a first write (temp file, fsync, hard link,
directory fsync); only once it is durable is the old one removed (and the directory
fsynced). A crash in between leaves both, with the same events; running the conversion again
finishes it (the old one is removed once the new one is checked to hold the same plaintext).
The session's writer lock is held throughout, so no writer appends meanwhile, and a session
another process writes is refused.
"""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass

from agent_session.persistence_jsonl.durable import create_by_link
from agent_session.persistence_jsonl.encoding import ENCODINGS, LogEncoding, encoding_of, logs_in
from agent_session.persistence_jsonl.layout import encode_segment
from agent_session.persistence_jsonl.storage import JsonlStorage
from agent_session.session import SessionNotFoundError, SessionPersistenceCorruptionError

__all__ = ["Converted", "convert"]


@dataclass(frozen=True, slots=True)
class Converted:
    """What a conversion did."""

    old: str | None
    """The file that was removed (``None``: the log already had that encoding)."""
    new: str
    """The session's log now."""
    plain_bytes: int
    """The plaintext's length."""
    stored_bytes: int
    """The new file's length."""


async def convert(storage: JsonlStorage, id: str, to: str) -> Converted:
    """Rewrite the log of ``id`` into the encoding ``to`` (``none`` or ``zstd``) as one frame
    for the header and one for the events. Refuses a log with a torn tail (recover it
    first): only whole committed lines are ever rewritten. Raises
    :class:`SessionNotFoundError`, :class:`SessionPersistenceCorruptionError`, and
    ``SessionCollisionError`` when another writer holds the session."""
    target = ENCODINGS[to]
    await asyncio.to_thread(_finish_interrupted, storage, id, target)
    if not await storage.acquire(id):
        raise SessionNotFoundError(f'session "{id}" not found')
    try:
        return await asyncio.to_thread(_rewrite, storage, id, target)
    finally:
        await storage.release(id)


def _rewrite(storage: JsonlStorage, id: str, target: LogEncoding) -> Converted:
    path = storage.reader.find(id)
    read = None if path is None else storage.reader.stable_read(path)
    if path is None or read is None:
        raise SessionNotFoundError(f'session "{id}" not found')
    data, limit = read[0], storage.reader.max_log_bytes
    source = encoding_of(path)
    if source is target:
        return Converted(None, path, len(source.raw(data, path, limit)), len(data))
    if source.scan(data, path, limit).torn:
        raise SessionPersistenceCorruptionError(
            f'"{path}" ends in a torn tail: run `agent-session recover` on it before converting'
        )
    plaintext = source.raw(data, path, limit)
    header_end = plaintext.index(b"\n") + 1
    content = target.wrap(plaintext[:header_end])
    if len(plaintext) > header_end:
        content += target.wrap(plaintext[header_end:])
    directory = os.path.dirname(path)
    new = os.path.join(directory, target.filename)
    if create_by_link(storage.ops, directory, new, content) is None:
        raise SessionPersistenceCorruptionError(
            f'"{new}" already exists with other content: refusing to convert "{path}"'
        )
    storage.ops.unlink(path)
    storage.ops.fsync_dir(directory)
    return Converted(path, new, len(plaintext), len(content))


def _finish_interrupted(storage: JsonlStorage, id: str, target: LogEncoding) -> None:
    """If an earlier conversion of ``id`` to ``target`` stopped after creating the new file,
    remove the old one, once both are checked to hold the same plaintext."""
    limit = storage.reader.max_log_bytes
    for project in storage.ops.listdir(storage.root):
        directory = os.path.join(storage.root, project, encode_segment(id))
        paths = [path for path, _ in logs_in(directory, storage.ops.stat)]
        if len(paths) < 2:
            continue
        reads = [storage.reader.stable_read(p) for p in paths]
        texts = [
            encoding_of(p).raw(r[0], p, limit)
            for p, r in zip(paths, reads, strict=True)
            if r is not None
        ]
        if len(texts) == 2 and texts[0] == texts[1]:
            storage.ops.unlink(next(p for p in paths if not p.endswith(target.filename)))
            storage.ops.fsync_dir(directory)
