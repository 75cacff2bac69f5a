"""The ``request/header`` an integration logs from what a framework sends its model (the
system prompt, the tools, the model and its settings), in the reference's shape, so
``logged_requests`` reads back what each request was sent from an SDK run's log as from the
loop's.

A header is appended only when it differs from the last one the log holds (``initial`` when
the log holds none, else ``change``), inside the open turn, before the answer it belongs to:
one header serves every request that was sent with it, and nothing is stored twice."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agent_session.session.events.types import REQUEST_HEADER
from agent_session.session.json.codec import encode_json
from agent_session.session.json.lossless import snapshot, thaw
from agent_session.session.live.session import Session

__all__ = ["HeaderLog"]


class HeaderLog:
    """The request header last logged in one live session: the log is read backwards once
    per live session to find it, then only what this object logs is remembered."""

    def __init__(self) -> None:
        self._session: Session | None = None
        self._last: bytes | None = None

    def log(self, session: Session, header: Mapping[str, Any]) -> bool:
        """Append ``header`` to ``session`` (its turn must be open) unless it is the last one
        logged; ``True`` when appended. Raises ``TypeError`` naming the path of a value that
        is not lossless JSON (nothing is appended)."""
        if session is not self._session:
            last = next((e for e in reversed(session.events) if e.type == REQUEST_HEADER), None)
            data = last.data if last is not None else None
            logged = data.get("header") if isinstance(data, Mapping) else None
            self._session = session
            self._last = None if logged is None else encode_json(snapshot(thaw(logged)))
        encoded = encode_json(snapshot(dict(header)))
        if encoded == self._last:
            return False
        reason = "initial" if self._last is None else "change"
        session.append(REQUEST_HEADER, {"header": dict(header), "reason": reason})
        self._last = encoded
        return True
