"""Turn and step brackets for events an integration writes from another framework's
history (an SDK run, an imported pydantic-ai conversation): where the open turn stands, and
the events that open, advance and close it in the reference's order (``turn/start``,
``step/start``, the messages, ``tool/call`` before its ``tool/result``, ``step/end``,
``turn/end``).

A turn left open by an earlier run is closed with crash repair's closers, exactly as a
restart would close it: a recorded call without a result is answered ``TOOL_OUTCOME_UNKNOWN``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from agent_session.recovery.closers import closers
from agent_session.session.errors import ApprovalPendingError
from agent_session.session.events.builders import tool_call
from agent_session.session.events.eventlog import is_run, iter_parts
from agent_session.session.events.parked import parked_calls
from agent_session.session.events.turns import Brackets, brackets, next_turn_number
from agent_session.session.events.types import (
    ASSISTANT_MESSAGE,
    STEP_END,
    STEP_START,
    TOOL_CALL,
    TOOL_RESULT,
    TURN_END,
    TURN_START,
)
from agent_session.session.json.lossless import thaw
from agent_session.session.live.session import Session

__all__ = [
    "BracketCursor",
    "OpenTurn",
    "end_turn",
    "next_step",
    "open_turn",
    "record_call",
    "start_turn",
]


@dataclass(slots=True)
class OpenTurn:
    """Where the open turn of a session stands."""

    number: int
    start: int = 0
    """The seq of its ``turn/start``."""
    last_step: int = 0
    """The highest step number the turn has opened."""
    step_open: bool = False
    step_answered: bool = False
    """Whether the open step already has an assistant message (a model response)."""
    answered_any: bool = False
    """Whether any step of the turn has an assistant message."""
    calls: dict[str, tuple[int, str, str, int | None]] = field(default_factory=dict)
    """Each call the turn's assistant messages asked for: ``(step, name, arguments, seq of
    its tool/call or None)``."""
    answered: set[str] = field(default_factory=set)
    """Calls of the turn that have a result."""

    @property
    def unanswered(self) -> list[str]:
        """Calls asked for without a result, in order."""
        return [call for call in self.calls if call not in self.answered]


class BracketCursor:
    """The turn brackets of one live session's log, read incrementally: each call reads only
    the events appended since the last (a log only grows), so finding the open turn costs
    what the turn holds, not what the whole history holds."""

    def __init__(self) -> None:
        self._session: Session | None = None
        self._done = 0
        self._known = Brackets(None, None, None)

    def marks(self, session: Session) -> Brackets:
        """:func:`brackets` of ``session.events``."""
        events = session.events
        if session is not self._session or len(events) < self._done:
            self._session, self._done, self._known = session, 0, Brackets(None, None, None)
        if self._done < len(events):
            new, known, done = brackets(events[self._done :]), self._known, self._done
            if new.start_index is None:
                self._known = Brackets(
                    new.last or known.last, known.start_index, known.start_number
                )
            else:
                self._known = Brackets(new.last, done + new.start_index, new.start_number)
            self._done = len(events)
        return self._known


def open_turn(events: Sequence[Any], marks: Brackets | None = None) -> OpenTurn | None:
    """The open last turn of ``events`` (whose :func:`brackets` are ``marks`` when given),
    or ``None`` when every turn is closed."""
    if marks is None:
        marks = brackets(events)
    start = marks.open_start
    if start is None:
        return None
    number = marks.open_turn
    turn = OpenTurn(number if type(number) is int else 0, start)
    for event in iter_parts(events[start + 1 :]):
        if is_run(event):
            continue
        kind, data = event.type, event.data
        if kind == STEP_START:
            turn.step_open, turn.step_answered = True, False
            step = data.get("step")
            turn.last_step = max(turn.last_step, step if type(step) is int else 0)
        elif kind == STEP_END:
            turn.step_open = False
        elif kind == ASSISTANT_MESSAGE:
            turn.step_answered = turn.answered_any = True
            for block in data["message"].get("content") or ():
                if isinstance(block, Mapping) and block.get("type") == "tool-call":
                    step = data.get("step")
                    entry = (step if type(step) is int else 0, block["name"], block["arguments"])
                    turn.calls[block["id"]] = (*entry, None)
        elif kind == TOOL_CALL and data.get("callId") in turn.calls:
            step, name, arguments, _ = turn.calls[data["callId"]]
            turn.calls[data["callId"]] = (step, name, arguments, event.seq)
        elif kind == TOOL_RESULT:
            turn.answered.add(data["message"]["source"]["callId"])
    return turn


def start_turn(
    session: Session, stale: OpenTurn | None = None, marks: Brackets | None = None
) -> OpenTurn:
    """Open a new turn and its first step, after closing ``stale`` (the turn an earlier run
    left open) with crash repair's closers (``marks``: the log's brackets, when known)."""
    if stale is not None:
        parked = parked_calls(session.events[stale.start :])
        if parked:
            ids = ", ".join(f'"{c.call_id}" (tool "{c.tool_name}")' for c in parked)
            raise ApprovalPendingError(
                f'session "{session.id}" is parked awaiting approval of {ids}: decide it '
                "(agent-session approve / reject), then resume the run"
            )
        close_stale(session, stale)
    last = marks.start_number if marks is not None else None
    number = last + 1 if type(last) is int else next_turn_number(session.events)
    start = session.append(TURN_START, {"turn": number}).seq
    session.append(STEP_START, {"turn": number, "step": 1})
    return OpenTurn(number, start, last_step=1, step_open=True)


def close_stale(session: Session, stale: OpenTurn) -> None:
    """Close ``stale``, a turn a run left open (an exception, max turns), with crash
    repair's closers, exactly as a restart would close it."""
    # (read from its turn/start: the closers of the same turn)
    for event in closers(session.events[stale.start :]):
        session.append(
            event.type,
            thaw(event.data),
            surface_op=event.surface_op,
            source_event_seqs=event.source_event_seqs,
        )


def next_step(
    session: Session, turn: OpenTurn | None, *, new: bool = True, marks: Brackets | None = None
) -> OpenTurn:
    """The step the next message goes into: the open one, unless ``new`` and it already has
    a model response (then the next); a turn is opened when none is."""
    if turn is None:
        return start_turn(session, None, marks)
    if turn.step_open and not (new and turn.step_answered):
        return turn
    if turn.step_open:
        session.append(STEP_END, {"turn": turn.number, "step": turn.last_step})
    turn.last_step += 1
    session.append(STEP_START, {"turn": turn.number, "step": turn.last_step})
    turn.step_open, turn.step_answered = True, False
    return turn


def end_turn(session: Session, turn: OpenTurn, reason: str = "completed") -> None:
    """Close ``turn`` (its open step first) for ``reason`` (``completed``, or
    ``interrupted`` for a turn a crash repair answered)."""
    if turn.step_open:
        session.append(STEP_END, {"turn": turn.number, "step": turn.last_step})
    session.append(TURN_END, {"turn": turn.number, "reason": {"kind": reason}})


def record_call(session: Session, turn: OpenTurn, call_id: str) -> int:
    """The seq of the ``tool/call`` of ``call_id`` (asked for in ``turn``), appended now
    when none is recorded yet."""
    step, name, arguments, seq = turn.calls[call_id]
    if seq is None:
        seq = session.append(TOOL_CALL, tool_call(turn.number, step, call_id, name, arguments)).seq
        turn.calls[call_id] = (step, name, arguments, seq)
    return seq
