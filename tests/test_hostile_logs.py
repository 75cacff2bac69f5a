"""Hostile logs: whatever bytes sit in a transcript, reading it gives a clear
``SessionError`` or a correct tolerated-tail result, never another exception, within bounded
time and memory."""

from __future__ import annotations

import asyncio
import tempfile
import time
import tracemalloc
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent_session.persistence_jsonl import JsonlPersistence
from agent_session.persistence_jsonl.scan import LogSummary, ScannedLog, scan_log, summarize_log
from agent_session.session import (
    SessionError,
    SessionFormatUnsupportedError,
    SessionPersistenceCorruptionError,
)
from agent_session.session.events.turns import brackets
from tests.corpus import case_bytes, cases
from tests.sweeps import examples

HEADER = b'{"type":"session","version":0,"id":"h","createdAt":1,"delegationDepth":0}\n'
VALID = next(
    case_bytes(c) for c in cases() if c["scenario"] == "tool:1" and c["case"] == "prefix-21-lines"
)


def read(data: bytes, *, load: bool = False) -> tuple[str, object]:
    """Write ``data`` as the transcript of session "h" and read it; the outcome kind."""
    with tempfile.TemporaryDirectory() as root:
        path = Path(root, "_no-cwd", "h", "session.jsonl")
        path.parent.mkdir(parents=True)
        path.write_bytes(data)

        async def run() -> tuple[str, object]:
            backend = JsonlPersistence(root)
            try:
                stored = await (backend.load("h") if load else backend.inspect("h"))
            except SessionFormatUnsupportedError as e:
                return "unsupported", e
            except SessionPersistenceCorruptionError as e:
                return "corrupt", e
            except SessionError as e:
                return "other session error", e
            finally:
                await backend.aclose()
            return "ok", stored

        return asyncio.run(run())


def header_with_id(data: bytes) -> bytes:
    """``VALID`` belongs to session "upstream-tool"; give it the id our reader asks for."""
    return data.replace(b'"id":"upstream-tool"', b'"id":"h"', 1)


SAMPLE = header_with_id(VALID)


@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=400))
def test_random_bytes_after_a_header(garbage: bytes) -> None:
    kind, _ = read(HEADER + garbage)
    assert kind in ("ok", "corrupt", "unsupported")


@settings(max_examples=examples(200), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=300))
def test_random_bytes_as_a_whole_file(garbage: bytes) -> None:
    kind, _ = read(garbage)
    assert kind in ("corrupt", "unsupported")


@settings(max_examples=examples(200), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.integers(min_value=len(HEADER), max_value=len(SAMPLE) - 1),
    st.binary(min_size=1, max_size=20),
)
def test_mutated_real_logs(position: int, patch: bytes) -> None:
    mutated = SAMPLE[:position] + patch + SAMPLE[position + len(patch) :]
    kind, result = read(mutated, load=True)
    assert kind in ("ok", "corrupt", "unsupported")
    if kind == "ok":  # a tolerated tail: the valid prefix, closed
        events = result.events  # type: ignore[attr-defined]
        assert [e.seq for e in events] == list(range(len(events)))


@pytest.mark.parametrize(
    ("name", "data", "expected"),
    [
        (
            "invalid utf-8 in a value",
            HEADER + b'{"type":"turn/start","seq":0,"time":1,"data":{"turn":1,"x":"\xff\xfe"}}\n',
            "ok",
        ),
        ("NUL run", HEADER + b"\0" * 10_000 + b"\n", "ok"),
        (
            "NUL run then a turn/end",
            HEADER + b"\0" * 100 + b'\n{"type":"turn/end","seq":0,"time":1,"data":{"turn":1,'
            b'"reason":{"kind":"completed"}}}\n',
            "corrupt",
        ),
        (
            "valid line then garbage",
            HEADER + b'{"type":"turn/start","seq":0,"time":1,"data":{"turn":1}}\n#$%^&*',
            "ok",
        ),
        ("null line", HEADER + b"null\n", "ok"),
        ("seq as a string", HEADER + b'{"type":"turn/start","seq":"0","time":1,"data":{}}\n', "ok"),
        ("seq as a float", HEADER + b'{"type":"turn/start","seq":0.5,"time":1,"data":{}}\n', "ok"),
        (
            "header with a string createdAt",
            b'{"type":"session","version":0,"id":"h","createdAt":"1","delegationDepth":0}\n',
            "corrupt",
        ),
        (
            "header with a numeric id",
            b'{"type":"session","version":0,"id":7,"createdAt":1,"delegationDepth":0}\n',
            "corrupt",
        ),
        ("header that is an array", b"[1,2,3]\n", "corrupt"),
        (
            "header of a future version",
            b'{"type":"session","version":3,"id":"h","createdAt":1,"delegationDepth":0}\n',
            "unsupported",
        ),
        ("NaN literal", HEADER + b'{"type":"turn/start","seq":0,"time":NaN,"data":{}}\n', "ok"),
    ],
)
def test_generated_hostile_inputs(name: str, data: bytes, expected: str) -> None:
    kind, result = read(data, load=True)
    assert kind == expected, f"{name}: {kind} {result}"


