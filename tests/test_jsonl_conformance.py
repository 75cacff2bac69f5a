"""Every case of the reference's two conformance corpora (plain ``session.jsonl`` and its
default ``session.jsonl.zstd``) through ``JsonlPersistence``, in the corpus's own compression
mode and in ``auto``.

For each case the input bytes are written to ``<tmp>/<path>``; ``inspect`` and (on a fresh
copy) a cold ``load`` must return the reference's header and events, and after ``load`` the file
must be byte-identical to what the reference left (for a compressed log that includes the frame
this backend compressed: the recovered events and the closers). Where the reference raised, a
``SessionError`` of the same kind must be raised. No case is skipped.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agent_session.persistence_jsonl import JsonlPersistence
from agent_session.persistence_jsonl.encoding import Compression
from agent_session.session import (
    SessionError,
    SessionFormatUnsupportedError,
    SessionNotFoundError,
    SessionPersistenceCorruptionError,
)
from tests.corpus import case_bytes, case_id, cases

PLAIN_CASES = cases()
ZSTD_CASES = cases("upstream-v0-zstd")
ALL_CASES = [
    pytest.param(case, mode, id=f"{mode}:{case_id(case)}")
    for corpus, own in ((PLAIN_CASES, "none"), (ZSTD_CASES, "zstd"))
    for case in corpus
    for mode in (own, "auto")
]


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


@pytest.mark.parametrize(("case", "mode"), ALL_CASES)
async def test_inspect_matches_the_reference_and_writes_nothing(
    case: dict[str, Any], mode: Compression, tmp_path: Path
) -> None:
    path = _plant(tmp_path, case)
    before = path.read_bytes()
    backend = JsonlPersistence(tmp_path, compression=mode)
    await _check(case["inspect"], backend.inspect(case["session_id"]))
    assert path.read_bytes() == before
    await backend.aclose()


@pytest.mark.parametrize(("case", "mode"), ALL_CASES)
async def test_load_matches_the_reference_byte_for_byte(
    case: dict[str, Any], mode: Compression, tmp_path: Path
) -> None:
    path = _plant(tmp_path, case)
    backend = JsonlPersistence(tmp_path, compression=mode)
    await _check(case["load"], backend.load(case["session_id"]))
    assert path.read_bytes() == case_bytes(case, "file_after_load_b64")
    await backend.aclose()
    again = JsonlPersistence(
        tmp_path, compression=mode
    )  # a second load (fresh process) changes nothing more
    await _check(case["load"], again.load(case["session_id"]))
    assert path.read_bytes() == case_bytes(case, "file_after_load_b64")
    await again.aclose()


def test_every_error_kind_is_mapped() -> None:
    every = [*PLAIN_CASES, *ZSTD_CASES]
    messages = [c[k]["message"] for c in every for k in ("inspect", "load") if "error" in c[k]]
    assert messages
    assert {_kind(m) for m in messages} == {SessionPersistenceCorruptionError}
