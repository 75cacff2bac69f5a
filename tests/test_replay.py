"""Replay and diff: a recorded session run again through the agent loop with the model and the
tools served from its log equals the original event for event, bar message ids and times
(every way the demo crashes, on every store, and a settled crash), with no model called and no
recorded tool body run; every loadable session of the reference's conformance corpus replays
to the same tool calls; a tool result changed by one byte diverges at exactly its seq, while
other prose alone is only a difference of text; and the reference loads a replay."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agent_session import (
    MemoryPersistence,
    SessionReplayError,
    logged_requests,
    open_store,
)
from agent_session.lineage.diff import compare
from agent_session.lineage.replay import replay_session
from agent_session.persistence_jsonl import JsonlPersistence
from agent_session.recovery import closers
from tests.backends import fresh_database
from tests.corpus import case_bytes, cases
from tests.test_cli import cli
from tests.test_reference_interop import reference_load
from tests.test_settle import World, crashed, resumed

CRASHES = ["none", "request", "tool", "parallel-tool", "midstream"]


def alike(event: Any) -> Any:
    """An event as a replay must repeat it: all of it but its time and its messages' ids."""
    shown = json.loads(event.encode())
    shown.pop("time", None)
    data = shown.get("data")
    if isinstance(data, dict):
        data.pop("id", None)  # (a user message is the data itself)
        if isinstance(data.get("message"), dict):
            data["message"].pop("id", None)
    return shown


async def _events(store: Any, id: str) -> list[Any]:
    backend = open_store(store) if isinstance(store, str) else store
    try:
        return list((await backend.inspect(id)).events)
    finally:
        if backend is not store:
            await backend.aclose()


@pytest.mark.process
@pytest.mark.parametrize(
    ("kind", "crash"),
    [*(("jsonl", crash) for crash in CRASHES), ("sqlite", "tool"), ("postgres", "midstream")],
)
async def test_a_replay_is_the_recorded_session_again(
    tmp_path: Path, kind: str, crash: str
) -> None:
    if kind == "postgres":
        store = fresh_database()
    else:
        store = f"sqlite:///{tmp_path}/s.db" if kind == "sqlite" else str(tmp_path / "s")
    cli("demo", "--store", store, "--session-id", "c", "--crash", crash, "--turns", "3")
    done = await replay_session(store, "c", to="r")
    original, replayed = await _events(store, "c"), await _events(store, "r")
    assert [alike(e) for e in replayed] == [alike(e) for e in original]
    assert done.answers == len(logged_requests(original))  # each answer served, none asked
    assert done.tool_bodies == 0
    said = cli("diff", store, "c", "r")
    assert said.stdout.startswith("same behaviour: ")
    assert "text differs" not in said.stdout
    if kind == "jsonl":
        loaded = reference_load(Path(store), "r", "none")
        assert "error" not in loaded, loaded
        assert [e["type"] for e in loaded["events"]] == [e.type for e in replayed]


async def test_a_settled_crash_replays_with_its_settlement() -> None:
    world = World()
    await crashed(world, "idempotent")
    await resumed(world, "idempotent")
    store = MemoryPersistence(world.disk, repair=closers)
    try:
        original = await _events(store, "s")
        assert any((e.data.get("meta") or {}).get("settlement") == "re-run" for e in original)
        done = await replay_session(store, "s", to="r")
        replayed = await _events(store, "r")
    finally:
        await store.aclose()
    assert [alike(e) for e in replayed] == [alike(e) for e in original]
    assert done.answers == len(logged_requests(original))


async def test_every_corpus_session_replays_to_the_same_tool_calls(tmp_path: Path) -> None:
    replayed = 0
    for index, case in enumerate(cases("upstream-v0")):
        if "error" in case["load"]:
            continue  # (the reference refused it too)
        root = tmp_path / str(index)
        path = root / case["path"]
        path.parent.mkdir(parents=True)
        path.write_bytes(case_bytes(case))
        store = JsonlPersistence(root)
        try:
            original = await _events(store, case["session_id"])
            if not any(e.type == "turn/start" for e in original):
                with pytest.raises(SessionReplayError):  # (nothing to replay)
                    await replay_session(store, case["session_id"], to="r")
                continue
            done = await replay_session(store, case["session_id"], to="r")
            again = await _events(store, "r")
        finally:
            await store.aclose()
        assert compare(original, again).behaviour is None, case["case"]  # (calls and results)
        assert done.answers == len(logged_requests(original))
        replayed += 1
    assert replayed == 158  # (of the 175 the reference loads: the 17 others hold no turn)


async def test_a_result_changed_by_one_byte_diverges_at_its_seq(tmp_path: Path) -> None:
    store = str(tmp_path / "s")
    cli("demo", "--store", store, "--session-id", "c", "--crash", "none", "--turns", "2")

    async def read_file(args: Any, call: Any) -> str:  # today's read_file: one byte more
        recorded = next(
            e
            for e in original
            if e.type == "tool/result" and e.data["message"]["source"]["callId"] == call.call_id
        )
        return recorded.data["message"]["content"][0]["content"][0]["text"] + "!"

    original = await _events(store, "c")
    done = await replay_session(store, "c", to="r", tools={"read_file": read_file})
    assert done.tool_bodies > 0
    replayed = await _events(store, "r")
    found = compare(original, replayed)
    assert found.behaviour is not None
    assert found.behaviour.kind == "tool result"
    first_read = next(
        e
        for e in original
        if e.type == "tool/result"
        and e.data["message"]["content"][0]["toolCallId"].startswith("call-1-1")
    )
    assert found.behaviour.seqs == (first_read.seq, first_read.seq)
    said = cli("diff", store, "c", "r", check_rc=1)
    assert f"diverged at tool result 1 (turn 1, step 1, call call-1-1; seq {first_read.seq}" in (
        said.stdout
    )
    shown = json.loads(cli("diff", store, "c", "r", "--json", check_rc=1).stdout)
    assert shown["sameBehaviour"] is False
    assert shown["behaviour"]["seqs"] == [first_read.seq, first_read.seq]


async def test_prose_alone_is_a_difference_of_text(tmp_path: Path) -> None:
    store = str(tmp_path / "s")
    cli("demo", "--store", store, "--session-id", "c", "--crash", "none", "--turns", "1")
    original = await _events(store, "c")
    reworded = list(original)
    at = next(i for i, e in enumerate(original) if e.type == "assistant/message")
    data = json.loads(original[at].encode())
    for block in data["data"]["message"]["content"]:
        if block["type"] == "text":
            block["text"] = "In other words."
    reworded[at] = type(original[at]).model_validate(data)
    found = compare(original, reworded)
    assert found.same_behaviour
    assert found.text is not None
    assert found.text.seqs == (original[at].seq, original[at].seq)
