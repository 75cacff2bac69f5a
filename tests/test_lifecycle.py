"""The library lifecycle without traps: ``async with Runtime()`` flushes and closes on the way
out (an error in the block still propagates, unreplaced); ``open_or_create`` resumes a
stored session or creates a new one, and ``create`` refuses a stored id when it is called;
appends that are never made durable (a backend garbage-collected, a process ending without
closing it) are named in a warning."""

from __future__ import annotations

import gc
import logging
import subprocess
import sys
from pathlib import Path

import pytest

from agent_session.persistence_jsonl import JsonlPersistence
from agent_session.session import Runtime, SessionCollisionError
from agent_session.session.events.builders import turn_end, turn_start


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


async def test_create_refuses_a_stored_id_at_once(tmp_path: Path) -> None:
    async with Runtime() as runtime:
        runtime.install(JsonlPersistence(tmp_path))
        session = runtime.sessions.create("taken")
        session.append("turn/start", turn_start(1))
    async with Runtime() as runtime:
        runtime.install(JsonlPersistence(tmp_path))
        with pytest.raises(SessionCollisionError, match="already has a stored log: resume it"):
            runtime.sessions.create("taken")  # not at the first flush
        assert runtime.sessions.get("taken") is None
        resumed = await runtime.sessions.open_or_create("taken")
        assert resumed.events[0].type == "turn/start"


def test_a_backend_collected_with_unflushed_appends_names_them(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # Outside an event loop nothing can write in the background: a runtime dropped with
    # appends it never flushed loses them (inside a loop, its batching timer keeps it alive
    # until it has written them).
    runtime = Runtime()
    runtime.install(JsonlPersistence(tmp_path))
    kept = runtime.sessions.create("kept")
    lost = runtime.sessions.create("lost")
    lost.append("turn/start", turn_start(1))
    lost.append("turn/end", turn_end(1))
    with caplog.at_level(logging.WARNING, logger="session.persistence"):
        del runtime, kept, lost
        gc.collect()
    (warning,) = [r.getMessage() for r in caplog.records]
    assert 'session(s) "lost" (2 event(s)) were not durable when their runtime was' in warning
    assert '"kept"' not in warning  # nothing was appended to it: nothing to lose


def test_a_process_exiting_with_unflushed_appends_warns(tmp_path: Path) -> None:
    script = (
        "import asyncio, sys\n"
        "from agent_session.persistence_jsonl import JsonlPersistence\n"
        "from agent_session.session import Runtime\n"
        "async def main():\n"
        "    runtime = Runtime()\n"
        "    runtime.install(JsonlPersistence(sys.argv[1]))\n"
        "    runtime.sessions.create('forgotten').append('turn/start', {'turn': 1})\n"
        "asyncio.run(main())\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert '"forgotten" (1 event(s)) were not durable' in done.stderr
    assert "async with runtime" in done.stderr


async def test_a_closed_backend_warns_about_nothing(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async with Runtime() as runtime:
        runtime.install(JsonlPersistence(tmp_path))
        runtime.sessions.create("s").append("turn/start", turn_start(1))
    with caplog.at_level(logging.WARNING, logger="session.persistence"):
        del runtime
        gc.collect()
    assert caplog.records == []
