"""The kill matrix: SIGKILL at every backend failpoint (JSONL: between an append's write and
its fsync; after a materialization's temp write, link and directory fsync; after a repair's
truncate and its closer write. SQLite: before and after each transaction's commit, and at the
instant an acknowledgement is read, inside the next commit. PostgreSQL: before and after a
live session's checkpoint commits, and a repair's), over many runs with varied batch sizes, for plain and
compressed logs, SQLite and PostgreSQL databases. After each kill the log loads, holds every
acknowledged batch and no partial one, and loads again to the same result: a repair
interrupted and redone never duplicates closers."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
from pathlib import Path

import psycopg
import pytest

from agent_session.persistence_jsonl.encoding import ENCODINGS, ZSTD
from agent_session.persistence_jsonl.zstd import decompress_frame, scan_frames
from agent_session.session.persistence.failpoints import FAILPOINT_ENV
from tests.forkserver import run_module, start_module
from tests.kill_child import database_of, events, open_backend
from tests.sweeps import sample

pytestmark = pytest.mark.process

REPO = Path(__file__).resolve().parents[1]
WRITE_POINTS = [
    "append:after-write",
    "materialize:after-temp-write",
    "materialize:after-link",
    "materialize:after-dir-fsync",
]
REPAIR_POINTS = ["repair:after-truncate", "repair:after-closer-write"]
SQLITE_WRITE_POINTS = ["sqlite:append:before-commit", "sqlite:append:after-commit", "ack"]
"""``ack``: no failpoint; the parent SIGKILLs the writer as it reads an acknowledgement, while
the writer is already inside its next transaction."""
SQLITE_REPAIR_POINTS = ["sqlite:repair:before-commit", "sqlite:repair:after-commit"]
POSTGRES_WRITE_POINTS = ["postgres:append:before-commit", "postgres:append:after-commit"]
"""Hit by a live session's flushes: the first one's on a worker thread, the later ones' on
a connection of the event loop (sent, then killed before or after the commit)."""
POSTGRES_REPAIR_POINTS = ["postgres:repair:before-commit", "postgres:repair:after-commit"]
REPAIRS = REPAIR_POINTS + SQLITE_REPAIR_POINTS + POSTGRES_REPAIR_POINTS
MATRIX = [
    *((point, kind) for kind in ("none", "zstd") for point in WRITE_POINTS + REPAIR_POINTS),
    *((point, "sqlite") for point in SQLITE_WRITE_POINTS + SQLITE_REPAIR_POINTS),
    *((point, "postgres") for point in POSTGRES_WRITE_POINTS + POSTGRES_REPAIR_POINTS),
]


def child(
    root: Path, seed: int, action: str, point: str, compression: str
) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, FAILPOINT_ENV: point}
    if point.startswith("ack@"):  # kill it when it acknowledges the N-th batch
        return kill_at_ack(root, seed, int(point[4:]), env)
    return run_module(
        "tests.kill_child", str(root), str(seed), action, compression, env=env, timeout=60
    )


def kill_at_ack(
    root: Path, seed: int, ack: int, env: dict[str, str]
) -> subprocess.CompletedProcess[str]:
    process = start_module(
        "tests.kill_child", str(root), str(seed), "write", "sqlite", env=env, stdin=None
    )
    assert process.stdout is not None
    lines = []
    for line in process.stdout:
        lines.append(line)
        if len(lines) == ack:
            process.send_signal(signal.SIGKILL)
            break
    out, err = process.communicate(timeout=60)
    if process.returncode == 0:  # it wrote its last batch before the signal: kill nothing
        return subprocess.CompletedProcess(process.args, -signal.SIGKILL, "".join(lines) + out, err)
    return subprocess.CompletedProcess(process.args, process.returncode, "".join(lines) + out, err)


async def check_write_kill(root: Path, seed: int, point: str, compression: str) -> None:
    many = point in ("append:after-write", "sqlite:append:after-commit", "ack")
    hit = 1 + seed % 3 if many or compression == "postgres" else 1
    action = "live" if compression == "postgres" else "write"
    result = child(root, seed, action, f"{point}@{hit}", compression)
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
    backend = open_backend(str(root), compression)
    if not await backend.list_headers():  # the crash came before the log's name was durable
        assert not acked
        return
    stored = await backend.read_from("k", 0)  # what is on disk, before any repair
    assert [e.encode() for e in stored] == [e.encode() for e in expected[: len(stored)]]
    assert len(stored) >= (acked[-1] if acked else 0)
    assert len(stored) in boundaries, f"partial batch: {len(stored)} events"
    first = await backend.load("k")
    await backend.aclose()
    again = open_backend(str(root), compression)
    second = await again.load("k")
    assert [e.encode() for e in second.events] == [e.encode() for e in first.events]
    await again.aclose()


def open_the_last_row_turn(database: Path) -> int:
    """Drop the last ``turn/end`` row and every row after it, and put a torn row (its data
    cut in half, unparsable) at its seq. Returns how many ``turn/end`` rows remain."""
    with sqlite3.connect(database) as db:
        (seq, data) = db.execute(
            "SELECT seq, data FROM events WHERE type = 'turn/end' ORDER BY seq DESC LIMIT 1"
        ).fetchone()
        db.execute("DELETE FROM events WHERE seq >= ?", (seq,))
        db.execute(
            "INSERT INTO events VALUES ('k', ?, 'turn/end', 7, ?, NULL, NULL)",
            (seq, data[: len(data) // 2]),
        )
        (kept,) = db.execute("SELECT COUNT(*) FROM events WHERE type = 'turn/end'").fetchone()
    return int(kept) - 1


def open_the_last_line_turn(dsn: str) -> int:
    """:func:`open_the_last_row_turn` for a PostgreSQL database: the last ``turn/end`` line
    and every line after it dropped, a torn line (cut in half) at its seq, ``next_seq`` after
    it."""
    with psycopg.connect(dsn, autocommit=True) as db, db.transaction():
        row = db.execute(
            "SELECT seq, line FROM agent_session_event WHERE session_id = 'k' "
            "AND type = 'turn/end' ORDER BY seq DESC LIMIT 1"
        ).fetchone()
        assert row is not None
        seq, line = row
        db.execute("DELETE FROM agent_session_event WHERE session_id = 'k' AND seq >= %s", (seq,))
        db.execute(
            "INSERT INTO agent_session_event VALUES ('k', %s, 1, 'turn/end', %s)",
            (seq, line[: len(line) // 2]),
        )
        db.execute("UPDATE agent_session SET next_seq = %s WHERE id = 'k'", (seq + 1,))
        kept = db.execute(
            "SELECT count(*) FROM agent_session_event WHERE session_id = 'k' AND type = 'turn/end'"
        ).fetchone()
    assert kept is not None
    return int(kept[0]) - 1


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
    if compression == "sqlite":
        kept = open_the_last_row_turn(root / "sessions.db")
    elif compression == "postgres":
        kept = open_the_last_line_turn(database_of(str(root)))
    else:
        kept = open_the_last_turn(root / "_no-cwd" / "k" / ENCODINGS[compression].filename)
    result = child(root, seed, "repair", point, compression)
    assert result.returncode == -signal.SIGKILL, result.stderr
    backend = open_backend(str(root), compression)
    first = await backend.load("k")
    await backend.aclose()
    types = [e.type for e in first.events]
    assert types[-1] == "turn/end"
    assert first.events[-1].data["reason"] == {"kind": "interrupted"}
    assert types.count("turn/end") == kept + 1  # the real ones, one closer: never duplicated
    again = open_backend(str(root), compression)
    second = await again.load("k")
    assert [e.encode() for e in second.events] == [e.encode() for e in first.events]
    await again.aclose()


RUNS = int(os.environ.get("KILL_MATRIX_RUNS", "20"))


@pytest.mark.slow
@pytest.mark.sweep(share=0.3)
@pytest.mark.parametrize(("point", "compression"), MATRIX)
async def test_kill_matrix(tmp_path: Path, point: str, compression: str) -> None:
    """A writer process SIGKILLed at the failpoint, ``KILL_MATRIX_RUNS`` times (20 plain, 10
    compressed), then its log loaded: longer than 20 s at the slowest points, since every run
    starts an interpreter and waits for it to reach the point (in make test, a seeded share
    of the points and of the runs)."""
    runs = RUNS if compression == "none" else max(1, RUNS // 2)
    # every run when exhaustive; in make test a seeded third of them
    for seed in sample(range(runs), 0.3, name=f"kill runs at {point} {compression}"):
        root = tmp_path / f"run-{seed}"
        if point in REPAIRS:
            await check_repair_kill(root, seed, point, compression)
        else:
            await check_write_kill(root, seed, point, compression)


@pytest.mark.parametrize(("point", "compression"), MATRIX)
async def test_kill_matrix_smoke(tmp_path: Path, point: str, compression: str) -> None:
    """One run per failpoint in the quick suite (the full matrix is marked slow)."""
    if point in REPAIRS:
        await check_repair_kill(tmp_path, 3, point, compression)
    else:
        await check_write_kill(tmp_path, 4 if compression == "postgres" else 3, point, compression)
