"""Reading a log while another writer appends to it (the adversary's D8): a read-only reader
never fails with "kept changing"; it reads the committed prefix up to the size it saw, which
is a prefix of what the writer ends with."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest

from agent_session.persistence_jsonl import FileOps, JsonlPersistence
from agent_session.persistence_jsonl.scan import scan_log
from agent_session.session import Runtime, register_event_type
from agent_session.session.json.codec import encode_json

REPO = Path(__file__).resolve().parents[1]
register_event_type("hook/tick")


class AppendAfterEveryRead(FileOps):
    """The seam, plus another writer that appends one complete event to the log right after
    every read of it: no two stats around a read ever agree."""

    def __init__(self, log: Path, next_seq: int) -> None:
        self.log, self.next_seq = log, next_seq

    def _grow(self) -> None:
        line = {"type": "hook/tick", "seq": self.next_seq, "time": 1, "data": {}}
        with open(self.log, "ab") as f:
            f.write(encode_json(line) + b"\n")
        self.next_seq += 1

    def read(self, path: str) -> bytes | None:
        data = super().read(path)
        if path == str(self.log):
            self._grow()
        return data

    def read_prefix(self, path: str, limit: int) -> bytes | None:
        data = super().read_prefix(path, limit)
        if path == str(self.log) and limit > 4096:  # not the header probe
            self._grow()
        return data


async def seed(root: Path, ticks: int) -> int:
    runtime, backend = Runtime(), JsonlPersistence(str(root))
    runtime.install(backend)
    session = runtime.sessions.create("s")
    for _ in range(ticks):
        session.append("hook/tick", {})
    await runtime.sessions.flush(session)
    await backend.aclose()
    return len(session.events)


def test_reads_while_the_log_grows_after_every_read_succeed(tmp_path: Path) -> None:
    count = asyncio.run(seed(tmp_path, 50))
    log = tmp_path / "_no-cwd" / "s" / "session.jsonl"
    ops = AppendAfterEveryRead(log, count)

    async def read_many() -> list[int]:
        backend = JsonlPersistence(str(tmp_path), ops=ops)
        lengths = []
        for _ in range(5):
            lengths.append(len((await backend.inspect("s")).events))
            lengths.append((await backend.diagnose("s")).stored_events)
        await backend.aclose()
        return lengths

    lengths = asyncio.run(read_many())
    assert lengths == sorted(lengths)  # each read sees a prefix at least as long as before
    assert lengths[0] >= count
    final = scan_log(log.read_bytes(), "s")
    assert len(final.events) >= lengths[-1]


WRITER = """
import asyncio, os, sys
from agent_session.session import Runtime, register_event_type
from agent_session.persistence_jsonl import JsonlPersistence

register_event_type("hook/tick")
async def main(root, stop):
    runtime, backend = Runtime(), JsonlPersistence(root)
    runtime.install(backend)
    s = await runtime.sessions.resume("s")
    print("ready", flush=True)
    while not os.path.exists(stop):
        s.append("hook/tick", {"pad": "x" * 2000})
        await runtime.sessions.flush(s)
    await backend.aclose()
asyncio.run(main(*sys.argv[1:]))
"""


@pytest.mark.process
def test_readers_beside_a_real_writer_process_never_fail(tmp_path: Path) -> None:
    """A writer process checkpoints as fast as it can on a multi-megabyte log while this
    process inspects it again and again: every read succeeds and is a prefix of the end."""
    asyncio.run(seed(tmp_path, 4000))
    stop = tmp_path / "stop"
    writer = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(tmp_path), str(stop)],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert writer.stdout is not None
        assert writer.stdout.readline().strip() == "ready"

        async def read_many() -> list[int]:
            backend = JsonlPersistence(str(tmp_path))
            lengths = [len((await backend.inspect("s")).events) for _ in range(20)]
            await backend.aclose()
            return lengths

        lengths = asyncio.run(read_many())
    finally:
        stop.touch()
        _, err = writer.communicate(timeout=60)
    assert writer.returncode == 0, err
    assert lengths == sorted(lengths)
    final = scan_log((tmp_path / "_no-cwd" / "s" / "session.jsonl").read_bytes(), "s")
    assert len(final.events) >= lengths[-1]
    assert os.path.getsize(tmp_path / "_no-cwd" / "s" / "session.jsonl") > 4000 * 10
