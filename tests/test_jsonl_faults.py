"""Fault injection through the JSONL backend's I/O seam (``persistence_jsonl.fileio``).

A session's life (a materialization, three appends and the repair of a crashed tail), plain
and compressed, is replayed with the k-th system call failing, once or from then on, for every k up to the number of calls the life makes. After each
run the file on disk must load, hold every batch whose ``append`` returned, and hold no partial
batch. Failures are ``EIO``, ``ENOSPC`` and short writes.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Sequence
from pathlib import Path

import pytest

from agent_session.persistence_jsonl import FileOps, JsonlPersistence
from agent_session.persistence_jsonl.encoding import ENCODINGS
from agent_session.persistence_jsonl.zstd import compress_frame
from agent_session.session import Session, SessionDurabilityError, SessionEvent
from agent_session.testing.logs import closed_turn, header

MUTATING = (
    "mkdir",
    "open_exclusive",
    "open_append",
    "open_readwrite",
    "write",
    "write_dsync",
    "fsync",
    "fsync_dir",
    "truncate",
    "link",
    "unlink",
)


class FaultyOps(FileOps):
    """Counts mutating calls; fails the k-th (``once``) or the k-th and every later one."""

    def __init__(self, k: int, *, once: bool, mode: str = "eio") -> None:
        self.k, self.once, self.mode = k, once, mode
        self.calls = 0
        self.injected = 0

    def _maybe_fail(self, name: str) -> bool:
        self.calls += 1
        hit = self.calls == self.k if self.once else self.calls >= self.k
        if hit:
            self.injected += 1
            if self.mode == "short" and name in ("write", "write_dsync"):
                return True
            code = errno.ENOSPC if self.mode == "enospc" else errno.EIO
            raise OSError(code, f"injected {os.strerror(code)} in {name} (call {self.calls})")
        return False


def _wrap(name: str) -> object:
    def method(self: FaultyOps, *args: object) -> object:
        short = self._maybe_fail(name)
        if short:
            fd, data = args
            half = bytes(data)[: max(1, len(data) // 2)]  # type: ignore[call-overload]
            return getattr(FileOps, name)(self, fd, half)
        return getattr(FileOps, name)(self, *args)

    return method


for _name in MUTATING:
    setattr(FaultyOps, _name, _wrap(_name))


class PairFaultyOps(FaultyOps):
    """:class:`FaultyOps` where an append is a write and an fsync (the platforms without one
    call that does both, and every path a failpoint is armed on)."""

    @property
    def dsync_writes(self) -> bool:
        return False


SEAMS = {"dsync": FaultyOps, "pair": PairFaultyOps}


def batches_flat() -> list[SessionEvent]:
    return [e for batch in batches() for e in batch]


def batches() -> list[Sequence[SessionEvent]]:
    session = Session.create("f", clock=lambda: 9)
    closed_turn(session, 1)
    closed_turn(session, 2)
    session.append("turn/start", {"turn": 3})
    for i in range(5):
        session.append(
            "assistant/chunk",
            {"turn": 3, "step": 1, "chunk": {"type": "text-delta", "index": 0, "text": f"t{i}"}},
        )
    events = session.events
    return [events[:4], events[4:9], events[9:12], events[12:]]


TORN = {
    "none": b'{"type":"assistant/chunk","seq":',
    "zstd": compress_frame(b'{"type":"assistant/chunk","seq":99,"time":1,"data":{}}\n')[:9],
}
"""What a writer that crashed mid-write leaves after the last batch, per encoding."""


async def _life(root: Path, ops: FileOps, compression: str = "none") -> list[int]:
    """Materialize and append three more batches, retrying a failed batch once; return the
    seqs whose append returned."""
    backend = JsonlPersistence(root, ops=ops, new_session_compression=compression)
    await backend.create(header("f"))
    acknowledged: list[int] = []
    for batch in batches():
        for _attempt in range(2):
            try:
                await backend.append("f", batch)
            except (OSError, SessionDurabilityError):
                continue
            acknowledged += [e.seq for e in batch]
            break
        else:
            break  # not acknowledged: later batches cannot continue the log
    await backend.aclose()
    if len(acknowledged) == sum(len(b) for b in batches()):
        # The last batch leaves turn 3 open. Simulate a writer that crashed mid-line, then
        # let a new instance (same faulty seam) repair it: truncate the tail, append closers.
        log = root / "_no-cwd" / "f" / ENCODINGS[compression].filename
        with open(log, "ab") as f:
            f.write(TORN[compression])
        repairer = JsonlPersistence(root, ops=ops)
        for _attempt in range(2):
            try:
                await repairer.load("f")
                break
            except (OSError, SessionDurabilityError):
                continue
        await repairer.aclose()
    return acknowledged


@pytest.mark.parametrize("seam", sorted(SEAMS))
@pytest.mark.parametrize("compression", ["none", "zstd"])
@pytest.mark.parametrize("mode", ["eio", "enospc", "short"])
@pytest.mark.parametrize("once", [True, False], ids=["once", "persistent"])
async def test_every_call_of_a_session_life_can_fail(
    tmp_path: Path, mode: str, once: bool, compression: str, seam: str
) -> None:
    faulty = SEAMS[seam]
    counter = faulty(10**9, once=True)
    await _life(tmp_path / "count", counter, compression)
    total = counter.calls
    assert total > 15
    expected_all = [e.seq for batch in batches() for e in batch]
    checked = 0
    for k in range(1, total + 1):
        root = tmp_path / f"{mode}-{once}-{k}"
        ops = faulty(k, once=once, mode=mode)
        acknowledged = await _life(root, ops, compression)
        if mode != "short" or ops.injected:
            checked += 1
        reader = JsonlPersistence(root)
        if not (await reader.list_headers()):
            assert acknowledged == [], f"k={k}: acknowledged events but no log"
            continue
        on_disk = await reader.read_from("f", 0)
        stored = [
            e.seq
            for e in on_disk
            if e.type != "turn/end" or e.data["reason"] != {"kind": "interrupted"}
        ]
        stored = [
            s
            for s in stored
            if s < len(expected_all) and on_disk[s].encode() == batches_flat()[s].encode()
        ]
        closers = on_disk[len(stored) :]
        # every acknowledged batch is there; whatever else is whole batches, then closers once
        assert stored[: len(acknowledged)] == acknowledged, f"k={k}"
        assert stored == expected_all[: len(stored)], f"k={k}"
        assert [e.type for e in closers] in ([], ["turn/end"]), f"k={k}: {closers}"
        boundaries = {0}
        for batch in batches():
            boundaries.add(batch[-1].seq + 1)
        assert len(stored) in boundaries, f"k={k}: partial batch on disk ({len(stored)} events)"
        loaded = await reader.load("f")  # and it loads (repairing the open turn)
        assert loaded.events[-1].type == "turn/end"
        await reader.aclose()
    assert checked >= total - 1
    assert ops.dsync_writes == (seam == "dsync")


class RollbackFails(FileOps):
    """The append's fsync fails, and so does the truncate that would roll it back."""

    def __init__(self) -> None:
        self.armed = False
        self.calls_after_poison = 0
        self.poisoned = False

    def fsync(self, fd: int) -> None:
        if self.poisoned:
            self.calls_after_poison += 1
        if self.armed:
            raise OSError(errno.EIO, "fsync lost the data")
        super().fsync(fd)

    def truncate(self, fd: int, length: int) -> None:
        if self.armed:
            raise OSError(errno.EIO, "truncate failed too")
        super().truncate(fd, length)

    def open_append(self, path: str) -> int:
        if self.poisoned:
            self.calls_after_poison += 1
        return super().open_append(path)


