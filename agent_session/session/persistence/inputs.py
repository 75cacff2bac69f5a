"""Checks of what callers hand :class:`~session.persistence.service.SessionPersistence`: its
options, a new session's header and a batch of events, each refused with a ``TypeError``
that says what is wrong before anything is written."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from agent_session.session.errors import JsonValueError
from agent_session.session.events.event import SessionEvent
from agent_session.session.events.header import SessionHeader, header_problem
from agent_session.session.json.lossless import is_safe_int, snapshot

__all__ = ["checked_header", "snapshot_batch", "validate_options"]

_MAX_DELAY = 2_147_483_647


def validate_options(cache_size: int, delay_ms: int) -> None:
    if not is_safe_int(cache_size) or cache_size < 1:
        raise TypeError("prepared_session_cache_size must be a positive safe integer")
    if not is_safe_int(delay_ms) or not 1 <= delay_ms <= _MAX_DELAY:
        raise TypeError("write_batch_max_delay_ms must be an integer between 1 and 2147483647")


def checked_header(header: SessionHeader | Mapping[str, Any]) -> SessionHeader:
    raw = header.to_json() if isinstance(header, SessionHeader) else header
    try:
        value: Any = snapshot(raw, "metadata")
    except JsonValueError as e:
        raise TypeError(f"session metadata must be losslessly JSON-serializable: {e}") from e
    if not isinstance(value, Mapping):
        raise TypeError("session metadata must be a JSON object")
    problem = header_problem(value)
    if problem is not None:
        raise TypeError(f"session metadata {problem}")
    return SessionHeader.model_validate(value)


def snapshot_batch(events: Sequence[SessionEvent | Mapping[str, Any]]) -> list[SessionEvent]:
    batch: list[SessionEvent] = []
    for index, event in enumerate(events):
        if isinstance(event, SessionEvent):
            batch.append(event)
            continue
        kind = event.get("type") if isinstance(event, Mapping) else None
        try:
            batch.append(SessionEvent.from_json(event))
        except JsonValueError as e:
            raise TypeError(
                f'session event batch is not losslessly JSON-serializable: event "{kind}" at '
                f"index {index} carries non-JSON-serializable data: {e}"
            ) from e
    return batch
