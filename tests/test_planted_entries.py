"""Entries planted in a store (the adversary's D2, D3 and D6): symbolic links, FIFOs and a
full disk while the writer lock is taken. Nothing outside the root is ever written or
truncated, nothing blocks, the refusal names the entry, and a lock is never leaked."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from agent_session.persistence_jsonl import FileOps, JsonlPersistence
from agent_session.session import (
    Runtime,
    SessionError,
    SessionPersistenceCorruptionError,
    SessionStoreEntryError,
)
from agent_session.testing.logs import detached, header

REPO = Path(__file__).resolve().parents[1]
PRECIOUS = b"PRECIOUS DATA\n"


async def write_turn(root: Path, id: str = "s1", *, resume: bool = False) -> None:
    """Append and flush a turn; a refusal is raised once the refused turn was named as lost
    (the runtime collected: its warning is asserted here, not printed at exit)."""
    runtime, backend = Runtime(), JsonlPersistence(str(root))
    runtime.install(backend)
    error: SessionError | None = None
    appended = False
    try:
        if resume:
            session = await runtime.sessions.resume(id)
        else:
            session = runtime.sessions.create(id)
        number = 1 + sum(1 for e in session.events if e.type == "turn/start")
        session.append("turn/start", {"turn": number})
        session.append("turn/end", {"turn": number, "reason": {"kind": "completed"}})
        appended = True
        await runtime.sessions.flush(session)
    except SessionError as e:
        error = e
    finally:
        with contextlib.suppress(SessionError):  # aclose retries the refused flush
            await backend.aclose()
    if error is None:
        return
    error.__traceback__ = None  # (its frames would keep the runtime alive)
    handler = _Lost()
    logging.getLogger("session.persistence").addHandler(handler)
    try:
        del runtime, backend
        session = None
        gc.collect()
    finally:
        logging.getLogger("session.persistence").removeHandler(handler)
    if appended:
        assert any(f'"{id}" (2 event(s)) were not durable' in m for m in handler.lost)
    raise error


class _Lost(logging.Handler):
    """Keeps the lost-events warnings it is given."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.lost: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if "were not durable" in record.getMessage():
            self.lost.append(record.getMessage())


def victim(tmp_path: Path) -> Path:
    path = tmp_path / "outside" / "victim.txt"
    path.parent.mkdir(exist_ok=True)
    path.write_bytes(PRECIOUS)
    return path


def outside_listing(tmp_path: Path) -> list[str]:
    return sorted(str(p.relative_to(tmp_path)) for p in (tmp_path / "outside").rglob("*"))


@pytest.mark.parametrize("resume", [False, True], ids=["first-flush", "resume"])
def test_a_lock_file_link_is_refused_and_its_target_untouched(tmp_path: Path, resume: bool) -> None:
    root = tmp_path / "root"
    target = victim(tmp_path)
    if resume:
        asyncio.run(write_turn(root))
    session_dir = root / "_no-cwd" / "s1"
    session_dir.mkdir(parents=True, exist_ok=True)
    (session_dir / "session.lock").unlink(missing_ok=True)
    (session_dir / "session.lock").symlink_to(target)
    with pytest.raises(SessionStoreEntryError, match=r"session\.lock.*symbolic link"):
        asyncio.run(write_turn(root, resume=resume))
    assert target.read_bytes() == PRECIOUS


class _PlantsLock(FileOps):
    """An adversary plants a link as the lock file of a session directory the instant the
    writer has made that directory (before the writer creates its lock there)."""

    def __init__(self, target: Path) -> None:
        self.target = target

    def mkdir(self, path: str) -> bool:
        made = super().mkdir(path)
        if os.path.basename(path) == "s1":
            os.symlink(self.target, os.path.join(path, "session.lock"))
        return made


async def test_a_lock_link_planted_in_a_new_session_directory_is_refused(tmp_path: Path) -> None:
    """The lock file of a directory the writer made just now is created exclusively; one that
    appeared there meanwhile is judged as any existing lock file is."""
    target = victim(tmp_path)
    backend = JsonlPersistence(tmp_path / "root", ops=_PlantsLock(target))
    await backend.create(header("s1"))
    with pytest.raises(SessionStoreEntryError, match=r"session\.lock.*symbolic link"):
        await backend.append("s1", detached("s1").events)
    await backend.aclose()
    assert target.read_bytes() == PRECIOUS
    assert outside_listing(tmp_path) == ["outside/victim.txt"]


