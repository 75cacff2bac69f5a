"""The kill matrix: SIGKILL at every backend failpoint (between an append's write and its
fsync; after a materialization's temp write, link and directory fsync; after a repair's
truncate and its closer write), over many runs with varied batch sizes, for plain and
compressed logs. After each kill the log loads, holds every acknowledged batch and no partial
one, and loads again to the same result: a repair interrupted and redone never duplicates
closers."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from persistence_jsonl import JsonlPersistence
from persistence_jsonl.encoding import ENCODINGS, ZSTD
from persistence_jsonl.fileio import FAILPOINT_ENV
from persistence_jsonl.zstd import decompress_frame, scan_frames
from tests.kill_child import events

pytestmark = pytest.mark.process

REPO = Path(__file__).resolve().parents[1]
WRITE_POINTS = [
    "append:after-write",
    "materialize:after-temp-write",
    "materialize:after-link",
    "materialize:after-dir-fsync",
]
REPAIR_POINTS = ["repair:after-truncate", "repair:after-closer-write"]


def child(
    root: Path, seed: int, action: str, point: str, compression: str
) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, FAILPOINT_ENV: point}
    return subprocess.run(
        [sys.executable, "-m", "tests.kill_child", str(root), str(seed), action, compression],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


async def check_write_kill(root: Path, seed: int, point: str, compression: str) -> None:
    hit = 1 + seed % 3 if point == "append:after-write" else 1
    result = child(root, seed, "write", f"{point}@{hit}", compression)
    assert result.returncode == -signal.SIGKILL, result.stderr
    acked = [
        int(line.split()[1]) for line in result.stdout.splitlines() if line.startswith("acked")
    ]
    expected = [e for batch in events(seed) for e in batch]
    boundaries = {0}
    total = 0
    for batch in events(seed):
        total += len(batch)
        boundaries.add(total)
    backend = JsonlPersistence(root)
    if not await backend.list_headers():  # the crash came before the log's name was durable
        assert not acked
        return
    stored = await backend.read_from("k", 0)  # what is on disk, before any repair
    assert [e.encode() for e in stored] == [e.encode() for e in expected[: len(stored)]]
    assert len(stored) >= (acked[-1] if acked else 0)
    assert len(stored) in boundaries, f"partial batch: {len(stored)} events"
    first = await backend.load("k")
    await backend.aclose()
    again = JsonlPersistence(root)
    second = await again.load("k")
    assert [e.encode() for e in second.events] == [e.encode() for e in first.events]
    await again.aclose()


def open_the_last_turn(log: Path) -> int:
    """Drop the log's last ``turn/end`` and keep a torn fragment where it was: the line cut in
    half, or the frame holding it cut after its frame header (nothing can be recovered; the
    frame's batch may have held an earlier ``turn/end`` too). Returns how many ``turn/end``
    events remain."""
    data = log.read_bytes()
    if log.name == ZSTD.filename:
        spans = scan_frames(data, str(log)).complete
        plain = [decompress_frame(data[s:e], s, None, 1 << 30, str(log)) for s, e in spans]
        cut = max(i for i, text in enumerate(plain) if b'"turn/end"' in text)
        log.write_bytes(data[: spans[cut][0] + 6])
        return sum(text.count(b'"turn/end"') for text in plain[:cut])
    lines = data.splitlines(keepends=True)
    ends = [i for i, line in enumerate(lines) if b'"turn/end"' in line]
    cut = ends[-1]
    log.write_bytes(b"".join(lines[:cut]) + lines[cut][: len(lines[cut]) // 2])
    return len(ends) - 1


async def check_repair_kill(root: Path, seed: int, point: str, compression: str) -> None:
    prepared = child(root, seed, "write", "none", compression)
    assert prepared.returncode == 0, prepared.stderr
    kept = open_the_last_turn(root / "_no-cwd" / "k" / ENCODINGS[compression].filename)
    result = child(root, seed, "repair", point, compression)
    assert result.returncode == -signal.SIGKILL, result.stderr
    backend = JsonlPersistence(root)
    first = await backend.load("k")
    await backend.aclose()
    types = [e.type for e in first.events]
    assert types[-1] == "turn/end"
    assert first.events[-1].data["reason"] == {"kind": "interrupted"}
    assert types.count("turn/end") == kept + 1  # the real ones, one closer: never duplicated
    again = JsonlPersistence(root)
    second = await again.load("k")
    assert [e.encode() for e in second.events] == [e.encode() for e in first.events]
    await again.aclose()


RUNS = int(os.environ.get("KILL_MATRIX_RUNS", "20"))


@pytest.mark.slow
@pytest.mark.parametrize("compression", ["none", "zstd"])
@pytest.mark.parametrize("point", WRITE_POINTS + REPAIR_POINTS)
async def test_kill_matrix(tmp_path: Path, point: str, compression: str) -> None:
    runs = RUNS if compression == "none" else max(1, RUNS // 2)
    for seed in range(runs):
        root = tmp_path / f"run-{seed}"
        if point in REPAIR_POINTS:
            await check_repair_kill(root, seed, point, compression)
        else:
            await check_write_kill(root, seed, point, compression)


@pytest.mark.parametrize("compression", ["none", "zstd"])
@pytest.mark.parametrize("point", WRITE_POINTS + REPAIR_POINTS)
async def test_kill_matrix_smoke(tmp_path: Path, point: str, compression: str) -> None:
    """One run per failpoint in the quick suite (the full matrix is marked slow)."""
    if point in REPAIR_POINTS:
        await check_repair_kill(tmp_path, 3, point, compression)
    else:
        await check_write_kill(tmp_path, 3, point, compression)
