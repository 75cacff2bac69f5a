"""The reference's compressed log, ``session.jsonl.zstd``: a concatenation of independent zstd
frames whose plaintext is exactly what the plain log would hold.

Frames are written as the reference writes them (level 3, a checksum, no content size, no
dictionary: byte-identical to its frames): the header line alone in the first, then one frame
per durable batch, and one for a repair's recovered events and closers.

Reading follows the reference's rules, in its order, with its messages: a structural scan
of the frames without decompressing them (a bad magic number, a reserved bit or block type is
corruption; a file that ends inside a frame has a torn final frame, which starts at the *torn
start*); every complete frame decompressed and its checksum verified; the first frame exactly
one header line; the plaintext scanned with the plain log's rules, where a complete frame must
end on a line boundary; the complete lines that can be decoded from a torn final frame are
*recovered*: returned, and re-appended (in one new frame, before the closers) by the repair
that cuts the file at the torn start.

Decompression is bounded: a frame that declares, or expands to, more than the reader's limit
is refused as corruption once that many bytes (plus at most one 1 MiB read) were produced,
whatever its ratio.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Final

import zstandard

from agent_session.persistence_jsonl.scan import LogSummary, ScannedLog, _scan_log, summarize_log
from agent_session.session import SessionPersistenceCorruptionError
from agent_session.session.json.gcpause import gc_paused

__all__ = [
    "MAGIC",
    "Frames",
    "compress_frame",
    "decompress_frame",
    "frame_end",
    "recover_torn",
    "scan_frames",
    "scan_zstd_log",
    "summarize_zstd_log",
    "zstd_corrupt",
    "zstd_plaintext",
]

MAGIC: Final = b"\x28\xb5\x2f\xfd"
"""A zstd frame's first four bytes (0xFD2FB528, little-endian)."""
LEVEL: Final = 3
_READ: Final = 1 << 20
_local = threading.local()


def zstd_corrupt(path: str, what: str) -> SessionPersistenceCorruptionError:
    """The reference's ``corrupt Zstandard session log: <what>``, naming the file."""
    return SessionPersistenceCorruptionError(f'corrupt Zstandard session log: {what} in "{path}"')


def compress_frame(plaintext: bytes) -> bytes:
    """One frame holding ``plaintext``, as the reference compresses it."""
    compressor: zstandard.ZstdCompressor | None = getattr(_local, "compressor", None)
    if compressor is None:  # one per thread: a compressor is not safe to share
        compressor = _local.compressor = zstandard.ZstdCompressor(
            level=LEVEL, write_checksum=True, write_content_size=False
        )
    stream = compressor.compressobj()
    return stream.compress(plaintext) + stream.flush()


@dataclass(frozen=True, slots=True)
class Frames:
    """Where the frames of a file are."""

    complete: list[tuple[int, int]]
    """``(start, end)`` of every complete frame, in order."""
    torn_start: int | None
    """Where a final frame that the file ends inside starts, or ``None``."""
    declared: list[int | None]
    """Each complete frame's declared content size, where it declares one."""


def scan_frames(data: bytes, path: str) -> Frames:
    """Find the frames of ``data`` without decompressing them (the reference's structural
    scan). Raises :class:`SessionPersistenceCorruptionError` for a bad magic number, a
    reserved frame-header bit or a reserved block type, naming the byte."""
    complete: list[tuple[int, int]] = []
    declared: list[int | None] = []
    pos, size = 0, len(data)
    while pos < size:
        found = frame_end(data, pos, path)
        if found is None:
            return Frames(complete, pos, declared)
        end, content_size = found
        complete.append((pos, end))
        declared.append(content_size)
        pos = end
    return Frames(complete, None, declared)


def frame_end(data: bytes, start: int, path: str) -> tuple[int, int | None] | None:
    """The end of the frame at ``start`` and its declared content size; ``None`` when the
    data ends inside it. Raises as :func:`scan_frames` for that frame."""
    size = len(data)
    if size - start < 4:
        if data[start:] != MAGIC[: size - start]:
            raise zstd_corrupt(path, f"invalid frame magic at byte {start}")
        return None
    if data[start : start + 4] != MAGIC:
        raise zstd_corrupt(path, f"invalid frame magic at byte {start}")
    pos = start + 4
    if pos >= size:
        return None
    descriptor = data[pos]
    if descriptor & 0x18:
        raise zstd_corrupt(path, f"reserved frame-header bit at byte {pos}")
    single_segment = bool(descriptor & 0x20)
    fcs_flag = descriptor >> 6
    fcs_size = (1 if single_segment else 0, 2, 4, 8)[fcs_flag]
    header_size = 1 + (0 if single_segment else 1) + (0, 1, 2, 4)[descriptor & 3] + fcs_size
    if pos + header_size > size:
        return None
    content_size: int | None = None
    if fcs_size:
        field = data[pos + header_size - fcs_size : pos + header_size]
        content_size = int.from_bytes(field, "little") + (256 if fcs_size == 2 else 0)
    pos += header_size
    while True:
        if pos + 3 > size:
            return None
        block = int.from_bytes(data[pos : pos + 3], "little")
        kind, length = (block >> 1) & 3, block >> 3
        if kind == 3:
            raise zstd_corrupt(path, f"reserved block type at byte {pos}")
        pos += 3 + (1 if kind == 1 else length)
        if pos > size:
            return None
        if block & 1:
            break
    if descriptor & 4:
        pos += 4
        if pos > size:
            return None
    return pos, content_size


