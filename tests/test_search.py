"""``agent-session search``: what every session of a store said, found by phrase, naming the
session, seq and turn; an index outside the store, brought up to date from what was appended
since, that never writes the store."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from agent_session.see.search import surface_texts
from agent_session.session import Session
from tests.test_cli import cli, snapshot_files

pytestmark = pytest.mark.process


def found(store: str, index: Path, phrase: str, *extra: str) -> list[dict]:
    out = cli("search", store, phrase, "--index", str(index), "--json", *extra).stdout
    return [json.loads(line) for line in out.splitlines()]


def test_a_phrase_is_found_where_it_was_said_and_the_store_is_not_written(tmp_path: Path) -> None:
    store, index = str(tmp_path / "s"), tmp_path / "index.sqlite3"
    cli("demo", "--store", store, "--session-id", "a", "--crash", "tool", "--no-recover")
    before = snapshot_files(tmp_path / "s")
    hits = found(store, index, "check that")
    assert [(h["sessionId"], h["turn"], h["type"]) for h in hits] == [
        ("a", 1, "assistant"),
        ("a", 2, "assistant"),
    ]
    events = [json.loads(line) for line in cli("show", store, "a", "--events").stdout.splitlines()]
    for hit in hits:
        assert events[hit["seq"]]["type"] == "assistant/message"
        assert "[check that]" in hit["snippet"]
    calls = found(store, index, "notes-2-1", "--type", "call")
    assert [h["type"] for h in calls] == ["call"]
    assert found(store, index, 'say "hi" OR 1=1 )(') == []  # words, never query syntax
    assert (
        snapshot_files(tmp_path / "s") == before
    )  # the crashed log is neither repaired nor touched
    shown = cli("search", store, "check that", "--index", str(index)).stdout
    assert "a seq " in shown
    assert "(turn 1, assistant): Let me [check that]." in shown


def test_the_index_follows_the_store(tmp_path: Path) -> None:
    store, index = str(tmp_path / "s"), tmp_path / "index.sqlite3"
    cli("demo", "--store", store, "--session-id", "a", "--crash", "none", "--turns", "1")
    assert {h["sessionId"] for h in found(store, index, "All done")} == {"a"}
    cli("demo", "--store", store, "--session-id", "b", "--crash", "none", "--turns", "1")
    assert {h["sessionId"] for h in found(store, index, "All done")} == {"a", "b"}
    with sqlite3.connect(index) as db:
        indexed = dict(db.execute("SELECT id, events FROM sessions"))
    assert set(indexed) == {"a", "b"}
    cli("rm", store, "a")
    assert {h["sessionId"] for h in found(store, index, "All done")} == {"b"}
    assert {h["sessionId"] for h in found(store, index, "All done", "--rebuild")} == {"b"}


def test_an_empty_phrase_is_a_usage_error(tmp_path: Path) -> None:
    cli("demo", "--store", str(tmp_path / "s"), "--crash", "none", "--turns", "1")
    refused = cli("search", str(tmp_path / "s"), " ", "--index", str(tmp_path / "i"), check_rc=4)
    assert "empty" in refused.stderr


def test_the_surface_texts_are_every_kind_of_thing_said() -> None:
    session = Session.create("s")
    session.append("turn/start", {"turn": 1})
    session.append("step/start", {"turn": 1, "step": 1})
    session.append(
        "user/message",
        {
            "role": "user",
            "content": [{"type": "text", "text": "Pay 5."}],
            "source": {"kind": "user"},
            "id": "u",
        },
        surface_op="append",
    )
    message = {
        "role": "assistant",
        "content": [
            {"type": "reasoning", "text": "Pay it."},
            {"type": "text", "text": "Paying."},
            {"type": "tool-call", "id": "c", "name": "pay", "arguments": '{"n": 5}'},
        ],
        "source": {"kind": "model", "provider": "p", "model": "m"},
        "id": "a",
    }
    session.append(
        "assistant/message",
        {"turn": 1, "step": 1, "message": message},
        surface_op="append",
        source_event_seqs=[],
    )
    session.append(
        "tool/call", {"turn": 1, "step": 1, "callId": "c", "name": "pay", "arguments": '{"n": 5}'}
    )
    result = {
        "id": "r",
        "role": "user",
        "source": {"kind": "tool", "callId": "c"},
        "content": [
            {
                "type": "tool-result",
                "toolCallId": "c",
                "content": [{"type": "text", "text": "paid"}],
            }
        ],
    }
    session.append(
        "tool/result",
        {"turn": 1, "step": 1, "message": result},
        surface_op="append",
        source_event_seqs=[4],
    )
    assert list(surface_texts(session.events)) == [
        (2, 1, "user", "Pay 5."),
        (3, 1, "reasoning", "Pay it."),
        (3, 1, "assistant", "Paying."),
        (3, 1, "call", 'pay({"n": 5})'),
        (5, 1, "tool", "paid"),
    ]
