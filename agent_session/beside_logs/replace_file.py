"""Replacing a small file beside a store's logs (an export cursor, the ADK catalog)
atomically and durably."""

from __future__ import annotations

import contextlib
import os
import secrets

__all__ = ["replace_durably"]


def replace_durably(path: str, data: bytes) -> None:
    """Make ``path`` hold ``data``: written to a temporary file beside it, synced, renamed
    over it, and the directory synced. When it returns, the new content is durable; a crash
    before leaves the old content (and at most a stray ``*.tmp``)."""
    directory = os.path.dirname(path) or "."
    temp = f"{path}.{secrets.token_hex(6)}.tmp"
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    try:
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise
    handle = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(handle)
    finally:
        os.close(handle)
