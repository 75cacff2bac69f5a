"""SQLite read commands read, and only read: beside a crash's ``-wal`` they change no byte and
leave the ``-wal``; beside another process's write transaction they answer at once (busy is
never "corrupt"); an empty file stays empty; a FIFO or a device is refused at once, never
waited on; this format's identity over foreign tables is "unsupported" (exit 2)."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from agent_session.persistence_sqlite import APPLICATION_ID, SCHEMA_VERSION, SqlitePersistence
from tests.test_cli import cli

pytestmark = pytest.mark.process

READS = (
    ["ls"],
    ["ls", "--json"],
    ["verify"],
    ["verify", "--json"],
    ["verify", "s1"],
    ["show", "s1"],
    ["show", "s1", "--json"],
    ["export", "s1", "--format", "anthropic"],
)


def _state(path: Path) -> dict[str, tuple[bytes, int] | None]:
    return {
        suffix: (Path(f"{path}{suffix}").read_bytes(), Path(f"{path}{suffix}").stat().st_mtime_ns)
        if Path(f"{path}{suffix}").exists()
        else None
        for suffix in ("", "-wal")
    }


CRASHING_WRITER = """
import asyncio, os, signal, sys
from agent_session.persistence_sqlite import SqlitePersistence
from agent_session.session import Runtime

async def main():
    runtime = Runtime()
    runtime.install(SqlitePersistence(sys.argv[1]))
    session = runtime.sessions.create("s1")
    session.append("turn/start", {"turn": 1})
    message = {"content": [{"type": "text", "text": "hi"}], "source": {"kind": "user"},
               "role": "user", "id": "u1"}
    session.append("user/message", message, surface_op="append")
    await runtime.sessions.flush(session)
    os.kill(os.getpid(), signal.SIGKILL)

