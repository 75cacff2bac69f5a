"""A full disk: the adversary's D6 (a failure while taking the writer lock must not leak it)
and D7 (a resumed session whose first write fails must flush once space returns). Each test
runs on a real 512 KiB tmpfs where it can mount one (as root, as in CI) and through the I/O
seam. After space is freed, the same process
continues and every acknowledged event loads."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from agent_session.persistence_jsonl import FileOps, JsonlPersistence
from agent_session.session import Runtime, register_event_type

register_event_type("hook/blob")


class FullDiskOps(FileOps):
    """The seam's stand-in where no file system can be mounted: while ``full``, every write
    fails with ENOSPC, as on a full disk."""

    full = False

    def write(self, fd: int, data: bytes | memoryview) -> int:
        if self.full:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return super().write(fd, data)


@dataclass
class Disk:
    """A store root on a disk the test can fill and free."""

    root: Path
    ops: FileOps | None
    """The seam to pass to the backend (``None``: the real one, on a real small tmpfs)."""
    mount: Path | None

    def fill(self) -> None:
        if self.mount is None:
            assert isinstance(self.ops, FullDiskOps)
            self.ops.full = True
            return
        fd = os.open(self.mount / "filler", os.O_WRONLY | os.O_CREAT, 0o600)
        try:
            for size in (65536, 4096, 1):
                with contextlib.suppress(OSError):
                    while True:
                        os.write(fd, b"\0" * size)
        finally:
            os.close(fd)

    def free(self) -> None:
        if self.mount is None:
            assert isinstance(self.ops, FullDiskOps)
            self.ops.full = False
        else:
            (self.mount / "filler").unlink()

    def backend(self) -> JsonlPersistence:
        return JsonlPersistence(str(self.root), ops=self.ops)


@pytest.fixture(params=["tmpfs", "seam"])
def disk(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Disk]:
    """A fresh 512 KiB tmpfs (where the test cannot mount one, the seam instead), or the I/O
    seam failing every write while full."""
    mount = tmp_path / "mnt"
    mount.mkdir()
    mounted = (
        subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=512k", "tmpfs", str(mount)],
            capture_output=True,
            check=False,
        )
        if request.param == "tmpfs"
        else None
    )
    if mounted is None or mounted.returncode != 0:
        (mount / "root").mkdir()
        yield Disk(mount / "root", FullDiskOps(), None)
        return
    try:
        (mount / "root").mkdir()
        yield Disk(mount / "root", None, mount)
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def turn(session: object, number: int, blob: int = 0) -> None:
    append = session.append  # type: ignore[attr-defined]
    append("turn/start", {"turn": number})
    if blob:
        append("hook/blob", {"x": "y" * blob})
    append("turn/end", {"turn": number, "reason": {"kind": "completed"}})


async def flush_fails_then_succeeds(runtime: Runtime, session: object, disk: Disk) -> None:
    with pytest.raises(OSError) as full:
        await runtime.sessions.flush(session)  # type: ignore[arg-type]
    assert full.value.errno == errno.ENOSPC
    disk.free()
    await runtime.sessions.flush(session)  # type: ignore[arg-type]


def test_a_full_disk_while_taking_the_lock_does_not_lock_the_session_out(disk: Disk) -> None:
    async def scenario() -> int:
        runtime, backend = Runtime(), disk.backend()
        runtime.install(backend)
        session = runtime.sessions.create("s")
        turn(session, 1)
        disk.fill()
        await flush_fails_then_succeeds(runtime, session, disk)
        count = len(session.events)
        await backend.aclose()
        return count

    count = asyncio.run(scenario())
    loaded = asyncio.run(JsonlPersistence(str(disk.root)).load("s"))
    assert len(loaded.events) == count


def test_a_resumed_session_whose_first_write_fails_flushes_once_space_returns(
    disk: Disk,
) -> None:
    async def scenario() -> int:
        runtime, backend = Runtime(), disk.backend()
        runtime.install(backend)
        session = runtime.sessions.create("s")
        turn(session, 1)
        await runtime.sessions.flush(session)
        await backend.aclose()
        runtime, backend = Runtime(), disk.backend()
        runtime.install(backend)
        disk.fill()
        resumed = await runtime.sessions.resume("s")
        turn(resumed, 2, blob=40_000)
        await flush_fails_then_succeeds(runtime, resumed, disk)
        turn(resumed, 3)
        await runtime.sessions.flush(resumed)
        count = len(resumed.events)
        await backend.aclose()
        return count

    count = asyncio.run(scenario())
    loaded = asyncio.run(JsonlPersistence(str(disk.root)).load("s"))
    assert len(loaded.events) == count
    assert [e.data["turn"] for e in loaded.events if e.type == "turn/end"] == [1, 2, 3]
