"""The library lifecycle without traps: ``async with Runtime()`` flushes and closes on the way
out (an error in the block still propagates, unreplaced), and ``open_or_create`` resumes a
stored session or creates a new one."""

from __future__ import annotations

from pathlib import Path

import pytest

from persistence_jsonl import JsonlPersistence
from session import Runtime
from session.events.builders import turn_end, turn_start


async def test_leaving_the_block_flushes_and_closes(tmp_path: Path) -> None:
    async with Runtime() as runtime:
        runtime.install(JsonlPersistence(tmp_path))
        session = runtime.sessions.create("s")
        session.append("turn/start", turn_start(1))
        session.append("turn/end", turn_end(1))  # not flushed inside the block
    loaded = await JsonlPersistence(tmp_path).load("s")  # the lock was released
    assert [e.type for e in loaded.events] == ["turn/start", "turn/end"]


async def test_an_error_in_the_block_propagates_after_the_flush(tmp_path: Path) -> None:
    with pytest.raises(KeyError, match="boom"):
        async with Runtime() as runtime:
            runtime.install(JsonlPersistence(tmp_path))
            session = runtime.sessions.create("s")
            session.append("turn/start", turn_start(1))
            raise KeyError("boom")
    loaded = await JsonlPersistence(tmp_path).load("s")
    assert [e.type for e in loaded.events][:1] == ["turn/start"]


async def test_open_or_create_creates_then_resumes(tmp_path: Path) -> None:
    for turn in (1, 2):
        async with Runtime() as runtime:
            runtime.install(JsonlPersistence(tmp_path))
            session = await runtime.sessions.open_or_create("s", cwd="/work")
            session.append("turn/start", turn_start(turn))
            session.append("turn/end", turn_end(turn))
    loaded = await JsonlPersistence(tmp_path).load("s")
    assert loaded.header.cwd == "/work"
    assert [e.data["turn"] for e in loaded.events if e.type == "turn/end"] == [1, 2]
