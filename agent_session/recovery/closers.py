"""Closers for an interrupted turn.

:func:`closers` is pure: given a loaded log, it returns the synthetic events that balance an
open last turn, or nothing for a balanced log. Nothing is truncated or rewritten: an interrupted
turn is closed after the last durable event.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from agent_session.session.events.budget import budget_parked
from agent_session.session.events.event import SessionEvent, build_event
from agent_session.session.events.eventlog import is_run, iter_parts
from agent_session.session.events.outcomes import (
    TOOL_NOT_STARTED,
    TOOL_NOT_STARTED_NAME,
    TOOL_NOT_STARTED_TEXT,
    TOOL_OUTCOME_UNKNOWN,
    TOOL_OUTCOME_UNKNOWN_NAME,
    TOOL_OUTCOME_UNKNOWN_TEXT,
)
from agent_session.session.events.parked import parked_calls
from agent_session.session.events.subagents import ChildAnswer
from agent_session.session.events.turns import brackets
from agent_session.session.events.types import (
    ASSISTANT_MESSAGE,
    STEP_END,
    STEP_START,
    TOOL_CALL,
    TOOL_RESULT,
    TURN_END,
)
from agent_session.session.json.lossless import snapshot

__all__ = [
    "REPAIR_RESULT_PREFIX",
    "TOOL_NOT_STARTED",
    "TOOL_NOT_STARTED_TEXT",
    "TOOL_OUTCOME_UNKNOWN",
    "TOOL_OUTCOME_UNKNOWN_TEXT",
    "answers",
    "closers",
    "crash_point",
    "is_balanced",
    "is_repair_result",
]

# The reference writes closers with this envelope key order.
_CLOSER_ORDER: Final = ("type", "seq", "time", "data", "surfaceOp", "sourceEventSeqs")


class _Pending:
    __slots__ = ("call_seq", "step")

    def __init__(self, step: Any) -> None:
        self.step = step
        self.call_seq: int | None = None


_STEP_TYPES = frozenset(
    {
        STEP_START,
        STEP_END,
        ASSISTANT_MESSAGE,
        TOOL_CALL,
        TOOL_RESULT,
    }
)
"""The event types :func:`_scan` reads inside the open turn; it skips every other event."""


def _scan(events: Sequence[SessionEvent]) -> tuple[Any, Any, dict[Any, _Pending]]:
    """The open turn's number, its open step and its unanswered calls; ``(None, None, {})``
    when every turn is closed. Only the open turn is read."""
    turns = brackets(events)
    start = turns.open_start
    if start is None:
        return None, None, {}
    open_step: Any = None
    pending: dict[Any, _Pending] = {}
    for event in iter_parts(events[start + 1 :]):
        if is_run(event):
            continue  # unbuilt packed deltas: never a step bracket or a call
        kind = event.type
        if kind not in _STEP_TYPES:
            continue  # streaming deltas and the like: the bulk of a log
        data = event.data
        mapping = data if isinstance(data, Mapping) else {}
        if kind == STEP_START:
            open_step = mapping.get("step")
        elif kind == STEP_END:
            open_step = None
            pending = {}
        elif kind == ASSISTANT_MESSAGE:
            pending.update(_asked(mapping))
        else:
            _answered(pending, event)
    return turns.open_turn, open_step, pending


def _asked(data: Mapping[str, Any]) -> dict[Any, _Pending]:
    """The calls an ``assistant/message``'s data asks for, by call id."""
    message = data.get("message")
    content = message.get("content") if isinstance(message, Mapping) else None
    return {
        block.get("id"): _Pending(data.get("step"))
        for block in (content if isinstance(content, Sequence) else ())
        if isinstance(block, Mapping) and block.get("type") == "tool-call"
    }


def _answered(pending: dict[Any, _Pending], event: SessionEvent) -> None:
    """Note in ``pending`` what a ``tool/call`` (recorded) or ``tool/result`` (answered,
    dropped) says of its call; other events say nothing."""
    mapping = event.data if isinstance(event.data, Mapping) else {}
    if event.type == TOOL_CALL:
        entry = pending.get(mapping.get("callId"))
        if entry is not None:
            entry.call_seq = event.seq
    elif event.type == TOOL_RESULT:
        message = mapping.get("message")
        source = message.get("source") if isinstance(message, Mapping) else None
        if isinstance(source, Mapping):
            pending.pop(source.get("callId"), None)


REPAIR_RESULT_PREFIX: Final = "interrupted-tool-result-"
"""How the message id of every ``tool/result`` that crash repair adds starts (the
reference's ids)."""


def is_repair_result(event: Any) -> bool:
    """Whether ``event`` is a ``tool/result`` that crash repair added."""
    if event.type != TOOL_RESULT or not isinstance(event.data, Mapping):
        return False
    message = event.data.get("message")
    return isinstance(message, Mapping) and str(message.get("id", "")).startswith(
        REPAIR_RESULT_PREFIX
    )


