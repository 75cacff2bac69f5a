"""On-disk names and the header line, exactly as the reference lays them out.

``<root>/<project dir>/<encoded id>/session.jsonl``: the project dir is ``_no-cwd`` or
``--<cwd slug>--``; ids are escaped injectively per UTF-16 code unit.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator, Mapping
from typing import Any, Final

from agent_session.persistence_jsonl.fileio import FileOps
from agent_session.session import (
    SessionFormatUnsupportedError,
    SessionHeader,
    SessionPersistenceCorruptionError,
)
from agent_session.session.events.header import (
    SESSION_FORMAT_VERSION,
    header_problem,
    version_message,
)
from agent_session.session.json.codec import decode_json, encode_json
from agent_session.session.json.lossless import is_safe_int, snapshot

__all__ = [
    "LOCK_NAME",
    "LOG_NAME",
    "NO_CWD_DIR",
    "check_storable_id",
    "encode_segment",
    "iter_entries",
    "parse_header",
    "project_key",
    "session_dir",
]

LOG_NAME: Final = "session.jsonl"
"""The transcript's file name inside its session directory."""
LOCK_NAME: Final = "session.lock"
"""The writer lock file beside a transcript (``flock``; holds the owner's pid)."""
ZSTD_LOG_NAME: Final = "session.jsonl.zstd"
"""The reference's compressed transcript name (refused by this backend)."""
NO_CWD_DIR: Final = "_no-cwd"
"""Project directory of sessions without a cwd."""
_SAFE: Final = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-")
_SEPARATORS: Final = frozenset("/\\:")
_MAX_SLUG: Final = 251


def _utf16_units(text: str) -> list[int]:
    """The UTF-16 code units of ``text`` (lone surrogates stay single units)."""
    data = text.encode("utf-16-be", "surrogatepass")
    return [int.from_bytes(data[i : i + 2], "big") for i in range(0, len(data), 2)]


def _escape_unit(unit: int) -> str:
    char = chr(unit)
    return char if char in _SAFE else f"~{unit:04X}"


MAX_ID_UNITS: Final = 4096
"""The longest session id (in UTF-16 code units) this backend stores."""
MAX_SEGMENT: Final = 255
"""The longest directory name most file systems accept (``NAME_MAX``)."""


def encode_segment(id: str) -> str:
    """The directory name of a session id: ``[A-Za-z0-9._-]`` kept, every other UTF-16 code
    unit (``~`` included) written ``~XXXX``; ``.`` and ``..`` escaped. Injective.

    The reference layout cannot store a name longer than 255 characters; for such ids (which
    the reference cannot store at all) the name is ``~~`` and the SHA-256 of the escaped id, a
    form no escaped id takes. Raises ``ValueError`` for an empty id or one longer than
    :data:`MAX_ID_UNITS` code units.
    """
    if id == "":
        raise ValueError("cannot encode an empty path segment")
    units = _utf16_units(id)
    if len(units) > MAX_ID_UNITS:
        raise ValueError(
            f"session id is too long to store: {len(units)} UTF-16 code units "
            f"(at most {MAX_ID_UNITS})"
        )
    if id in (".", ".."):
        return "~002E" * len(id)
    segment = "".join(_escape_unit(unit) for unit in units)
    if len(segment) > MAX_SEGMENT:
        return "~~" + hashlib.sha256(segment.encode("ascii")).hexdigest()
    return segment


def check_storable_id(id: str) -> None:
    """Raise ``ValueError`` saying why ``id`` cannot be stored, if it cannot."""
    encode_segment(id)
    try:
        id.encode("utf-8")
    except UnicodeEncodeError as e:
        raise ValueError(
            f"session id contains a lone surrogate U+{ord(id[e.start]):04X} at index "
            f"{e.start}, which cannot be written as UTF-8 JSON"
        ) from None


