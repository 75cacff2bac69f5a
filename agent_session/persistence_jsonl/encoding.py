"""The two encodings of a session log, ``session.jsonl`` and the reference's default
``session.jsonl.zstd``: what each file is called, how bytes are written to it, and how it is
read. Everything that differs between them is here; the reader and the storage ask the
encoding of the file they hold."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from typing import Final, Literal, Protocol

from agent_session.persistence_jsonl.fileio import FileOps, Stat
from agent_session.persistence_jsonl.layout import LOG_NAME, ZSTD_LOG_NAME
from agent_session.persistence_jsonl.scan import LogSummary, ScannedLog, scan_log, summarize_log
from agent_session.persistence_jsonl.zstd import (
    compress_frame,
    decompress_frame,
    frame_end,
    scan_zstd_log,
    summarize_zstd_log,
    zstd_plaintext,
)

__all__ = [
    "ENCODINGS",
    "FLAT_SUFFIXES",
    "PLAIN",
    "ZSTD",
    "Compression",
    "LogEncoding",
    "encoding_of",
    "logs_in",
]

Compression = Literal["auto", "none", "zstd"]
"""A backend's compression mode: ``auto`` reads and appends each log in the encoding its
file has; ``none`` and ``zstd`` accept only that encoding, as the reference does."""

_FIRST_READ: Final = 1 << 16


class LogEncoding(Protocol):
    """How one kind of log file is named, written and read."""

    name: Literal["none", "zstd"]
    """The reference's name for it (its ``compression`` option)."""
    filename: str
    """The file's name in its session directory."""
    suffix: str
    """What the reference's messages call it (``.jsonl``, ``.jsonl.zstd``)."""

    def wrap(self, plaintext: bytes) -> bytes:
        """The bytes to write for ``plaintext`` lines (one zstd frame, or themselves)."""
        ...

    def scan(self, data: bytes, path: str, limit: int) -> ScannedLog:
        """The committed content of a whole file (see ``scan_log``)."""
        ...

    def raw(self, data: bytes, path: str, limit: int) -> bytes:
        """The reference's raw artifact of the file: its plaintext, torn tail included for a
        plain log, the complete frames' for a compressed one."""
        ...

    def summarize(self, ops: FileOps, path: str, size: int, limit: int) -> LogSummary:
        """A streaming verdict on the file (see ``summarize_log``)."""
        ...

    def first_line(self, ops: FileOps, path: str, limit: int) -> bytes | None:
        """The header line (without newline), reading no more than it needs; ``None`` when
        the file is missing or has no complete first line (or frame)."""
        ...


class _Plain:
    name: Literal["none", "zstd"] = "none"
    filename = LOG_NAME
    suffix = ".jsonl"

    def wrap(self, plaintext: bytes) -> bytes:
        return plaintext

    def scan(self, data: bytes, path: str, limit: int) -> ScannedLog:
        return scan_log(data, path)

    def raw(self, data: bytes, path: str, limit: int) -> bytes:
        return data

    def summarize(self, ops: FileOps, path: str, size: int, limit: int) -> LogSummary:
        return summarize_log(ops.read_chunks(path, size), path)

    def first_line(self, ops: FileOps, path: str, limit: int) -> bytes | None:
        first = ops.read_prefix(path, _FIRST_READ)
        while first is not None and b"\n" not in first:
            longer = ops.read_prefix(path, len(first) * 4)
            if longer is None or len(longer) == len(first):
                return None
            first = longer
        return None if not first else first[: first.index(b"\n")]


class _Zstd:
    name: Literal["none", "zstd"] = "zstd"
    filename = ZSTD_LOG_NAME
    suffix = ".jsonl.zstd"

    def wrap(self, plaintext: bytes) -> bytes:
        return compress_frame(plaintext)

    def scan(self, data: bytes, path: str, limit: int) -> ScannedLog:
        return scan_zstd_log(data, path, limit)

    def raw(self, data: bytes, path: str, limit: int) -> bytes:
        return zstd_plaintext(data, path, limit)

    def summarize(self, ops: FileOps, path: str, size: int, limit: int) -> LogSummary:
        data = b"".join(
            ops.read_chunks(path, size)
        )  # compressed: the frames are decoded one by one
        return summarize_zstd_log(data, path, limit)

    def first_line(self, ops: FileOps, path: str, limit: int) -> bytes | None:
        for prefix in _growing_prefixes(ops, path):
            first = frame_end(prefix, 0, path) if prefix else None
            if first is not None:  # only the header's frame is read
                end, declared = first
                line = decompress_frame(prefix[:end], 0, declared, limit, path)
                return line[: line.index(b"\n")] if b"\n" in line else None
        return None


def _growing_prefixes(ops: FileOps, path: str) -> Iterator[bytes]:
    """Longer and longer prefixes of the file, until it has no more."""
    size = _FIRST_READ
    previous = -1
    while True:
        prefix = ops.read_prefix(path, size)
        if prefix is None or len(prefix) == previous:
            return
        yield prefix
        previous, size = len(prefix), size * 4


PLAIN: Final[LogEncoding] = _Plain()
ZSTD: Final[LogEncoding] = _Zstd()
ENCODINGS: Final[dict[str, LogEncoding]] = {"none": PLAIN, "zstd": ZSTD}
"""The encodings by the reference's name."""


FLAT_SUFFIXES: Final = (PLAIN.suffix, ZSTD.suffix)
"""The endings of a flat ``<project>/<id>.jsonl[.zstd]`` log, which the reference refuses."""


def logs_in(directory: str, stat: Callable[[str], Stat | None]) -> list[tuple[str, Stat]]:
    """The logs a session directory holds (plain first) with what ``stat`` says of each:
    one path to check, for every reader of a directory."""
    found = ((os.path.join(directory, e.filename), e) for e in (PLAIN, ZSTD))
    return [(path, entry) for path, _ in found if (entry := stat(path)) is not None]


def encoding_of(path: str) -> LogEncoding:
    """The encoding of a log file, by its name."""
    return ZSTD if path.endswith(ZSTD_LOG_NAME) else PLAIN