def test_an_open_call_without_an_id_is_refused_and_nothing_is_written() -> None:
    """Found by ``test_mutated_real_logs``: an open turn whose tool-call block lost its
    id. The closer a repair would write for it is no valid tool result, so the load
    refuses the log as corrupt before writing anything."""
    start = SAMPLE.rindex(b'"type":"tool-call",') + len(b'"type":"tool-call"')
    end = SAMPLE.index(b',"name"', start)
    damaged = SAMPLE[:start] + b" " * (end - start) + SAMPLE[end:]
    with tempfile.TemporaryDirectory() as root:
        path = Path(root, "_no-cwd", "h", "session.jsonl")
        path.parent.mkdir(parents=True)
        path.write_bytes(damaged)

        async def run() -> BaseException:
            backend = JsonlPersistence(root)
            try:
                with pytest.raises(SessionPersistenceCorruptionError) as caught:
                    await backend.load("h")
                return caught.value
            finally:
                await backend.aclose()

        error = asyncio.run(run())
        assert "failed validation" in str(error), error
        assert "tool source" in str(error), error
        assert path.read_bytes() == damaged


@pytest.mark.slow
def test_a_hundred_thousand_deep_line_is_read_without_recursion_errors() -> None:
    deep = b"[" * 100_000 + b"]" * 100_000
    line = b'{"type":"x/deep","seq":0,"time":1,"ignorable":true,"data":' + deep + b"}\n"
    start = time.monotonic()
    kind, result = read(HEADER + line)
    assert kind == "ok", result
    assert time.monotonic() - start < 30


def test_a_50_mb_line_in_bounded_memory_and_time() -> None:
    text = b"x" * (50 * 1024 * 1024)
    line = b'{"type":"x/big","seq":0,"time":1,"ignorable":true,"data":"' + text + b'"}\n'
    data = HEADER + line
    tracemalloc.start()
    start = time.monotonic()
    kind, result = read(data)
    elapsed = time.monotonic() - start
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert kind == "ok", result
    assert len(result.events[0].data) == len(text)  # type: ignore[attr-defined]
    assert peak < 6 * len(data), f"peak {peak / 1e6:.0f} MB for a {len(data) / 1e6:.0f} MB log"
    assert elapsed < 60
    torn = HEADER + line[:-1]  # the same line without its newline: a torn tail
    kind, result = read(torn)
    assert kind == "ok"
    assert result.events == ()  # type: ignore[attr-defined]


def chunked(data: bytes, sizes: list[int]) -> list[bytes]:
    """``data`` cut into chunks of the given sizes (cycled)."""
    out, pos, index = [], 0, 0
    while pos < len(data):
        size = sizes[index % len(sizes)]
        out.append(data[pos : pos + size])
        pos, index = pos + size, index + 1
    return out


@settings(max_examples=examples(200), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.integers(min_value=0, max_value=len(SAMPLE)),
    st.binary(max_size=20),
    st.lists(st.integers(min_value=1, max_value=700), min_size=1, max_size=5),
)
def test_the_streaming_summary_agrees_with_the_scan(
    position: int, patch: bytes, sizes: list[int]
) -> None:
    """``ls`` streams a log (``summarize_log``) where a load scans it whole (``scan_log``):
    on any damage, in any chunking, both give the same verdict."""
    mutated = SAMPLE[:position] + patch + SAMPLE[position + len(patch) :]
    outcomes: list[object] = []
    for read in (
        lambda: scan_log(mutated, "h", check_version=False),
        lambda: summarize_log(chunked(mutated, sizes), "h"),
    ):
        try:
            outcomes.append(read())
        except SessionError as e:
            outcomes.append(e)
    scanned, summary = outcomes
    if isinstance(scanned, SessionError):
        assert type(summary) is type(scanned)
        assert str(summary) == str(scanned)
        return
    assert isinstance(scanned, ScannedLog)
    assert isinstance(summary, LogSummary)
    assert summary.header == scanned.header
    assert summary.events == len(scanned.events)
    assert summary.committed_bytes == scanned.committed_bytes
    assert summary.size == len(mutated)
    assert summary.last_bracket == brackets(scanned.events).last
