"""A writer never appends at a cursor it learned before taking the writer lock.

Two writers resume one session. Whatever the order in which they read, take the lock, append
and flush, afterwards: the log loads, its seqs are contiguous, and every event whose flush
returned is in it exactly once. A second resumer is refused with :class:`SessionCollisionError` while the
first holds the session, and a writer that learned the log before the other moved it on is
refused on every append."""

from __future__ import annotations

import asyncio
import gc
import json
import logging
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from agent_session.persistence_jsonl import JsonlPersistence
from agent_session.persistence_jsonl.scan import scan_log
from agent_session.session import (
    Runtime,
    Session,
    SessionCollisionError,
    SessionError,
    register_event_type,
)

REPO = Path(__file__).resolve().parents[1]
END: dict[str, Any] = {"reason": {"kind": "completed"}}
register_event_type("hook/note")


def turn(session: Session, number: int, note: str) -> None:
    session.append("turn/start", {"turn": number})
    session.append("hook/note", {"who": note})
    session.append("turn/end", {"turn": number, **END})


async def seed(root: Path) -> None:
    runtime, backend = Runtime(), JsonlPersistence(str(root))
    runtime.install(backend)
    session = runtime.sessions.create("s")
    turn(session, 1, "seed")
    await runtime.sessions.flush(session)
    await backend.aclose()


def stored(root: Path) -> list[dict[str, Any]]:
    data = (root / "_no-cwd" / "s" / "session.jsonl").read_bytes()
    scanned = scan_log(data, "s")
    assert not scanned.torn
    events = [dict(e) for e in scanned.events]
    assert [e["seq"] for e in events] == list(range(len(events)))
    return events


def notes(events: list[dict[str, Any]]) -> list[str]:
    return [e["data"]["who"] for e in events if e["type"] == "hook/note"]


async def test_a_second_resumer_is_refused_and_resumes_after_the_first_let_go(
    tmp_path: Path,
) -> None:
    """The adversary's D1 (b): B resumes while A holds the lock. B is refused at once, with
    nothing made live; A appends a turn and closes; B's next resume continues after A's turn
    (a cursor B learned before A moved the log on is never used)."""
    await seed(tmp_path)
    run_a, run_b = Runtime(), Runtime()
    back_a, back_b = JsonlPersistence(str(tmp_path)), JsonlPersistence(str(tmp_path))
    run_a.install(back_a)
    run_b.install(back_b)
    a = await run_a.sessions.resume("s")  # A holds the lock from here
    for _ in range(2):  # refused, and again: a refusal leaves nothing behind
        with pytest.raises(SessionCollisionError, match="another writer"):
            await run_b.sessions.resume("s")
        assert run_b.sessions.get("s") is None
    turn(a, 2, "a")
    await run_a.sessions.flush(a)
    await back_a.aclose()  # A acknowledged, lock released
    b = await run_b.sessions.resume("s")
    turn(b, 3, "b")
    await run_b.sessions.flush(b)
    await back_b.aclose()
    assert notes(stored(tmp_path)) == ["seed", "a", "b"]


async def test_a_cold_append_at_a_cursor_learned_before_the_lock_is_refused(
    tmp_path: Path,
) -> None:
    """The same through the cold API: B loads (learning the length), A appends, B appends
    at the length it learned."""
    await seed(tmp_path)
    back_b = JsonlPersistence(str(tmp_path))
    learned = len((await back_b.load("s")).events)
    run_a, back_a = Runtime(), JsonlPersistence(str(tmp_path))
    run_a.install(back_a)
    a = await run_a.sessions.resume("s")
    turn(a, 2, "a")
    await run_a.sessions.flush(a)
    await back_a.aclose()
    event = {"type": "hook/note", "seq": learned, "time": 1, "data": {"who": "b"}}
    with pytest.raises(SessionError):
        await back_b.append("s", [event])
    await back_b.aclose()
    assert notes(stored(tmp_path)) == ["seed", "a"]


