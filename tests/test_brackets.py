"""The turn brackets read from a log's end (what every turn's checks read) are the ones a
whole forward pass reads, on plain sequences and on logs of parts."""

from __future__ import annotations

import itertools
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from agent_session.session.events.eventlog import EventLog
from agent_session.session.events.turns import brackets
from tests.sweeps import examples

ENTRY = st.one_of(
    st.builds(lambda n: {"type": "turn/start", "data": {"turn": n}}, st.integers(0, 9)),
    st.just({"type": "turn/start", "data": {}}),
    st.just({"type": "turn/start", "data": "odd"}),
    st.just({"type": "turn/end", "data": {}}),
    st.just({"type": "step/start", "data": {}}),
    st.just({"type": "user/message", "data": {}}),
)


@settings(max_examples=examples(400), deadline=None)
@given(entries=st.lists(ENTRY, max_size=30), cuts=st.lists(st.integers(0, 30), max_size=4))
def test_brackets_from_the_end_are_the_forward_pass_s(entries: list[Any], cuts: list[int]) -> None:
    forward = brackets(iter(entries))  # (an iterator: the one-pass reading)
    assert brackets(entries) == forward
    bounds = sorted({0, len(entries), *(c for c in cuts if c <= len(entries))})
    parts = [tuple(entries[a:b]) for a, b in itertools.pairwise(bounds) if b > a]
    assert brackets(EventLog(parts)) == forward
