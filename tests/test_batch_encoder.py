"""The batch encoder writes the format's rule exactly: for events appended one by one, and
for a live log whose streamed deltas were appended as columns (``Session.append_delta``), in
any split into batches (mid-run included); and what it writes reads back as the same
events."""

from __future__ import annotations

import itertools
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from agent_session.persistence_jsonl.encoder import encode_batch, encode_lines
from agent_session.persistence_jsonl.rows import run_key
from agent_session.persistence_sqlite.rows import batch_values, event_values
from agent_session.session import Session, SessionEvent, decode_json
from agent_session.session.events.eventlog import LazyRun
from agent_session.session.json.codec import encode_json
from tests.rows import expand_row_events
from tests.sweeps import examples

KINDS = ("text-delta", "reasoning-delta", "tool-call-delta")

delta = st.tuples(
    st.sampled_from(KINDS),
    st.integers(1, 2),  # turn
    st.integers(0, 1),  # index
    st.text(max_size=4),
    st.sampled_from([0, 1, 7, 2**53]),  # time step; the last cannot be packed
)
other = st.tuples(st.just("other"), st.integers(0, 3))
plans = st.lists(st.one_of(delta, delta, delta, other), max_size=40)


def live(plan: list[tuple[Any, ...]], columns: bool = False) -> Session:
    """A session that appended ``plan``; with ``columns``, text and reasoning deltas went
    through ``append_delta`` (kept as runs of columns)."""
    now = [0]
    session = Session.create("enc", clock=lambda: now[0])
    for op in plan:
        if op[0] == "other":
            session.append("plugin/note", {"n": op[1]})
            continue
        kind, turn, index, text, step = op
        now[0] = min(now[0] + step, 2**53 - 1)
        chunk: dict[str, Any] = {"type": kind, "index": index}
        if kind == "tool-call-delta":
            chunk |= {"id": f"call-{index}", "argumentsDelta": text}
        elif columns:
            session.append_delta(turn, 1, text, index=index, kind=kind)
            continue
        else:
            chunk["text"] = text
        session.append("assistant/chunk", {"turn": turn, "step": 1, "chunk": chunk})
    return session


def build(plan: list[tuple[Any, ...]]) -> list[SessionEvent]:
    return list(live(plan).events)


def read_back(data: bytes) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    for line in data.splitlines():
        raw = decode_json(line)
        if raw["type"].endswith("-chunks"):
            events += [e.to_json() for e in expand_row_events(raw)]
        else:
            events.append(SessionEvent.from_json(raw).to_json())
    return events


def reference_lines(events: list[SessionEvent], pack: bool) -> bytes:
    """The format's rule written plainly: maximal runs of three or more deltas with one run
    key, consecutive seqs and safe time steps become one row; everything else one line."""
    runs: list[list[SessionEvent]] = []
    for event in events:
        key = run_key(event) if pack else None
        last = runs[-1][-1] if runs else None
        if (
            key is not None
            and last is not None
            and run_key(last) == key
            and event.seq == last.seq + 1
            and abs(event.time - last.time) <= 2**53 - 1
        ):
            runs[-1].append(event)
        else:
            runs.append([event])
    out = b""
    for run in runs:
        if len(run) < 3:
            out += b"".join(e.encode() + b"\n" for e in run)
            continue
        chunk = run[0].data["chunk"]
        payload = "args" if chunk["type"] == "tool-call-delta" else "texts"
        data: dict[str, Any] = {
            "turn": run[0].data["turn"],
            "step": run[0].data["step"],
            "index": chunk["index"],
            "dt": [b.time - a.time for a, b in itertools.pairwise(run)],
        }
        if payload == "args":
            data["id"] = chunk["id"]
            if "name" in chunk:
                data["name"] = chunk["name"]
        data[payload] = [
            e.data["chunk"]["argumentsDelta" if payload == "args" else "text"] for e in run
        ]
        kind = {"text-delta": "text-chunks", "reasoning-delta": "reasoning-chunks"}.get(
            chunk["type"], "tool-call-chunks"
        )
        out += encode_json({"type": kind, "seq0": run[0].seq, "time0": run[0].time, "data": data})
        out += b"\n"
    return out


@settings(max_examples=examples(300), deadline=None)
@given(plans, st.booleans())
def test_encode_batch_follows_the_format_rule(plan: list[tuple[Any, ...]], pack: bool) -> None:
    events = build(plan)
    assert encode_batch(events, pack) == reference_lines(events, pack)


@settings(max_examples=examples(300), deadline=None)
@given(plans, st.lists(st.integers(0, 40), max_size=5), st.booleans())
def test_a_live_log_encodes_as_its_events_do_in_any_split(
    plan: list[tuple[Any, ...]], cuts: list[int], pack: bool
) -> None:
    """The live path: batches are slices of the log's view, whose deltas are runs of columns
    (cut mid-run where a batch ends); each encodes exactly as the same events appended one by
    one, and the whole reads back as them."""
    session = live(plan, columns=True)
    view = session.events
    events = build(plan)
    assert [e.to_json() for e in view] == [e.to_json() for e in events]
    bounds = sorted({0, len(events), *(c for c in cuts if c < len(events))})
    written = b""
    for start, end in itertools.pairwise(bounds):
        batch = session.events[start:end]  # a fresh view: its runs unbuilt
        encoded = encode_batch(batch, pack)
        assert encoded == reference_lines(events[start:end], pack)
        lines = encode_lines(session.events[start:end], pack)
        assert b"".join(line + b"\n" for line, _ in lines) == encoded
        assert sum(count for _, count in lines) == end - start
        written += encoded
    assert read_back(written) == [e.to_json() for e in events]


@settings(max_examples=examples(300), deadline=None)
@given(plans)
def test_lines_count_the_events_each_holds(plan: list[tuple[Any, ...]]) -> None:
    """``encode_lines`` (what the PostgreSQL backend stores as rows): a packed row holds a run
    of three or more, every other line one event."""
    events = build(plan)
    lines = encode_lines(events, True)
    assert b"".join(line + b"\n" for line, _ in lines) == encode_batch(events, True)
    for line, count in lines:
        packed = decode_json(line)["type"].endswith("-chunks")
        assert count >= 3 if packed else count == 1


def test_a_delta_run_is_encoded_without_building_it() -> None:
    session = live([("text-delta", 1, 0, f"t{i}", 1) for i in range(50)], columns=True)
    batch = session.events
    assert encode_batch(batch, True).count(b"\n") == 1
    assert not any(isinstance(p, LazyRun) and p.built for p in batch.parts)


@settings(max_examples=examples(200), deadline=None)
@given(plans, st.lists(st.integers(0, 40), max_size=3))
def test_sqlite_rows_of_a_live_log_are_its_events_rows(
    plan: list[tuple[Any, ...]], cuts: list[int]
) -> None:
    """The SQLite store's rows of a batch whose deltas are runs of columns: the rows of the
    same events built one by one."""
    session = live(plan, columns=True)
    events = build(plan)
    bounds = sorted({0, len(events), *(c for c in cuts if c < len(events))})
    for start, end in itertools.pairwise(bounds):
        batch = session.events[start:end]
        assert batch_values("s", batch) == [event_values("s", e) for e in events[start:end]]
    assert not any(isinstance(p, LazyRun) and p.built for p in session.events.parts)
