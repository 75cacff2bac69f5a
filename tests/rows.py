"""Test helpers over packed storage rows: their members, built now."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agent_session.persistence_jsonl.rows import lazy_row_events
from agent_session.session import SessionEvent


def expand_row_events(raw: Mapping[str, Any]) -> list[SessionEvent]:
    """The events a packed row stands for. Raises ``MalformedRowError`` naming what is wrong."""
    return list(lazy_row_events(raw).events())


def expand_row(raw: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The wire events a packed row stands for."""
    return [e.to_json() for e in expand_row_events(raw)]