def decompress_frame(
    frame: bytes, start: int, declared: int | None, limit: int, path: str
) -> bytes:
    """The plaintext of one complete frame, its checksum verified. Raises corruption (the
    reference's ``frame at byte <start> failed validation``) for a frame that does not decode
    or whose checksum differs, and for one that declares or produces more than ``limit``
    bytes (at most ``limit`` plus one :data:`_READ` are ever produced)."""
    if declared is not None and declared > limit:
        raise _too_large(start, limit, path)
    pieces: list[bytes] = []  # joined once at the end: no buffer regrown and copied
    total = 0
    try:
        for piece in _decoded(frame):
            pieces.append(piece)
            total += len(piece)
            if total > limit:
                raise _too_large(start, limit, path)
    except zstandard.ZstdError:
        raise zstd_corrupt(path, f"frame at byte {start} failed validation") from None
    return b"".join(pieces)


def _decoded(frame: bytes) -> Iterator[bytes]:
    """The plaintext of one frame, at most :data:`_READ` bytes at a time (so a bomb is seen
    before it has expanded much), its checksum checked at the frame's end."""
    reader = zstandard.ZstdDecompressor().stream_reader(frame, read_across_frames=False)
    while piece := reader.read(_READ):
        yield piece


def _too_large(start: int, limit: int, path: str) -> SessionPersistenceCorruptionError:
    return zstd_corrupt(
        path, f"frame at byte {start} expands to more than max_log_bytes ({limit:,} bytes)"
    )


def recover_torn(torn: bytes, limit: int) -> bytes:
    """The complete lines that can be decoded from the available bytes of a torn final frame
    (no end-of-frame or checksum check; a decoding error yields nothing, as in the
    reference), at most ``limit`` bytes of plaintext."""
    out = bytearray()
    stream = zstandard.ZstdDecompressor().decompressobj()  # no end of frame required
    view = memoryview(torn)
    try:  # small inputs: one can expand to at most ~8 MiB (a run-length block per 4 bytes)
        for offset in range(0, len(torn), 256):
            out += stream.decompress(bytes(view[offset : offset + 256]))
            if len(out) > limit:
                break
    except zstandard.ZstdError:
        return b""
    whole = bytes(out[:limit])
    end = whole.rfind(b"\n")
    return whole[: end + 1] if end >= 0 else b""


def scan_zstd_log(data: bytes, path: str, limit: int, *, check_version: bool = True) -> ScannedLog:
    """Scan a whole ``session.jsonl.zstd`` file by the reference's rules (see the module
    docstring). ``committed_bytes`` is the torn start (or the file's length), and a torn
    final frame's recoverable lines are in ``recovered`` (their events in ``events``)."""
    plaintext, frames = _complete_plaintext(data, path, limit)
    with gc_paused():
        scanned = _scan_log(plaintext, path, check_version, strict=True)
        if scanned.committed_bytes < len(plaintext):
            raise zstd_corrupt(path, "complete frame contains a torn JSONL record")
        if frames.torn_start is None:
            return ScannedLog(scanned.header, scanned.events, len(data), len(data))
        recovered = recover_torn(data[frames.torn_start :], max(limit - len(plaintext), 0))
        if recovered:
            extended = _scan_log(plaintext + recovered, path, check_version)
            recovered = recovered[: extended.committed_bytes - len(plaintext)]
            scanned = extended
    return ScannedLog(scanned.header, scanned.events, frames.torn_start, len(data), recovered)


def _complete_plaintext(data: bytes, path: str, limit: int) -> tuple[bytes, Frames]:
    """The plaintext of the complete frames (checked), and where the frames are."""
    frames = _headed_frames(data, path)
    parts: list[bytes] = []
    total = 0
    for (start, end), declared in zip(frames.complete, frames.declared, strict=True):
        part = decompress_frame(data[start:end], start, declared, limit - total, path)
        if not parts and (not part.endswith(b"\n") or part.count(b"\n") != 1):
            raise zstd_corrupt(path, "first frame is not exactly one header line")
        parts.append(part)
        total += len(part)
    return b"".join(parts), frames


def _headed_frames(data: bytes, path: str) -> Frames:
    """:func:`scan_frames`, refusing a file without one complete frame (no header)."""
    frames = scan_frames(data, path)
    if not frames.complete:
        raise SessionPersistenceCorruptionError(
            f'empty or header-less Zstandard session log: "{path}"'
        )
    return frames


def zstd_plaintext(data: bytes, path: str, limit: int) -> bytes:
    """The plaintext of the complete frames (a torn final frame is left out): what the
    reference's raw artifact of a compressed log holds."""
    return _complete_plaintext(data, path, limit)[0]


def summarize_zstd_log(data: bytes, path: str, limit: int) -> LogSummary:
    """What :func:`persistence_jsonl.scan.summarize_log` says of a compressed log, decoding
    one frame at a time; sizes and the torn flag are the file's."""
    frames = _headed_frames(data, path)

    def plaintext() -> Iterator[bytes]:
        for (start, end), declared in zip(frames.complete, frames.declared, strict=True):
            yield decompress_frame(data[start:end], start, declared, limit, path)
        if frames.torn_start is not None:
            yield recover_torn(data[frames.torn_start :], limit)

    summary = summarize_log(plaintext(), path)
    torn_start = frames.torn_start if frames.torn_start is not None else len(data)
    return LogSummary(
        summary.header,
        summary.events,
        summary.last_bracket,
        torn_start,
        len(data),
        summary.turns,
    )
