"""Every case of the reference's SQLite corpus (``upstream-sqlite-v0``) through
``SqlitePersistence``.

For each case the database the reference left is written to ``<tmp>/sessions.db``; ``inspect``
must return the reference's header and events and change nothing; a cold ``load`` (on a fresh
copy) must return them too, and afterwards the rows, read with the corpus's own query, must be
exactly ``rows_after_load`` (the same JSON text in ``data``, the same revision moves). Where
the reference raised, a ``SessionError`` of the same kind must be raised. No case is skipped.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from agent_session.persistence_sqlite import SqlitePersistence
from agent_session.session import (
    SessionError,
    SessionFormatUnsupportedError,
    SessionNotFoundError,
    SessionPersistenceCorruptionError,
)
from tests.corpus import case_bytes, case_id, cases

CASES = [pytest.param(case, id=case_id(case)) for case in cases("upstream-sqlite-v0")]

SESSION_COLUMNS = (
    "id, version, created_at, cwd, parent_session, seed_length, origin, delegation_depth, "
    "agent_preset, incarnation, revision"
)


def _plant(root: Path, case: dict[str, Any]) -> Path:
    path = root / case["path"]
    path.write_bytes(case_bytes(case, "db_b64"))
    return path


def _kind(message: str) -> type[SessionError]:
    """The error kind the reference's message stands for."""
    if "schema version" in message or "application id" in message:
        return SessionFormatUnsupportedError
    if "not found" in message:
        return SessionNotFoundError
    return SessionPersistenceCorruptionError


def _rows(path: Path) -> dict[str, Any]:
    """The corpus's query: every ``sessions`` row and every ``events`` row in key order."""
    with sqlite3.connect(path) as db:
        sessions = [
            dict(zip(SESSION_COLUMNS.split(", "), row, strict=True))
            for row in db.execute(f"SELECT {SESSION_COLUMNS} FROM sessions ORDER BY id")
        ]
        events = [
            list(row)
            for row in db.execute(
                "SELECT session_id, seq, type, time, data, source_event_seqs, surface_op "
                "FROM events ORDER BY session_id, seq"
            )
        ]
    return {"sessions": sessions, "events": events}


async def _check(expected: dict[str, Any], call: Any) -> None:
    if "error" in expected:
        with pytest.raises(_kind(expected["message"])):
            await call
        return
    got = await call
    assert json.dumps(got.header.to_json()) == json.dumps(expected["meta"])
    mine = [json.dumps(e.to_json()) for e in got.events]
    assert mine == [json.dumps(e) for e in expected["events"]]


@pytest.mark.parametrize("case", CASES)
async def test_inspect_matches_the_reference_and_writes_nothing(
    case: dict[str, Any], tmp_path: Path
) -> None:
    path = _plant(tmp_path, case)
    before = path.read_bytes()
    backend = SqlitePersistence(path)
    await _check(case["inspect"], backend.inspect(case["session_id"]))
    await backend.aclose()
    assert _rows(path) == _rows_of_bytes(tmp_path / "before.db", before)


def _rows_of_bytes(path: Path, content: bytes) -> dict[str, Any]:
    path.write_bytes(content)
    return _rows(path)


@pytest.mark.parametrize("case", CASES)
async def test_load_leaves_the_rows_the_reference_left(
    case: dict[str, Any], tmp_path: Path
) -> None:
    path = _plant(tmp_path, case)
    backend = SqlitePersistence(path)
    await _check(case["load"], backend.load(case["session_id"]))
    await backend.aclose()
    assert _rows(path) == case["rows_after_load"]
    again = SqlitePersistence(path)  # a second load (a fresh process) changes nothing more
    await _check(case["load"], again.load(case["session_id"]))
    await again.aclose()
    assert _rows(path) == case["rows_after_load"]


def test_every_case_and_error_kind_is_covered() -> None:
    every = cases("upstream-sqlite-v0")
    assert len(every) == 40
    kinds = {_kind(c[k]["message"]) for c in every for k in ("inspect", "load") if "error" in c[k]}
    assert kinds == {
        SessionFormatUnsupportedError,
        SessionNotFoundError,
        SessionPersistenceCorruptionError,
    }
