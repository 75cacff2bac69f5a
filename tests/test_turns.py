"""``session.events.turns``: the one reading of turn brackets agrees with a plain reading of the
event types, whether events are built, wire dicts, or an ``EventLog`` with unbuilt packed runs."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from agent_session.session import SessionEvent
from agent_session.session.events.eventlog import EventLog, LazyRun
from agent_session.session.events.turns import UNNUMBERED, bracket, brackets, next_turn_number
from tests.sweeps import examples

KINDS = ("turn/start", "turn/end", "plugin/note", "stream/delta")


def build(kinds: list[str]) -> list[SessionEvent]:
    """Events of the given types; every ``turn/start`` is numbered 10, 11, ... in order."""
    out: list[SessionEvent] = []
    number = 10
    for kind in kinds:
        if kind == "turn/start":
            data: dict[str, Any] = {"turn": number}
            number += 1
        else:
            data = {"n": len(out)}
        out.append(SessionEvent.from_json({"type": kind, "seq": len(out), "time": 5, "data": data}))
    return out


def packed(events: list[SessionEvent]) -> EventLog[SessionEvent]:
    """The log with each run of consecutive ``stream/delta`` events as one unbuilt lazy run
    whose build fails the test: a bracket reader must never build one."""
    parts: list[Any] = []
    run: list[SessionEvent] = []

    def flush() -> None:
        if run:
            frozen = list(run)

            def refuse() -> list[SessionEvent]:
                raise AssertionError(f"built the packed run at seq {frozen[0].seq}")

            parts.append(LazyRun(frozen[0].type, frozen[0].seq, len(frozen), refuse))
            run.clear()

    for event in events:
        if event.type == "stream/delta":
            run.append(event)
        else:
            flush()
            parts.append((event,))
    flush()
    return EventLog(parts)


@settings(max_examples=examples(300), deadline=None)
@given(st.lists(st.sampled_from(KINDS), max_size=40))
def test_brackets_agree_with_a_plain_reading(kinds: list[str]) -> None:
    starts = [i for i, k in enumerate(kinds) if k == "turn/start"]
    ends = [i for i, k in enumerate(kinds) if k == "turn/end"]
    last_start = starts[-1] if starts else None
    is_open = last_start is not None and (not ends or ends[-1] < last_start)
    events = build(kinds)
    for form in (events, [e.to_json() for e in events], packed(events)):
        found = brackets(form)
        assert found.start_index == last_start
        assert found.open_start == (last_start if is_open else None)
        assert found.open_turn == (10 + len(starts) - 1 if is_open else None)
        assert next_turn_number(form) == (10 + len(starts) if starts else 1)
        expected_last = None
        for kind in kinds:
            if kind in ("turn/start", "turn/end"):
                expected_last = "start" if kind == "turn/start" else "end"
        assert found.last == expected_last


def test_a_start_without_a_number_is_open_and_unnumbered() -> None:
    raw = [{"type": "turn/start", "seq": 0, "time": 1, "data": {}}]
    assert brackets(raw).open_turn == UNNUMBERED
    assert next_turn_number(raw) == 1


def test_bracket_names_only_turn_brackets() -> None:
    assert bracket({"type": "turn/start"}) == "start"
    assert bracket({"type": "turn/end"}) == "end"
    assert bracket({"type": "step/end"}) is None
    assert bracket(42) is None
