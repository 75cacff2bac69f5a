"""Every case of the reference's conformance corpus through ``JsonlPersistence``.

For each case the input bytes are written to ``<tmp>/<path>``; ``inspect`` and (on a fresh
copy) a cold ``load`` must return the reference's header and events, and after ``load`` the file
must be byte-identical to what the reference left. Where the reference raised, a
``SessionError`` of the same kind must be raised. No case is skipped.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from persistence_jsonl import JsonlPersistence
from session import (
    SessionError,
    SessionFormatUnsupportedError,
    SessionNotFoundError,
    SessionPersistenceCorruptionError,
)
from tests.corpus import case_bytes, case_id, cases

ALL_CASES = cases()


def _plant(root: Path, case: dict[str, Any]) -> Path:
    path = root / case["path"]
    path.parent.mkdir(parents=True)
    path.write_bytes(case_bytes(case))
    return path


def _kind(message: str) -> type[SessionError]:
    """The error kind the reference's message stands for."""
    if "uses log format" in message or "not marked ignorable" in message:
        return SessionFormatUnsupportedError
    if "not found" in message:
        return SessionNotFoundError
    return SessionPersistenceCorruptionError


def _as_json(stored: Any) -> dict[str, Any]:
    return {"meta": stored.header.to_json(), "events": [e.to_json() for e in stored.events]}


async def _check(expected: dict[str, Any], call: Any) -> None:
    if "error" in expected:
        with pytest.raises(_kind(expected["message"])):
            await call
        return
    got = _as_json(await call)
    assert json.dumps(got["meta"]) == json.dumps(expected["meta"])
    assert len(got["events"]) == len(expected["events"])
    for index, (mine, theirs) in enumerate(zip(got["events"], expected["events"], strict=True)):
        assert json.dumps(mine) == json.dumps(theirs), f"event {index}"


@pytest.mark.parametrize("case", ALL_CASES, ids=case_id)
async def test_inspect_matches_the_reference_and_writes_nothing(
    case: dict[str, Any], tmp_path: Path
) -> None:
    path = _plant(tmp_path, case)
    before = path.read_bytes()
    backend = JsonlPersistence(tmp_path)
    await _check(case["inspect"], backend.inspect(case["session_id"]))
    assert path.read_bytes() == before
    await backend.aclose()


@pytest.mark.parametrize("case", ALL_CASES, ids=case_id)
async def test_load_matches_the_reference_byte_for_byte(
    case: dict[str, Any], tmp_path: Path
) -> None:
    path = _plant(tmp_path, case)
    backend = JsonlPersistence(tmp_path)
    await _check(case["load"], backend.load(case["session_id"]))
    assert path.read_bytes() == case_bytes(case, "file_after_load_b64")
    await backend.aclose()
    again = JsonlPersistence(tmp_path)  # a second load (fresh process) changes nothing more
    await _check(case["load"], again.load(case["session_id"]))
    assert path.read_bytes() == case_bytes(case, "file_after_load_b64")
    await again.aclose()


def test_every_error_kind_is_mapped() -> None:
    messages = [c[k]["message"] for c in ALL_CASES for k in ("inspect", "load") if "error" in c[k]]
    assert messages
    assert {_kind(m) for m in messages} == {SessionPersistenceCorruptionError}
