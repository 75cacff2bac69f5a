"""Session statistics: the reference's ``sessionStats`` projection
(``@deepseek-ai/dsh-session-stats``), a pure fold over a log's events with its field names and
rules, so the figures are the reference's for the same log.

- ``turns``: changes of turn number between consecutive ``step/end``\\ s; ``steps``:
  ``step/end``\\ s.
- ``llmMs``: per step, ``step/start`` → its ``assistant/message``; ``ttftMs`` / ``ttftSteps``:
  ``step/start`` → the step's first token delta, over the steps that had one; ``decodeMs`` /
  ``decodeTokens``: first token → message, and the message's ``usage.outputTokens``, over the
  steps with both.
- ``toolMs``: the sum of each call's ``tool/call`` → its ``tool/result`` (parallel calls count
  each; a call whose turn ended without a result never counts).

The fold reads events as they are given: over a loaded log (closers added) an interrupted turn
counts its closing ``step/end`` and a recorded call's ``TOOL_OUTCOME_UNKNOWN`` result, as the
reference's do.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from agent_session.session.events.eventlog import LazyRun, is_run, iter_parts
from agent_session.session.events.types import (
    ASSISTANT_CHUNK,
    ASSISTANT_MESSAGE,
    STEP_END,
    STEP_START,
    TOOL_CALL,
    TOOL_RESULT,
    TURN_END,
)

__all__ = ["STATS_FIELDS", "SessionStats", "session_stats"]

STATS_FIELDS: Final = (
    "turns",
    "steps",
    "llmMs",
    "toolMs",
    "ttftMs",
    "ttftSteps",
    "decodeMs",
    "decodeTokens",
)
"""The reference's fields, in its order."""


_NEVER: Final = object()


@dataclass(slots=True)
class _OpenStep:
    turn: Any
    step: Any
    start: int
    first_token: int | None = None


@dataclass(slots=True)
class SessionStats:
    """The fold's state; :meth:`value` is the reference's view."""

    values: dict[str, Any] = field(default_factory=lambda: dict.fromkeys(STATS_FIELDS, 0))
    as_of_seq: int = -1
    """The last seq folded (``-1``: none)."""
    last_turn: Any = _NEVER
    """The turn of the last ``step/end`` (``_NEVER`` before the first)."""
    open_step: _OpenStep | None = None
    pending_calls: dict[Any, int] = field(default_factory=dict)

    def value(self) -> dict[str, Any]:
        """``{turns, steps, llmMs, toolMs, ttftMs, ttftSteps, decodeMs, decodeTokens}``."""
        return dict(self.values)

    def fold(self, events: Iterable[Any]) -> SessionStats:
        """Fold ``events`` (built events, wire dicts, or an event log with packed runs) into
        the state; return it."""
        for event in iter_parts(events):
            if is_run(event):
                self._run(event)
            elif isinstance(event, Mapping):
                self._event(event.get("type", ""), event.get("data"), event.get("time", 0))
                self.as_of_seq = event.get("seq", self.as_of_seq + 1)
            else:
                self._event(event.type, event.data, event.time)
                self.as_of_seq = event.seq
        return self

    def _run(self, run: LazyRun) -> None:
        """A packed run of streamed deltas: only a step's first token matters, so the run is
        built only while the open step has none."""
        step = self.open_step
        if step is not None and step.first_token is None:
            for event in run:
                self._event(event.type, event.data, event.time)
                if step.first_token is not None:
                    break
        self.as_of_seq = run.seq0 + len(run) - 1

    def _event(self, kind: str, data: Any, time: int) -> None:
        data = data if isinstance(data, Mapping) else {}
        values, step = self.values, self.open_step
        if kind == STEP_START:
            self.open_step = _OpenStep(data.get("turn"), data.get("step"), time)
        elif kind == ASSISTANT_CHUNK:
            waiting = step is not None and step.first_token is None and _same(step, data)
            if waiting and step is not None and _is_token(data.get("chunk")):
                step.first_token = time
        elif kind == ASSISTANT_MESSAGE:
            if step is None or not _same(step, data):
                return
            values["llmMs"] += max(0, time - step.start)
            if step.first_token is not None:
                values["ttftMs"] += max(0, step.first_token - step.start)
                values["ttftSteps"] += 1
                usage = data.get("usage")
                tokens = usage.get("outputTokens") if isinstance(usage, Mapping) else None
                if _count(tokens):
                    values["decodeMs"] += max(0, time - step.first_token)
                    values["decodeTokens"] += tokens
            self.open_step = None
        elif kind == TOOL_CALL:
            self.pending_calls[data.get("callId")] = time
        elif kind == TOOL_RESULT:
            message = data.get("message")
            source = message.get("source") if isinstance(message, Mapping) else None
            call = source.get("callId") if isinstance(source, Mapping) else None
            if call in self.pending_calls:
                values["toolMs"] += max(0, time - self.pending_calls.pop(call))
        elif kind == STEP_END:
            values["steps"] += 1
            turn = data.get("turn")
            if turn != self.last_turn or self.last_turn is _NEVER:
                values["turns"] += 1
            self.last_turn = turn
            self.open_step = None
        elif kind == TURN_END:
            self.pending_calls = {}


def session_stats(events: Iterable[Any]) -> dict[str, Any]:
    """The reference's ``sessionStats`` value over ``events``."""
    return SessionStats().fold(events).value()


def _same(step: _OpenStep, data: Mapping[str, Any]) -> bool:
    return bool(data.get("turn") == step.turn and data.get("step") == step.step)


def _is_token(chunk: Any) -> bool:
    """A text or reasoning delta with text, or a tool-call delta with arguments or a name."""
    if not isinstance(chunk, Mapping):
        return False
    kind = chunk.get("type")
    if kind in ("text-delta", "reasoning-delta"):
        text = chunk.get("text")
        return isinstance(text, str) and text != ""
    if kind == "tool-call-delta":
        delta = chunk.get("argumentsDelta")
        return (isinstance(delta, str) and delta != "") or "name" in chunk
    return False


def _count(value: Any) -> bool:
    """A finite number ≥ 0 (not a bool)."""
    return (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and math.isfinite(value)
        and value >= 0
    )
