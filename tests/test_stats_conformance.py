"""Session statistics are the reference's: every row of its stats corpus
(``tests/data/upstream-stats-v0.jsonl.gz``, a copy of ``conformance/upstream-stats-v0.jsonl``),
field by field, over the events a load returns (closers added), over the stored events, and
over the hand-built sequences that pin single rules."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agent_session.persistence_jsonl import JsonlPersistence
from agent_session.session.events.stats import STATS_FIELDS, SessionStats, session_stats
from tests.corpus import case_bytes, cases

ROWS = cases("upstream-stats-v0")
LOGS = {(c["scenario"], c["case"]): c for c in cases("upstream-v0")}
APPROVAL = {(c["scenario"], c["case"]): c for c in cases("upstream-approval-v0")}


def log_bytes(row: dict[str, Any]) -> bytes:
    key = (row["scenario"], row["case"])
    if row["source"] == "upstream-v0.jsonl":
        return case_bytes(LOGS[key])
    lines = APPROVAL[key]["log_lines"] if row["source"] != "inline" else row["log_lines"]
    return b"".join(line.encode() + b"\n" for line in lines)


def test_the_corpus_has_every_kind_of_row() -> None:
    kinds = [row["source"] for row in ROWS]
    assert len(ROWS) == 203
    assert {k: kinds.count(k) for k in set(kinds)} == {
        "upstream-v0.jsonl": 175,
        "upstream-approval-v0.jsonl": 16,
        "inline": 4,
        "synthetic": 8,
    }


@pytest.mark.parametrize(
    "row",
    [r for r in ROWS if r["source"] != "synthetic"],
    ids=lambda r: f"{r['source']}:{r['scenario']}/{r['case']}",
)
async def test_each_logged_case_has_the_reference_s_figures(
    tmp_path: Path, row: dict[str, Any]
) -> None:
    path = tmp_path / row["path"]
    path.parent.mkdir(parents=True)
    path.write_bytes(log_bytes(row))
    backend = JsonlPersistence(tmp_path)
    try:
        stored = await backend.read_from(row["session_id"], 0)
        loaded = (await backend.load(row["session_id"])).events
    finally:
        await backend.aclose()
    stored_stats = SessionStats().fold(stored)
    assert stored_stats.value() == row["stats_stored"]
    assert stored_stats.as_of_seq == row["stored_as_of_seq"]
    folded = SessionStats().fold(loaded)
    assert folded.value() == row["stats"]
    assert folded.as_of_seq == row["as_of_seq"]
    assert list(folded.value()) == list(STATS_FIELDS)


@pytest.mark.parametrize(
    "row", [r for r in ROWS if r["source"] == "synthetic"], ids=lambda r: r["case"]
)
def test_each_hand_built_sequence_folds_as_the_reference_folds_it(row: dict[str, Any]) -> None:
    folded = SessionStats().fold(row["events"])
    assert folded.value() == row["stats"]
    assert folded.as_of_seq == row["as_of_seq"]


def test_an_empty_log_is_all_zeros() -> None:
    assert session_stats([]) == dict.fromkeys(STATS_FIELDS, 0)