def project_key(cwd: str) -> str:
    """The project directory of a cwd: ``--<slug>--``, at most 255 characters. Separators
    (``/``, ``\\``, ``:``) become one ``-``; other unsafe code units ``~XXXX``. Lossy."""
    if cwd == "":
        raise ValueError("cannot encode an empty project path")
    parts: list[str] = []
    for unit in _utf16_units(cwd):
        if chr(unit) in _SEPARATORS:
            if not parts or parts[-1] != "-":
                parts.append("-")
        else:
            parts.append(_escape_unit(unit))
    slug = "".join(parts).lstrip("-") or "root"
    return f"--{slug[:_MAX_SLUG]}--"


def project_dir(cwd: str | None) -> str:
    """``_no-cwd`` or the cwd's project key."""
    return NO_CWD_DIR if cwd is None else project_key(cwd)


def session_dir(root: str, header: SessionHeader) -> str:
    """The directory holding a session's transcript."""
    return os.path.join(root, project_dir(header.cwd), encode_segment(header.id))


def iter_entries(ops: FileOps, root: str) -> Iterator[str]:
    """The path of every entry of every project directory under ``root``, sorted: the one
    walk of a store root (session directories, and anything else planted there, for the
    caller to judge). A project directory this process cannot list is yielded itself, so
    the caller meets the permission error when it looks inside, as for a session directory
    it cannot enter. A missing root has none."""
    for project in ops.listdir(root):
        project_path = os.path.join(root, project)
        found = ops.stat(project_path)
        if found is None or not found.is_dir:
            continue
        try:
            entries = ops.listdir(project_path)
        except PermissionError:
            yield project_path
            continue
        for entry in entries:
            yield os.path.join(project_path, entry)


_RETIRED: Final = ("sandboxMode", "approvalPolicy")
_HEADER_KEYS: Final = tuple(str(f.alias) for f in SessionHeader.model_fields.values())
"""The header's wire keys, in order (unknown extra keys on disk are dropped)."""


def parse_header(line: bytes, path: str, *, check_version: bool = True) -> SessionHeader:
    """Parse a header line (without newline) with the reference's checks, in its order: JSON,
    then a version refusal, then the shape. Raises :class:`SessionFormatUnsupportedError` or
    :class:`SessionPersistenceCorruptionError` naming ``path``. Without ``check_version`` a
    header of another version is returned as it is (listing reads headers that way)."""
    try:
        raw: Any = decode_json(line)
    except ValueError:
        raise SessionPersistenceCorruptionError(
            f'corrupt session log "{path}": header line is not valid JSON'
        ) from None
    if isinstance(raw, Mapping):
        version: Any = raw.get("version")
        foreign = (
            isinstance(version, int | float)
            and not isinstance(version, bool)
            and version != SESSION_FORMAT_VERSION
        )
        if foreign and not check_version and is_safe_int(version):
            return SessionHeader.model_validate(
                {key: raw[key] for key in _HEADER_KEYS if key in raw} | {"version": version}
            )
        if foreign:
            ident = raw.get("id")
            name = ident if isinstance(ident, str) else encode_json(snapshot(ident))
            if isinstance(name, bytes):
                name = name.decode()
            raise SessionFormatUnsupportedError(
                f"{version_message(name, version)} (raw log: {path})"
            )
    if not _is_header(raw):
        raise SessionPersistenceCorruptionError(
            f'corrupt session log "{path}": first line is not a session header'
        )
    if any(key in raw for key in _RETIRED):
        raise SessionPersistenceCorruptionError(
            f'corrupt session log "{path}": session header uses retired policy baseline fields'
        )
    fields = {key: raw[key] for key in _HEADER_KEYS if key in raw}
    return SessionHeader.model_validate(fields)


def _is_header(raw: Any) -> bool:
    return (
        isinstance(raw, Mapping)
        and raw.get("type") == "session"
        and header_problem(raw, stored=True) is None
    )
