"""``copy`` between stores keeps every stored event byte for byte: the reference's JSONL logs
through SQLite and back, and the reference's SQLite databases through JSONL and back; a copy
that cannot be exact is refused and leaves nothing behind."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from agent_session.cli.copy import copy_session
from agent_session.persistence_jsonl import JsonlPersistence
from agent_session.persistence_sqlite import SqlitePersistence
from agent_session.session import SessionCollisionError, SessionEventError, decode_json
from tests.corpus import PACKED_ROW_TYPES, case_bytes, case_id, cases, complete_lines
from tests.forkserver import run_cli


def _final_logs() -> list[dict[str, Any]]:
    """Per scenario of the plain corpus, the longest log that loads (the whole run)."""
    best: dict[str, dict[str, Any]] = {}
    for case in cases():
        if "error" in case["load"] or not case["case"].startswith("prefix-"):
            continue
        kept = best.get(case["scenario"])
        if kept is None or len(case_bytes(case)) > len(case_bytes(kept)):
            best[case["scenario"]] = case
    return [best[s] for s in sorted(best)]


def _plain_lines(lines: list[bytes]) -> dict[int, bytes]:
    """The event lines that are not packed rows, by seq."""
    out = {}
    for line in lines[1:]:
        raw = decode_json(line)
        if raw["type"] not in PACKED_ROW_TYPES:
            out[raw["seq"]] = line
    return out


@pytest.mark.parametrize("case", _final_logs(), ids=case_id)
async def test_reference_jsonl_logs_survive_sqlite_and_back_byte_for_byte(
    case: dict[str, Any], tmp_path: Path
) -> None:
    source_root = tmp_path / "src"
    log = source_root / case["path"]
    log.parent.mkdir(parents=True)
    log.write_bytes(case_bytes(case))
    original = _plain_lines(complete_lines(case))
    assert original
    id = case["session_id"]
    source = JsonlPersistence(source_root)
    database = SqlitePersistence(tmp_path / "s.db")
    copied = await copy_session(source, database, id)
    back = JsonlPersistence(tmp_path / "back")
    await copy_session(database, back, id)
    rendered = (await database.read_raw(id)).content.split(b"\n")  # type: ignore[union-attr]
    final = (tmp_path / "back" / case["path"]).read_bytes().split(b"\n")
    for seq, line in original.items():
        assert rendered[seq + 1] == line, f"row {seq}"
        assert line in final, f"line of seq {seq}"
    stored = [e.encode() for e in await source.read_from(id, 0)]
    assert copied.events == len(stored)
    assert [e.encode() for e in await back.read_from(id, 0)] == stored
    for backend in (source, database, back):
        await backend.aclose()


def _rows(path: Path) -> list[tuple[Any, ...]]:
    with sqlite3.connect(path) as db:
        return db.execute(
            "SELECT session_id, seq, type, time, data, source_event_seqs, surface_op "
            "FROM events ORDER BY session_id, seq"
        ).fetchall()


AS_WRITTEN = [c for c in cases("upstream-sqlite-v0") if c["case"] == "as-written"]


@pytest.mark.parametrize("case", AS_WRITTEN, ids=case_id)
async def test_reference_databases_survive_jsonl_and_back_row_for_row(
    case: dict[str, Any], tmp_path: Path
) -> None:
    original = tmp_path / "original.db"
    original.write_bytes(case_bytes(case, "db_b64"))
    rows = _rows(original)
    source = SqlitePersistence(original)
    jsonl = JsonlPersistence(tmp_path / "jsonl")
    again = SqlitePersistence(tmp_path / "again.db")
    await copy_session(source, jsonl, case["session_id"])
    await copy_session(jsonl, again, case["session_id"])
    for backend in (source, jsonl, again):
        await backend.aclose()
    assert _rows(tmp_path / "again.db") == rows  # the same JSON text in every column
    assert _rows(original) == rows  # the source was only read


async def test_a_copy_never_replaces_a_session_of_the_target(tmp_path: Path) -> None:
    case = AS_WRITTEN[0]
    (tmp_path / "a.db").write_bytes(case_bytes(case, "db_b64"))
    (tmp_path / "b.db").write_bytes(case_bytes(case, "db_b64"))
    before = _rows(tmp_path / "b.db")
    source, target = SqlitePersistence(tmp_path / "a.db"), SqlitePersistence(tmp_path / "b.db")
    with pytest.raises(SessionCollisionError):
        await copy_session(source, target, case["session_id"])
    await source.aclose()
    await target.aclose()
    assert _rows(tmp_path / "b.db") == before


async def test_an_event_sqlite_cannot_hold_is_refused_and_nothing_is_left(
    tmp_path: Path,
) -> None:
    root = tmp_path / "src"
    source = JsonlPersistence(root)
    await source.create({"version": 0, "id": "p", "createdAt": 1, "delegationDepth": 0})
    plugin = {"type": "future/thing", "seq": 0, "time": 1, "data": {}, "ignorable": True}
    await source.append("p", [plugin])
    target = SqlitePersistence(tmp_path / "t.db")
    with pytest.raises(SessionEventError, match="marked ignorable, which the SQLite"):
        await copy_session(source, target, "p")
    assert await target.list_headers() == []
    await source.aclose()
    await target.aclose()


async def test_repaired_logs_copy_into_sqlite_with_their_values(tmp_path: Path) -> None:
    """A repair writes its closers ``surfaceOp`` first, as the reference does; a SQLite row
    keeps the reference's column order instead. The copy keeps every data byte and every
    envelope value, and a copy back to JSONL loads to the same events."""
    case = next(
        c for c in cases() if b"TOOL_OUTCOME_UNKNOWN" in case_bytes(c, "file_after_load_b64")
    )
    root = tmp_path / "src"
    log = root / case["path"]
    log.parent.mkdir(parents=True)
    log.write_bytes(case_bytes(case, "file_after_load_b64"))  # repaired by the reference
    source = JsonlPersistence(root)
    database = SqlitePersistence(tmp_path / "t.db")
    await copy_session(source, database, case["session_id"])
    stored = await source.read_from(case["session_id"], 0)
    copied = await database.read_from(case["session_id"], 0)
    assert [e.to_json() for e in copied] == [e.to_json() for e in stored]
    closer = next(e for e in stored if e.type == "tool/result" and "error" in e.data)
    assert list(closer.to_json())[-2:] == ["surfaceOp", "sourceEventSeqs"]
    for backend in (source, database):
        await backend.aclose()


@pytest.mark.process
@pytest.mark.parametrize(
    ("kind", "point"),
    [
        ("jsonl", "append:after-write@1"),  # the staged log's second batch, on disk unsynced
        ("sqlite", "sqlite:append:before-commit"),
        ("postgres", "postgres:append:before-commit"),
    ],
)
def test_a_copy_killed_midway_leaves_no_session_in_the_destination(
    tmp_path: Path, kind: str, point: str
) -> None:
    """``copy`` SIGKILLed while it writes: the destination has the session whole or not at
    all (it had a prefix that listed and verified as a session); the next copy succeeds."""
    import os
    import signal

    from tests.backends import fresh_database
    from tests.test_cli import cli

    source = tmp_path / "src"
    cli("demo", "--store", str(source), "--session-id", "s1", "--crash", "none")
    target = {
        "jsonl": str(tmp_path / "dst"),
        "sqlite": f"sqlite:///{tmp_path / 'dst.db'}",
        "postgres": fresh_database() if kind == "postgres" else "",
    }[kind]
    killed = run_cli(
        "copy", str(source), target, "s1", env={**os.environ, "AGENT_SESSION_FAILPOINT": point}
    )
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    listed = cli("ls", target, "--json", check_rc=None)
    assert '"id":"s1"' not in listed.stdout, listed.stdout
    assert cli("verify", target, "s1", check_rc=None).returncode == 3
    cli("copy", str(source), target, "s1")
    assert cli("verify", target, "s1").returncode == 0