def crash_point(events: Sequence[Any], end: int) -> Any:
    """The crash point of a turn that repair closed with ``events[end]`` (its ``turn/end``):
    the last event before the closers (the added results and ``step/end``), which reuse its
    time."""
    at = end - 1
    while at > 0 and (events[at].type == STEP_END or is_repair_result(events[at])):
        at -= 1
    return events[at]


def _missing_result(
    turn: Any,
    entry: _Pending,
    call_id: Any,
    seq: int,
    time: int,
    child: ChildAnswer | None = None,
) -> SessionEvent:
    """The error result of a call that has none: outcome unknown when its ``tool/call`` was
    recorded (the body may have run), not started otherwise; for a call that runs a child
    agent, what the child's log says (``child``): its answer when it finished."""
    call_seq = entry.call_seq
    recorded = call_seq is not None and (child is None or child.state != "not-started")
    text = TOOL_OUTCOME_UNKNOWN_TEXT if recorded else TOOL_NOT_STARTED_TEXT
    text = child.text if child is not None else text
    failed = child is None or child.state != "finished"  # (a finished child's answer lands)
    block = {"type": "tool-result", "toolCallId": call_id, **({"isError": True} if failed else {})}
    message = {
        "id": f"{REPAIR_RESULT_PREFIX}{call_id}-{seq}",
        "role": "user",
        "source": {"kind": "tool", "callId": call_id},
        "content": [
            {**block, "content": [{"type": "text", "text": child.text if child else text}]}
        ],
    }
    data: dict[str, Any] = {"turn": turn, "step": entry.step, "message": message}
    if failed:
        data["error"] = {
            "name": TOOL_OUTCOME_UNKNOWN_NAME if recorded else TOOL_NOT_STARTED_NAME,
            "code": TOOL_OUTCOME_UNKNOWN if recorded else TOOL_NOT_STARTED,
        }
    if child is not None:
        data["meta"] = child.meta()
    sources = (call_seq,) if call_seq is not None else None
    return build_event(
        TOOL_RESULT, seq, time, snapshot(data, "data"), "append", sources, key_order=_CLOSER_ORDER
    )


def answers(events: Sequence[SessionEvent]) -> list[SessionEvent]:
    """The results a *balanced* log lacks for the calls of its last assistant message (a turn
    that ended with calls unanswered, as an older harness recorded a cancelled turn), to be
    appended after it; ``[]`` when every such call has a result or the last turn is open
    (then :func:`closers` answers them). Only the last assistant message can be answered
    this way: a result must come before the next assistant message."""
    if not events or brackets(events).open_turn is not None:
        return []
    pending: dict[Any, _Pending] = {}
    turn: Any = None
    for event in iter_parts(events):
        if is_run(event):
            continue  # unbuilt packed deltas: never a message, call or result
        if event.type == ASSISTANT_MESSAGE:  # a block without a string id cannot be answered
            asked = _asked(event.data)
            pending = {id: entry for id, entry in asked.items() if isinstance(id, str)}
            turn = event.data.get("turn")
        else:
            _answered(pending, event)
    last = events[-1]
    return [
        _missing_result(turn, entry, call_id, last.seq + 1 + offset, last.time)
        for offset, (call_id, entry) in enumerate(pending.items())
    ]


def is_balanced(events: Sequence[SessionEvent]) -> bool:
    """True when the log is empty or its last turn bracket is closed."""
    return brackets(events).open_turn is None


def closers(
    events: Sequence[SessionEvent], children: Mapping[Any, ChildAnswer] | None = None
) -> list[SessionEvent]:
    """The events that close an interrupted last turn, in order; ``[]`` for a balanced log.

    One error ``tool/result`` per call the open step's assistant message asked for and that has
    no result (``TOOL_NOT_STARTED`` without sources when no ``tool/call`` was recorded,
    ``TOOL_OUTCOME_UNKNOWN`` citing the ``tool/call`` seq otherwise), then ``step/end`` if a
    step is open, then ``turn/end {kind: "interrupted"}``. Seqs continue the log; every closer
    reuses the last event's ``time``; ids and texts are the reference's.

    A turn parked for an approval (:func:`session.events.parked.parked_calls`) or over its
    budget (:func:`session.events.budget.budget_parked`) is not interrupted: it gets no
    closers, and stays open until a decision is carried out or the budget raised.
    """
    open_turn, open_step, pending = _scan(events)
    if open_turn is None or not events or parked_calls(events) or budget_parked(events):
        return []
    last = events[-1]
    seq, time = last.seq + 1, last.time
    known = children or {}
    out = [
        _missing_result(open_turn, entry, call_id, seq + index, time, known.get(call_id))
        for index, (call_id, entry) in enumerate(pending.items())
    ]
    seq += len(out)
    if open_step is not None:
        out.append(
            build_event(
                STEP_END,
                seq,
                time,
                snapshot({"turn": open_turn, "step": open_step}),
                key_order=_CLOSER_ORDER,
            )
        )
        seq += 1
    turn_end = {"turn": open_turn, "reason": {"kind": "interrupted"}}
    out.append(build_event(TURN_END, seq, time, snapshot(turn_end), key_order=_CLOSER_ORDER))
    return out