CHILD = """
import asyncio, sys, os
from agent_session.session import Runtime, SessionError, register_event_type
from agent_session.persistence_jsonl import JsonlPersistence

register_event_type("hook/note")
async def main(root, who, ready, go):
    runtime, backend = Runtime(), JsonlPersistence(root)
    runtime.install(backend)
    try:
        s = await runtime.sessions.resume("s")
    except SessionError as e:  # the other one holds it
        open(ready, "w").close()
        print("refused", type(e).__name__, e, flush=True)
        await backend.aclose()
        return
    open(ready, "w").close()
    while not os.path.exists(go):
        await asyncio.sleep(0.001)
    number = 1 + sum(1 for e in s.events if e.type == "turn/start")
    s.append("turn/start", {"turn": number})
    s.append("hook/note", {"who": who})
    s.append("turn/end", {"turn": number, "reason": {"kind": "completed"}})
    try:
        await runtime.sessions.flush(s)
        print("acked", flush=True)
    except SessionError as e:
        print("refused", type(e).__name__, e, flush=True)
    try:
        await backend.aclose()  # raises when the refused batch cannot be written: expected
    except Exception:
        pass
asyncio.run(main(*sys.argv[1:]))
"""


@pytest.mark.process
@pytest.mark.parametrize("order", ["b-first", "a-first", "together"])
def test_two_processes_resuming_one_session_never_duplicate_or_lose(
    tmp_path: Path, order: str
) -> None:
    """The adversary's D1 (a), with real processes: both resume, then each appends a turn and
    flushes, in three orders. Whatever is acknowledged is stored once; nothing is corrupt."""
    root = tmp_path / "root"
    asyncio.run(seed(root))
    procs: dict[str, subprocess.Popen[str]] = {}
    for who in ("a", "b"):
        procs[who] = subprocess.Popen(
            [
                sys.executable,
                "-c",
                CHILD,
                str(root),
                who,
                str(tmp_path / f"ready-{who}"),
                str(tmp_path / f"go-{who}"),
            ],
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
    for who in ("a", "b"):
        while not (tmp_path / f"ready-{who}").exists():
            assert procs[who].poll() is None, procs[who].communicate()
    sequence = {"b-first": ["b", "a"], "a-first": ["a", "b"], "together": ["ab"]}[order]
    outputs: dict[str, str] = {}
    for step in sequence:
        for who in step:
            (tmp_path / f"go-{who}").touch()
        for who in step:
            out, err = procs[who].communicate(timeout=60)
            assert procs[who].returncode == 0, err
            outputs[who] = out.strip()
    acked = sorted(who for who, out in outputs.items() if out == "acked")
    assert acked, outputs  # at least one writer wins
    assert sorted(notes(stored(root))) == sorted(["seed", *acked]), outputs
    for who, out in outputs.items():
        assert out == "acked" or out.startswith("refused SessionCollisionError"), (who, out)
    loaded = asyncio.run(JsonlPersistence(str(root)).load("s"))
    assert json.dumps([e.seq for e in loaded.events]) == json.dumps(list(range(len(loaded.events))))


async def test_a_closed_backend_refuses_to_write_and_holds_no_lock(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The adversary's D12: after ``aclose()`` a flush with events to write is refused (the
    backend is closed) instead of re-taking the writer lock it will never release."""
    await seed(tmp_path)
    runtime, backend = Runtime(), JsonlPersistence(str(tmp_path))
    runtime.install(backend)
    session = await runtime.sessions.resume("s")
    await runtime.sessions.flush(session)
    await backend.aclose()
    turn(session, 2, "after close")
    with pytest.raises(SessionError, match="closed"):
        await runtime.sessions.flush(session)
    run_c, back_c = Runtime(), JsonlPersistence(str(tmp_path))
    run_c.install(back_c)
    other = await run_c.sessions.resume("s")  # the closed backend holds no lock
    turn(other, 2, "c")
    await run_c.sessions.flush(other)
    await back_c.aclose()
    assert notes(stored(tmp_path)) == ["seed", "c"]
    with caplog.at_level(logging.WARNING, logger="session.persistence"):
        del runtime, backend, session
        gc.collect()  # the refused turn is named as lost
    (warning,) = [r.getMessage() for r in caplog.records if "were not durable" in r.getMessage()]
    assert 'session(s) "s" (3 event(s)) were not durable' in warning
