"""The ids of a log's spans and records, derived from the log alone (its session id, its
incarnation, a seq and a role): a turn sent twice gets the same ids, so a receiver keeps it
once."""

from __future__ import annotations

import hashlib
import json

__all__ = ["span_id", "trace_id"]


def _digest(session_id: str, incarnation: int, *key: object) -> bytes:
    """The digest the ids of one log's spans are cut from (32 bytes)."""
    text = json.dumps([session_id, incarnation, *key], ensure_ascii=False)
    return hashlib.sha256(text.encode()).digest()


def trace_id(session_id: str, incarnation: int, seq: int) -> int:
    """The trace id of the turn that starts at ``seq`` (never 0)."""
    return int.from_bytes(_digest(session_id, incarnation, "trace", seq)[:16], "big") or 1


def span_id(session_id: str, incarnation: int, role: str, seq: int) -> int:
    """The id of the span of ``role`` (``turn``, ``chat``, ``tool``...) at ``seq`` (never 0)."""
    return int.from_bytes(_digest(session_id, incarnation, role, seq)[:8], "big") or 1