asyncio.run(main())
"""


def test_read_commands_leave_a_crash_wal_and_the_file_as_they_are(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    store = f"sqlite:///{path}"
    crashed = subprocess.run(
        [sys.executable, "-c", CRASHING_WRITER, str(path)], timeout=120, check=False
    )
    assert crashed.returncode == -9
    before = _state(path)
    assert before["-wal"] is not None  # the SIGKILLed writer's commits are in its -wal
    assert len(before["-wal"][0]) > 0
    for command in READS:
        done = cli(command[0], store, *command[1:], check_rc=None)
        assert done.returncode in (0, 1), (command, done.stderr)
        assert _state(path) == before, command
    assert "s1" in cli("ls", store).stdout


def test_read_commands_answer_beside_a_write_transaction(tmp_path: Path) -> None:
    """Another process holds the write lock (``BEGIN IMMEDIATE``) until told to let go: every
    read command answers meanwhile, none says "corrupt"."""
    path = tmp_path / "s.db"
    store = f"sqlite:///{path}"
    cli("demo", "--store", store, "--crash", "none", "--session-id", "s1")
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sqlite3, sys\n"
            f"db = sqlite3.connect({str(path)!r}, isolation_level=None)\n"
            "db.execute('BEGIN IMMEDIATE')\n"
            "print('held', flush=True)\n"
            "sys.stdin.read()\n",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline() == "held\n"
        for command in READS:
            done = cli(command[0], store, *command[1:], check_rc=None)
            assert done.returncode == 0, (command, done.stderr)
        assert holder.poll() is None  # it held the lock the whole time
    finally:
        assert holder.stdin is not None
        holder.stdin.close()
        holder.wait(timeout=60)


def test_an_empty_file_stays_empty(tmp_path: Path) -> None:
    path = tmp_path / "empty.db"
    path.touch()
    store = f"sqlite:///{path}"
    assert cli("show", store, "x", check_rc=None).returncode == 3
    assert cli("verify", store, "x", check_rc=None).returncode == 3
    assert cli("ls", store).stdout.strip() == "no sessions"
    assert cli("verify", store).returncode == 0
    assert path.stat().st_size == 0
    assert sorted(os.listdir(tmp_path)) == ["empty.db"]


@pytest.mark.parametrize("kind", ["fifo", "device"])
def test_a_fifo_or_a_device_is_refused_at_once(tmp_path: Path, kind: str) -> None:
    """Every command refuses it in one line (a FIFO's open used to wait for a writer
    forever); nothing is created beside it; the library refuses it too."""
    if kind == "fifo":
        path = tmp_path / "x.db"
        os.mkfifo(path)
    else:
        path = Path("/dev/null")
    store = f"sqlite:///{path}"
    for command in (["ls", store], ["verify", store], ["recover", store], ["show", store, "x"]):
        done = cli(*command, check_rc=None)
        assert done.returncode in (4, 5), (command, done.stderr)
        assert "not a regular file" in done.stderr
        assert len(done.stderr.strip().splitlines()) == 1
    env = {**os.environ, "AGENT_SESSION_STORE": store}
    done = subprocess.run(
        [sys.executable, "-m", "agent_session", "ls"],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        check=False,
    )
    assert done.returncode in (4, 5)
    assert "not a regular file" in done.stderr
    assert not Path(f"{path}-journal").exists()
    assert not Path(f"{path}-wal").exists()


async def test_the_library_refuses_a_fifo(tmp_path: Path) -> None:
    path = tmp_path / "x.db"
    os.mkfifo(path)
    for read_only in (False, True):
        backend = SqlitePersistence(path, read_only=read_only)
        with pytest.raises(OSError, match="not a regular file"):
            await backend.list_headers()
        await backend.aclose()


def test_the_formats_identity_over_foreign_tables_is_unsupported(tmp_path: Path) -> None:
    path = tmp_path / "foreign.db"
    with sqlite3.connect(path) as db:
        db.execute(f"PRAGMA application_id = {APPLICATION_ID}")
        db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        db.execute("CREATE TABLE sessions (name TEXT, other INTEGER)")
        db.execute("CREATE TABLE events (a, b)")
    before = path.read_bytes()
    store = f"sqlite:///{path}"
    for command in (["ls", store], ["verify", store], ["show", store, "x"], ["recover", store]):
        done = cli(*command, check_rc=None)
        assert done.returncode == 2, (command, done.stdout, done.stderr)
        assert "another layout" in done.stdout + done.stderr
    assert path.read_bytes() == before
    listing = cli("ls", store, "--json", check_rc=None)
    assert all(json.loads(line) for line in listing.stdout.splitlines())


def test_a_database_on_a_read_only_mount_is_read(tmp_path: Path) -> None:
    """A WAL database copied (without a ``-wal``) onto a file system mounted read-only (a
    private mount namespace: ``unshare -m``, a tmpfs remounted read-only): ``ls``,
    ``verify`` and ``show`` read it (SQLite cannot make its ``-shm`` there)."""
    path = tmp_path / "s.db"
    store = f"sqlite:///{path}"
    cli("demo", "--store", store, "--crash", "none", "--session-id", "s1")
    assert not Path(f"{path}-wal").exists()  # (the writer's last close checkpointed it)
    mount = tmp_path / "ro"
    mount.mkdir()
    commands = " && ".join(
        f"{sys.executable} -m agent_session {args} sqlite:///{mount}/s.db{extra}"
        for args, extra in (("ls", ""), ("verify", ""), ("show", " s1"))
    )
    script = (
        f"mount -t tmpfs none {mount} && cp {path} {mount}/s.db && "
        f"mount -o remount,ro {mount} && ! touch {mount}/probe 2>/dev/null && {commands}"
    )
    done = subprocess.run(
        ["unshare", "-m", "sh", "-c", script],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "s1" in done.stdout
    assert "balanced" in done.stdout


def test_what_sqlite_makes_beside_a_wal_database_no_one_has_open(tmp_path: Path) -> None:
    """The stores page's exact words: the database file keeps every byte, and what appears
    beside it is an empty ``-wal`` and a ``-shm`` index, nothing else; a writer then uses
    them."""
    path = tmp_path / "s.db"
    store = f"sqlite:///{path}"
    cli("demo", "--store", store, "--crash", "none", "--session-id", "s1")
    for name in ("s.db-wal", "s.db-shm"):  # (as after the last connection closed)
        Path(tmp_path, name).unlink(missing_ok=True)
    before = {p.name for p in tmp_path.iterdir()}
    data = path.read_bytes()
    for args in READS:
        cli(*args[:1], store, *args[1:], check_rc=None)
    assert path.read_bytes() == data
    made = {p.name for p in tmp_path.iterdir()} - before
    assert made == {"s.db-wal", "s.db-shm"}
    assert Path(tmp_path, "s.db-wal").stat().st_size == 0
    cli("demo", "--store", store, "--crash", "none", "--session-id", "s2")
    assert "s2" in cli("ls", store).stdout
