"""The session header: the metadata written as the first line of a log, outside the event
sequence (it has no seq and never enters the surface)."""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from typing import Any, Final, Literal

from pydantic import ConfigDict

from agent_session.session.errors import JsonValueError, SessionHeaderError
from agent_session.session.events.wire import WireModel
from agent_session.session.json.codec import encode_json
from agent_session.session.json.lossless import is_safe_int, snapshot

__all__ = [
    "SESSION_FORMAT_VERSION",
    "SessionHeader",
    "header_line",
    "header_problem",
    "now_ms",
    "version_message",
    "version_problem",
]

SESSION_FORMAT_VERSION: Final = 0
"""The log format this build reads and writes."""


def version_message(id: str, version: int | float) -> str:
    """The one refusal of a log in another format version: newer (upgrade the harness) or
    older (no upgrade path in this build)."""
    shown = int(version) if float(version).is_integer() else version
    if version > SESSION_FORMAT_VERSION:
        direction = (
            f"but this harness reads only v{SESSION_FORMAT_VERSION}: the log was written by a "
            "newer harness — upgrade the harness to open it"
        )
    else:
        direction = (
            f"older than the supported v{SESSION_FORMAT_VERSION}, and this build ships no "
            "upgrade path for it"
        )
    return f'session "{id}" uses log format v{shown}, {direction}'


def version_problem(header: SessionHeader) -> str | None:
    """:func:`version_message` for a header of another version; ``None`` for this one."""
    if header.version == SESSION_FORMAT_VERSION:
        return None
    return version_message(header.id, header.version)


def now_ms() -> int:
    """The current Unix time in milliseconds (``Date.now()``)."""
    return time.time_ns() // 1_000_000


class SessionHeader(WireModel):
    """Metadata of one session, written as the first line of its log.

    ``to_json()`` writes ``version, id, createdAt, cwd?, parentSession?, seedLength?, origin?,
    delegationDepth, agentPreset?`` in that order, omitting unset optional fields.
    """

    model_config = ConfigDict(extra="ignore")

    version: int = SESSION_FORMAT_VERSION
    """Log format version; this build reads only 0."""
    id: str
    """The session id."""
    created_at: int
    """Creation time, Unix epoch milliseconds."""
    cwd: str | None = None
    """Absolute working directory the session belongs to, if any."""
    parent_session: str | None = None
    """Id of the session this one was forked or delegated from."""
    seed_length: int | None = None
    """How many events were seeded from the parent (the fork boundary + 1)."""
    origin: Literal["subagent"] | None = None
    """``subagent`` for sessions created by delegation."""
    delegation_depth: int | None = 0
    """How many delegation hops separate this session from a user-facing one; ``None`` only
    for a header read from a store that kept it absent (the reference's SQLite rows), which
    a JSONL header writes as 0."""
    agent_preset: str | None = None
    """Name of the agent preset the session was created with."""

    @classmethod
    def validated(cls, raw: Any, session_id: str) -> SessionHeader:
        """Check a raw header for ``session_id`` with the reference's rules and texts.

        Raises :class:`SessionHeaderError` (a ``ValueError``) naming the first broken rule.
        """
        if isinstance(raw, SessionHeader):
            raw = raw.to_json()
        if not isinstance(raw, Mapping):
            raise SessionHeaderError("session header is not a plain JSON record")
        try:
            value: Any = snapshot(raw, "header")
        except JsonValueError as e:
            raise SessionHeaderError(
                f"session header is not losslessly JSON-serializable: {e}"
            ) from e
        problem = header_problem(value, session_id=session_id)
        if problem is not None:
            raise SessionHeaderError(f"session header {problem}")
        return cls.model_validate(value)


def header_problem(
    value: Mapping[str, Any], *, session_id: str | None = None, stored: bool = False
) -> str | None:
    """The first header rule ``value`` (raw wire keys) breaks, as ``"<field> must …"`` text for
    the caller to prefix with its subject; ``None`` when it is a valid header.

    This is the only header validator; its three users differ only by these flags:

    - ``session_id``: the id the header must carry; ``None`` asks for any non-empty string
      (creating a session), or any string when ``stored`` (the identity check comes later).
    - ``stored``: a header read from storage, with the reference reader's rules:
      ``delegationDepth`` is required (its writer always writes it) and ``cwd`` need not be
      absolute (its reader never checked that).
    """
    version = value.get("version")
    if (
        version != SESSION_FORMAT_VERSION
        or not isinstance(version, int | float)
        or (isinstance(version, bool))
    ):
        return f"version must be {SESSION_FORMAT_VERSION}, got {version!r}"
    ident = value.get("id")
    if session_id is not None:
        if ident != session_id:
            return f'id "{ident}" does not match session id "{session_id}"'
    elif not isinstance(ident, str) or not (ident or stored):
        return "id must be a string" if stored else "id must be a non-empty string"
    created = value.get("createdAt")
    if not is_safe_int(created) or created < 0:
        return "createdAt must be a non-negative safe integer"
    if "cwd" in value:
        cwd = value["cwd"]
        if not isinstance(cwd, str):
            return "cwd must be a string"
        if not stored and not os.path.isabs(cwd):
            return f'cwd must be an absolute path, got "{cwd}"'
    if "parentSession" in value and not isinstance(value["parentSession"], str):
        return "parentSession must be a string"
    if stored and "delegationDepth" not in value:
        return "delegationDepth must be a non-negative safe integer"
    for key in ("seedLength", "delegationDepth"):
        if key in value and (not is_safe_int(value[key]) or value[key] < 0):
            return f"{key} must be a non-negative safe integer"
    if "origin" in value and value["origin"] != "subagent":
        return 'origin must be "subagent"'
    if "agentPreset" in value and not isinstance(value["agentPreset"], str):
        return "agentPreset must be a string"
    return None


def header_line(header: SessionHeader) -> bytes:
    """The header line of a JSONL log (without newline): ``{"type":"session", version, id,
    createdAt, ...}`` with ``delegationDepth`` always present (0 when the header has none),
    as the reference writes it. The one writer of this line, for every backend that renders
    a session as JSONL."""
    wire = header.to_json()
    if "delegationDepth" not in wire:  # absent in a header read from SQLite rows
        wire = SessionHeader.model_validate({**wire, "delegationDepth": 0}).to_json()
    return encode_json(snapshot({"type": "session", **wire}))
