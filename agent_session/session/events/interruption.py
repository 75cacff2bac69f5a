"""What a crash left: whether a log's last turn was closed as interrupted, and how each of its
unanswered calls was answered (:func:`interruption`), so an application can tell its user
without scanning events itself."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from agent_session.session.events.eventlog import is_run, iter_parts
from agent_session.session.events.outcomes import TOOL_NOT_STARTED, TOOL_OUTCOME_UNKNOWN
from agent_session.session.events.turns import brackets
from agent_session.session.events.types import TOOL_RESULT, TURN_END

__all__ = ["Interruption", "interruption"]


@dataclass(frozen=True, slots=True)
class Interruption:
    """The last turn of a log, closed as ``interrupted`` by crash repair (or by an
    integration closing a turn a run left open, as a restart would)."""

    turn: Any
    """The number of the interrupted turn."""
    outcome_unknown: tuple[str, ...]
    """Call ids answered ``TOOL_OUTCOME_UNKNOWN``: recorded, so the body may have run and
    had its effect; check the outside world (by the call id) before running it again."""
    not_started: tuple[str, ...]
    """Call ids answered ``TOOL_NOT_STARTED``: the model asked, and no body ever ran."""


def interruption(events: Sequence[Any]) -> Interruption | None:
    """The :class:`Interruption` of ``events`` when its last turn ended ``interrupted``;
    ``None`` when it ended any other way, is still open (running) or there is none. Reads
    only the last turn."""
    turns = brackets(events)
    if turns.last != "end" or turns.start_index is None:
        return None
    unknown: list[str] = []
    not_started: list[str] = []
    interrupted = False
    for event in iter_parts(events[turns.start_index :]):
        if is_run(event):
            continue  # packed streaming deltas: never a result or a bracket
        data = event.data if isinstance(event.data, Mapping) else {}
        if event.type == TURN_END:
            reason = data.get("reason")
            interrupted = isinstance(reason, Mapping) and reason.get("kind") == "interrupted"
        elif event.type == TOOL_RESULT:
            code, call_id = _answer(data)
            if code == TOOL_OUTCOME_UNKNOWN:
                unknown.append(call_id)
            elif code == TOOL_NOT_STARTED:
                not_started.append(call_id)
    if not interrupted:
        return None
    return Interruption(turns.start_number, tuple(unknown), tuple(not_started))


def _answer(data: Mapping[str, Any]) -> tuple[Any, str]:
    """A ``tool/result``'s error code (``None`` when it has none) and the call it answers."""
    error = data.get("error")
    message = data.get("message")
    source = message.get("source") if isinstance(message, Mapping) else None
    call_id = source.get("callId") if isinstance(source, Mapping) else None
    code = error.get("code") if isinstance(error, Mapping) else None
    return code, call_id if isinstance(call_id, str) else ""
