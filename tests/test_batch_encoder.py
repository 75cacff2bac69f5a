"""``BatchEncoder`` (per-event encoding done at commit time) writes exactly the bytes of
``encode_batch`` for any batch split and any subset of prepared events, and what it writes
reads back as the same events."""

from __future__ import annotations

import itertools
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from persistence_jsonl.encoder import BatchEncoder, encode_batch, encode_lines
from persistence_jsonl.rows import run_key
from session import Session, SessionEvent, decode_json
from session.json.codec import encode_json
from tests.rows import expand_row_events

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


def build(plan: list[tuple[Any, ...]]) -> list[SessionEvent]:
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
        else:
            chunk["text"] = text
        session.append("assistant/chunk", {"turn": turn, "step": 1, "chunk": chunk})
    return list(session.events)


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


@settings(max_examples=300, deadline=None)
@given(plans, st.booleans())
def test_encode_batch_follows_the_format_rule(plan: list[tuple[Any, ...]], pack: bool) -> None:
    events = build(plan)
    assert encode_batch(events, pack) == reference_lines(events, pack)


@settings(max_examples=300, deadline=None)
@given(plans, st.lists(st.integers(0, 40), max_size=4), st.data())
def test_prepared_encoding_is_encode_batch(
    plan: list[tuple[Any, ...]], cuts: list[int], data: st.DataObject
) -> None:
    events = build(plan)
    prepared = data.draw(st.lists(st.booleans(), min_size=len(events), max_size=len(events)))
    for pack in (True, False):
        encoder = BatchEncoder(pack)
        for event, ready in zip(events, prepared, strict=True):
            if ready:
                encoder.prepare(event)
        bounds = sorted({0, len(events), *(c for c in cuts if c < len(events))})
        written = b""
        for start, end in itertools.pairwise(bounds):
            batch = events[start:end]
            encoded = encoder.encode(batch)
            assert encoded == encode_batch(batch, pack)
            written += encoded
        assert len(encoder) == 0  # everything prepared was released by its batch
        assert read_back(written) == [e.to_json() for e in events]


@settings(max_examples=300, deadline=None)
@given(plans, st.lists(st.integers(0, 40), max_size=4), st.data())
def test_prepared_lines_are_encode_batch_line_by_line(
    plan: list[tuple[Any, ...]], cuts: list[int], data: st.DataObject
) -> None:
    """``lines`` (what the PostgreSQL backend stores as rows) takes prepared work as
    ``encode`` does: the same lines, each with how many events it holds."""
    events = build(plan)
    prepared = data.draw(st.lists(st.booleans(), min_size=len(events), max_size=len(events)))
    encoder = BatchEncoder(True)
    for event, ready in zip(events, prepared, strict=True):
        if ready:
            encoder.prepare(event)
    bounds = sorted({0, len(events), *(c for c in cuts if c < len(events))})
    for start, end in itertools.pairwise(bounds):
        batch = events[start:end]
        lines = encoder.lines(batch)
        assert lines == encode_lines(batch, True)
        assert b"".join(line + b"\n" for line, _ in lines) == encode_batch(batch, True)
        assert sum(count for _, count in lines) == len(batch)
        for line, count in lines:  # a packed row holds a run of three or more; others one
            packed = decode_json(line)["type"].endswith("-chunks")
            assert count >= 3 if packed else count == 1
    assert len(encoder) == 0


def test_a_stale_prepared_event_is_not_used() -> None:
    """Another session object reusing a seq (an id collision) never gets the old bytes."""
    first = Session.create("x", clock=lambda: 1)
    second = Session.create("x", clock=lambda: 2)
    old = first.append("plugin/note", {"who": "first"})
    new = second.append("plugin/note", {"who": "second"})
    encoder = BatchEncoder(pack=True)
    encoder.prepare(old)
    assert encoder.encode([new]) == new.encode() + b"\n"
    assert len(encoder) == 0


@settings(max_examples=300, deadline=None)
@given(plans, st.lists(st.integers(0, 40), max_size=5))
def test_checkpoints_of_exactly_what_was_prepared(
    plan: list[tuple[Any, ...]], cuts: list[int]
) -> None:
    """The live path: each batch is prepared event by event (runs are encoded as soon as they
    close, possibly mid-batch) and then written whole; cuts fall anywhere, mid-run included."""
    events = build(plan)
    bounds = sorted({0, len(events), *(c for c in cuts if c < len(events))})
    for pack in (True, False):
        encoder = BatchEncoder(pack)
        written = b""
        for start, end in itertools.pairwise(bounds):
            batch = events[start:end]
            for event in batch:
                encoder.prepare(event)
            encoded = encoder.encode(batch)
            assert encoded == encode_batch(batch, pack)
            assert len(encoder) == 0
            written += encoded
        assert read_back(written) == [e.to_json() for e in events]


def test_a_partly_written_batch_leaves_the_rest_encodable() -> None:
    """A batch that takes only the first prepared events (a write that started before the
    others were committed) leaves the rest, open run included, to the next batch."""
    plan: list[tuple[Any, ...]] = [("text-delta", 1, 0, f"t{i}", 1) for i in range(6)]
    events = build([("other", 1), *plan, ("other", 2)])
    encoder = BatchEncoder(pack=True)
    for event in events:
        encoder.prepare(event)
    head, tail = events[:4], events[4:]
    assert encoder.encode(head) == encode_batch(head, pack=True)
    assert len(encoder) == len(tail)
    assert encoder.encode(tail) == encode_batch(tail, pack=True)
    assert read_back(encode_batch(head, True) + encode_batch(tail, True)) == [
        e.to_json() for e in events
    ]