@pytest.mark.parametrize("level", ["project", "session"])
def test_a_directory_link_is_refused_and_nothing_is_written_through_it(
    tmp_path: Path, level: str
) -> None:
    root = tmp_path / "root"
    elsewhere = tmp_path / "outside" / "dir"
    elsewhere.mkdir(parents=True)
    (root / "_no-cwd").mkdir(parents=True)
    if level == "project":
        (root / "_no-cwd").rmdir()
        (root / "_no-cwd").symlink_to(elsewhere)
    else:
        (root / "_no-cwd" / "s1").symlink_to(elsewhere)
    with pytest.raises(SessionStoreEntryError, match="symbolic link|not a real directory"):
        asyncio.run(write_turn(root))
    assert outside_listing(tmp_path) == ["outside/dir"]


def test_a_log_link_is_refused_by_load_resume_and_repair(tmp_path: Path) -> None:
    """The log of an interrupted session replaced by a link to a copy outside the root: a
    load (which would repair it) must neither truncate nor append to the target."""
    root = tmp_path / "root"
    asyncio.run(write_turn(root))
    log = root / "_no-cwd" / "s1" / "session.jsonl"
    outside = tmp_path / "outside" / "session.jsonl"
    outside.parent.mkdir()
    interrupted = log.read_bytes() + b'{"type":"turn/start","seq":2,"time":1,"data":{"turn":2}}\n'
    outside.write_bytes(interrupted + b'{"torn')
    log.unlink()
    log.symlink_to(outside)

    async def attempts() -> list[BaseException]:
        errors: list[BaseException] = []
        backend = JsonlPersistence(str(root))
        for call in (backend.load, backend.inspect):
            try:
                await call("s1")
            except SessionPersistenceCorruptionError as e:
                errors.append(e)
        await backend.aclose()
        try:
            await write_turn(root, resume=True)
        except SessionPersistenceCorruptionError as e:
            errors.append(e)
        return errors

    errors = asyncio.run(attempts())
    assert len(errors) == 3, errors
    assert all(isinstance(e, SessionStoreEntryError) for e in errors), errors
    assert outside.read_bytes() == interrupted + b'{"torn'


RUN = """
import asyncio, os, resource, signal, sys
from agent_session.session import Runtime, SessionError
from agent_session.persistence_jsonl import JsonlPersistence
async def main(root, what):
    runtime, backend = Runtime(), JsonlPersistence(root)
    runtime.install(backend)
    if what in ("load", "inspect"):
        try:
            await getattr(backend, what)("s1")
        except SessionError as e:
            print(type(e).__name__, e)
        return
    if what == "fsize":  # every write fails with EFBIG, like a full disk, then space returns
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
        resource.setrlimit(resource.RLIMIT_FSIZE, (0, hard))
    try:
        if what == "fsize":
            s = runtime.sessions.create("s2")
        else:
            s = await runtime.sessions.resume("s1")
        s.append("turn/start", {"turn": 9})
        await runtime.sessions.flush(s)
        print("flushed")
    except (SessionError, OSError) as e:
        print(type(e).__name__, e)
    if what == "fsize":
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        await runtime.sessions.flush(s)
        print("flushed after space returned")
    print("fds", len(os.listdir("/proc/self/fd")))
asyncio.run(main(*sys.argv[1:]))
"""


def run(root: Path, what: str) -> str:
    """Run ``what`` in a child process; a hang fails the test instead of the suite."""
    done = subprocess.run(
        [sys.executable, "-c", RUN, str(root), what],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.parametrize("what", ["load", "inspect", "resume"])
def test_a_fifo_as_the_log_is_refused_at_once(tmp_path: Path, what: str) -> None:
    root = tmp_path / "root"
    asyncio.run(write_turn(root))
    log = root / "_no-cwd" / "s1" / "session.jsonl"
    log.unlink()
    os.mkfifo(log)
    out = run(root, what)
    assert out.startswith("SessionStoreEntryError"), out
    assert "FIFO" in out, out


def test_a_fifo_as_the_lock_is_refused_at_once(tmp_path: Path) -> None:
    root = tmp_path / "root"
    asyncio.run(write_turn(root))
    lock = root / "_no-cwd" / "s1" / "session.lock"
    lock.unlink(missing_ok=True)
    os.mkfifo(lock)
    out = run(root, "resume")
    assert out.startswith("SessionStoreEntryError"), out
    assert "session.lock" in out, out


def test_a_failed_pid_write_gives_the_lock_back(tmp_path: Path) -> None:
    """D6: taking the lock succeeds but writing the pid fails (a full disk; here every write
    fails with EFBIG under RLIMIT_FSIZE=0). Once writes work again the same process flushes:
    no descriptor kept the lock."""
    out = run(tmp_path / "root", "fsize")
    lines = out.splitlines()
    assert lines[0].startswith("OSError"), out
    assert "File too large" in lines[0], out
    assert lines[1] == "flushed after space returned", out
    data = (tmp_path / "root" / "_no-cwd" / "s2" / "session.jsonl").read_bytes()
    assert b'"turn":9' in data
