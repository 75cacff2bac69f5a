"""A real full disk (a 512 KiB tmpfs, mounted by the test; CI runs as root): the adversary's
D6 (a failure while taking the writer lock must not leak it) and D7 (a resumed session whose
first write fails must flush once space returns). After space is freed, the same process
continues and every acknowledged event loads."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from persistence_jsonl import JsonlPersistence
from session import Runtime, register_event_type

register_event_type("hook/blob")


@pytest.fixture
def small_fs(tmp_path: Path) -> Iterator[Path]:
    """A fresh 512 KiB tmpfs. Mounting needs root: outside CI a non-root run skips these
    tests; in CI (root) a failure to mount fails them."""
    mount = tmp_path / "mnt"
    mount.mkdir()
    if os.geteuid() != 0 and not os.environ.get("CI"):
        pytest.skip("mounting a tmpfs needs root (CI runs these as root)")
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=512k", "tmpfs", str(mount)], check=True)
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def fill(directory: Path) -> Path:
    """Fill the file system of ``directory`` to the last byte; the filler's path."""
    filler = directory / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        for size in (65536, 4096, 1):
            with contextlib.suppress(OSError):
                while True:
                    os.write(fd, b"\0" * size)
    finally:
        os.close(fd)
    return filler


def turn(session: object, number: int, blob: int = 0) -> None:
    append = session.append  # type: ignore[attr-defined]
    append("turn/start", {"turn": number})
    if blob:
        append("hook/blob", {"x": "y" * blob})
    append("turn/end", {"turn": number, "reason": {"kind": "completed"}})


async def flush_fails_then_succeeds(runtime: Runtime, session: object, filler: Path) -> None:
    with pytest.raises(OSError) as full:
        await runtime.sessions.flush(session)  # type: ignore[arg-type]
    assert full.value.errno == errno.ENOSPC
    filler.unlink()
    await runtime.sessions.flush(session)  # type: ignore[arg-type]


def test_a_full_disk_while_taking_the_lock_does_not_lock_the_session_out(
    small_fs: Path,
) -> None:
    root = small_fs / "root"
    root.mkdir()

    async def scenario() -> int:
        runtime, backend = Runtime(), JsonlPersistence(str(root))
        runtime.install(backend)
        session = runtime.sessions.create("s")
        turn(session, 1)
        await flush_fails_then_succeeds(runtime, session, fill(small_fs))
        count = len(session.events)
        await backend.aclose()
        return count

    count = asyncio.run(scenario())
    loaded = asyncio.run(JsonlPersistence(str(root)).load("s"))
    assert len(loaded.events) == count


def test_a_resumed_session_whose_first_write_fails_flushes_once_space_returns(
    small_fs: Path,
) -> None:
    root = small_fs / "root"
    root.mkdir()

    async def scenario() -> int:
        runtime, backend = Runtime(), JsonlPersistence(str(root))
        runtime.install(backend)
        session = runtime.sessions.create("s")
        turn(session, 1)
        await runtime.sessions.flush(session)
        await backend.aclose()
        runtime, backend = Runtime(), JsonlPersistence(str(root))
        runtime.install(backend)
        filler = fill(small_fs)
        resumed = await runtime.sessions.resume("s")
        turn(resumed, 2, blob=40_000)
        await flush_fails_then_succeeds(runtime, resumed, filler)
        turn(resumed, 3)
        await runtime.sessions.flush(resumed)
        count = len(resumed.events)
        await backend.aclose()
        return count

    count = asyncio.run(scenario())
    loaded = asyncio.run(JsonlPersistence(str(root)).load("s"))
    assert len(loaded.events) == count
    assert [e.data["turn"] for e in loaded.events if e.type == "turn/end"] == [1, 2, 3]