async def test_failed_rollback_poisons_the_session_and_never_retries(tmp_path: Path) -> None:
    ops = RollbackFails()
    backend = JsonlPersistence(tmp_path, ops=ops)
    first, second, *_ = batches()
    await backend.create(header("f"))
    await backend.append("f", first)
    ops.armed = True
    with pytest.raises(SessionDurabilityError, match="failed to roll back append") as info:
        await backend.append("f", second)
    assert [str(e) for e in info.value.errors] == [
        "[Errno 5] fsync lost the data",
        "[Errno 5] truncate failed too",
    ]
    ops.armed = False
    ops.poisoned = True
    with pytest.raises(SessionDurabilityError, match="refuses appends .* reopen it"):
        await backend.append("f", second)
    assert ops.calls_after_poison == 0  # not even an open: the fsync is never retried
    reopened = JsonlPersistence(tmp_path)  # a new instance reads what is really on disk
    stored = [e.seq for e in await reopened.read_from("f", 0)]
    assert stored in ([0, 1, 2, 3], list(range(9)))
    await reopened.aclose()
    await backend.aclose()


class DsyncRollbackFails(FileOps):
    """The one call that writes and syncs fails after writing part of the batch, and the
    truncate that would roll it back fails too."""

    def __init__(self) -> None:
        self.armed = False

    def write_dsync(self, fd: int, data: bytes | memoryview) -> int:
        if self.armed:
            os.write(fd, bytes(data)[:3])  # (in the page cache; durable or not, unknown)
            raise OSError(errno.EIO, "write lost the data")
        return super().write_dsync(fd, data)

    def truncate(self, fd: int, length: int) -> None:
        if self.armed:
            raise OSError(errno.EIO, "truncate failed too")
        super().truncate(fd, length)


async def test_a_failed_dsync_write_is_rolled_back_or_poisons(tmp_path: Path) -> None:
    ops = DsyncRollbackFails()
    assert ops.dsync_writes
    backend = JsonlPersistence(tmp_path, ops=ops)
    first, second, *_ = batches()
    await backend.create(header("f"))
    await backend.append("f", first)
    ops.armed = True
    with pytest.raises(SessionDurabilityError, match="failed to roll back append"):
        await backend.append("f", second)
    await backend.aclose()
    reopened = JsonlPersistence(tmp_path)  # the torn three bytes are cut on load
    assert [e.seq for e in await reopened.read_from("f", 0)] == [0, 1, 2, 3]
    await reopened.aclose()

    class Fails(FileOps):
        def write_dsync(self, fd: int, data: bytes | memoryview) -> int:
            os.write(fd, bytes(data)[:3])
            raise OSError(errno.ENOSPC, "no space")

    rolled = JsonlPersistence(tmp_path, ops=Fails())  # the truncate works: nothing is kept
    with pytest.raises(OSError, match="no space"):
        await rolled.append("f", second)
    await rolled.aclose()
    final = JsonlPersistence(tmp_path)
    assert [e.seq for e in await final.read_from("f", 0)] == [0, 1, 2, 3]
    await final.aclose()
