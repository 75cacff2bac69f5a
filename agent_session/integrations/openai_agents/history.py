"""Reading a session as the SDK sees it: its item history, and where its open turn stands
(pure functions of a live session's events and surface)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from agent_session.integrations.openai_agents.items import items_of
from session.events.event import SessionEvent
from session.events.eventlog import LazyRun, iter_parts
from session.events.surface import SurfaceReplace
from session.events.turns import brackets
from session.events.types import (
    ASSISTANT_MESSAGE,
    FRAMEWORK_ITEM,
    FRAMEWORK_ITEMS_FORGOTTEN,
    STEP_END,
    STEP_START,
    TOOL_CALL,
    TOOL_RESULT,
)
from session.json.lossless import thaw
from session.live.session import Session

__all__ = ["Entry", "OpenTurn", "history", "open_turn"]


@dataclass(frozen=True, slots=True)
class Entry:
    """One item of the history and the event it comes from."""

    item: dict[str, Any]
    seq: int


def history(session: Session) -> list[Entry]:
    """The SDK items of ``session`` in order: the items of each surface event in surface
    order, and the kept ``openai-agents/item`` events not forgotten since, each where it was
    added. A surface event that replaced others takes the place of the first one it replaced
    (so ``pop_item``'s replacement stays where the popped message was)."""
    events = session.events
    anchor: dict[int, int] = {}
    kept: list[SessionEvent] = []
    forgotten: set[int] = set()
    for event in iter_parts(events):
        if type(event) is LazyRun:
            continue  # packed chunk deltas: never an item
        op = event.surface_op
        if op is not None:
            start = op.start if isinstance(op, SurfaceReplace) else event.seq
            anchor[event.seq] = anchor.get(start, start)
        elif event.type == FRAMEWORK_ITEM:
            kept.append(event)
        elif event.type == FRAMEWORK_ITEMS_FORGOTTEN:
            forgotten.update(event.data.get("seqs") or ())
    ordered: list[tuple[int, int, int, dict[str, Any]]] = []
    for seq in session.surface.nodes:
        for index, item in enumerate(items_of(events[seq])):
            ordered.append((anchor[seq], seq, index, item))
    for event in kept:
        if event.seq not in forgotten:
            ordered.append((event.seq, event.seq, 0, thaw(event.data["item"])))
    ordered.sort(key=lambda entry: entry[:3])
    return [Entry(item, seq) for _, seq, _, item in ordered]


@dataclass(slots=True)
class OpenTurn:
    """Where the open turn of a session stands."""

    number: int
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


def open_turn(events: Sequence[Any]) -> OpenTurn | None:
    """The open last turn of ``events``, or ``None`` when every turn is closed."""
    marks = brackets(events)
    start = marks.open_start
    if start is None:
        return None
    number = marks.open_turn
    turn = OpenTurn(number if type(number) is int else 0)
    for event in iter_parts(events[start + 1 :]):
        if type(event) is LazyRun:
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
