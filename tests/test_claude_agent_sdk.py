"""``EventLogSessionStore`` on every store kind: the Claude Agent SDK's own conformance runner
for session stores, the SDK's ``query()`` mirroring a conversation into it (through a
scripted CLI transport), and Claude Code transcripts imported with what a crash or a resume
left in them repaired, then exported back for the SDK's own readers."""

from __future__ import annotations

import json
import math
import uuid
from pathlib import Path
from typing import Any

import orjson
import pytest
from claude_agent_sdk import (
    get_session_messages,
    get_session_messages_from_store,
    import_session_to_store,
    list_sessions_from_store,
    project_key_for_directory,
)
from claude_agent_sdk.testing import run_session_store_conformance

from agent_session.integrations.claude_agent_sdk import EventLogSessionStore
from agent_session.integrations.claude_agent_sdk.store import log_id
from agent_session.session.errors import SessionCollisionError, SessionDataError
from tests.backends import fresh_database
from tests.claude_kit import PROJECT, converse
from tests.test_cli import cli

KEY = {"project_key": PROJECT, "session_id": "s"}
WHERE = "/work/project"
"""The directory whose project key is ``PROJECT``."""


@pytest.mark.parametrize("kind", ["jsonl", "sqlite", "postgres"])
async def test_the_sdk_s_conformance_runner_passes_all_fourteen_contracts(
    kind: str, tmp_path: Path
) -> None:
    made: list[EventLogSessionStore] = []

    def fresh() -> EventLogSessionStore:  # (the runner wants an empty store per contract)
        if kind == "postgres":
            where = fresh_database()
        else:
            place = tmp_path / f"s{len(made)}"
            where = str(place) if kind == "jsonl" else f"sqlite:///{place}.db"
        made.append(EventLogSessionStore(where))
        return made[-1]

    try:
        await run_session_store_conformance(fresh)
    finally:
        for store in made:
            await store.aclose()
    assert len(made) == 15  # a probe, then one per contract: every optional one ran


async def test_the_sdk_mirrors_a_conversation_into_the_store(store: str, tmp_path: Path) -> None:
    session = str(uuid.uuid4())
    key = {"project_key": PROJECT, "session_id": session}
    kept = EventLogSessionStore(store)
    try:
        scripted = await converse(kept, tmp_path / "config", session, ["read a.txt", "again"])
        assert await kept.load(key) == scripted.written  # deep-equal, in order
    finally:
        await kept.aclose()
    again = EventLogSessionStore(store)  # another process: the log
    try:
        assert await again.load(key) == scripted.written
        messages = await get_session_messages_from_store(again, session, directory=WHERE)
        assert [m.uuid for m in messages] == [e["uuid"] for e in scripted.written]
        listed = await list_sessions_from_store(again, directory=WHERE)  # (the summaries)
        assert [(s.session_id, s.first_prompt) for s in listed] == [(session, "read a.txt")]
        (summary,) = await again.list_session_summaries(PROJECT)
        (entry,) = await again.list_sessions(PROJECT)
        assert summary["mtime"] == entry["mtime"] > 1e12
    finally:
        await again.aclose()


async def test_a_second_writer_is_refused_and_a_bad_batch_stores_nothing(tmp_path: Path) -> None:
    first, second = EventLogSessionStore(tmp_path), EventLogSessionStore(tmp_path)
    try:
        await first.append(KEY, [{"type": "x", "uuid": "1"}])
        with pytest.raises(SessionCollisionError, match="Claude transcript .* another process"):
            await second.append(KEY, [{"type": "x", "uuid": "2"}])
        with pytest.raises(SessionDataError, match=r"entries\[1\]"):
            await first.append(KEY, [{"type": "x", "uuid": "3"}, {"type": "x", "n": math.nan}])
        await first.append(KEY, [{"type": "x", "uuid": "1"}])  # a retried batch: not again
        assert await second.load(KEY) == [{"type": "x", "uuid": "1"}]
        await first.release(KEY)
        await second.append(KEY, [{"type": "x", "uuid": "2"}])
        assert [e["uuid"] for e in await first.load(KEY) or []] == ["1", "2"]
    finally:
        await first.aclose()
        await second.aclose()


async def _sdk_transcript(tmp_path: Path) -> tuple[str, list[dict[str, Any]]]:
    """A session id and the transcript the SDK mirrored of a two-turn conversation."""
    session = str(uuid.uuid4())
    kept = EventLogSessionStore(tmp_path / "mirror")
    try:
        scripted = await converse(kept, tmp_path / "config", session, ["read a.txt", "again"])
        entries = await kept.load({"project_key": PROJECT, "session_id": session})
    finally:
        await kept.aclose()
    assert entries == scripted.written
    return session, entries


def _lines(entries: list[dict[str, Any]]) -> bytes:
    return b"".join(orjson.dumps(e) + b"\n" for e in entries)


@pytest.mark.process
async def test_a_clean_transcript_imports_as_a_conversation_and_exports_unchanged(
    store: str, tmp_path: Path
) -> None:
    _, entries = await _sdk_transcript(tmp_path)
    transcript = tmp_path / "t.jsonl"
    transcript.write_bytes(_lines(entries))
    done = cli("import", store, "cc", str(transcript), "--format", "claude-code").stdout
    assert "imported 10 entries" in done
    assert "0 repaired or dropped" in done
    assert "1 balanced" in cli("verify", store, "cc").stdout
    anthropic = json.loads(cli("export", store, "cc", "--format", "anthropic").stdout)
    assert [m["role"] for m in anthropic["messages"]] == ["user", "assistant"] * 4
    back = cli("export", store, "cc", "--format", "claude-code").stdout.encode()
    assert [orjson.loads(line) for line in back.splitlines()] == entries
    shown = cli("show", store, "cc").stdout
    assert "user: read a.txt" in shown
    assert "assistant → Read(" in shown


@pytest.mark.process
async def test_a_damaged_transcript_is_repaired_with_the_closers_and_the_sdk_reads_it_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    session, entries = await _sdk_transcript(tmp_path)
    first, second = entries[:5], entries[5:]
    # the second turn was cut after its tool_use (no result, no answer), the first turn's
    # entries were written again by a resume, and the last line was torn by a crash
    damaged = _lines(first) + _lines(first[:2]) + _lines(second[:3]) + b'{"type":"user","uu'
    transcript = tmp_path / "t.jsonl"
    transcript.write_bytes(damaged)
    store = tmp_path / "store"
    done = cli("import", str(store), "cc", str(transcript), "--format", "claude-code").stdout
    assert "line 6: a second copy of line 1: skipped" in done
    assert "line 7: a second copy of line 2: skipped" in done
    assert "line 11: torn (the file ends inside it): dropped" in done
    assert "end of file: call toolu_02 had no result: answered TOOL_OUTCOME_UNKNOWN" in done
    assert "1 balanced" in cli("verify", str(store), "cc").stdout
    back = cli("export", str(store), "cc", "--format", "claude-code").stdout.encode()
    # the SDK's own reader, on the exported file where the CLI keeps transcripts
    config, project = tmp_path / "claude", tmp_path / "project"
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(config))
    folder = config / "projects" / project_key_for_directory(project)
    folder.mkdir(parents=True)
    (folder / f"{session}.jsonl").write_bytes(back)
    messages = get_session_messages(session, directory=str(project))
    uses = [
        b["id"]
        for m in messages
        if m.type == "assistant"
        for b in m.message["content"]
        if b["type"] == "tool_use"
    ]
    results = [
        b
        for m in messages
        if m.type == "user" and isinstance(m.message["content"], list)
        for b in m.message["content"]
        if b["type"] == "tool_result"
    ]
    assert uses == ["toolu_01", "toolu_02"]
    assert [r["tool_use_id"] for r in results] == uses  # every call answered, in the chain
    assert results[1]["is_error"] is True
    # and the SDK writes the repaired transcript through a store, as a live mirror would
    kept = EventLogSessionStore(tmp_path / "again")
    try:
        await import_session_to_store(session, kept, directory=str(project))
        again = await kept.load(
            {"project_key": project_key_for_directory(project), "session_id": session}
        )
        assert again == [orjson.loads(line) for line in back.splitlines()]
    finally:
        await kept.aclose()


@pytest.mark.process
async def test_the_reference_loads_a_transcript_s_log(tmp_path: Path) -> None:
    from tests.test_reference_interop import reference_load

    store = EventLogSessionStore(tmp_path / "store")
    try:
        await store.append(KEY, [{"type": "user", "uuid": "u1", "message": {"content": "hi"}}])
    finally:
        await store.aclose()
    loaded = reference_load(tmp_path / "store", log_id(KEY), "none")
    assert "error" not in loaded, loaded
    assert [e["type"] for e in loaded["events"]] == ["claude-code/entry", "claude-code/summary"]


@pytest.mark.process
async def test_a_project_directory_imports_each_transcript(tmp_path: Path) -> None:
    session, entries = await _sdk_transcript(tmp_path)
    project = tmp_path / "project"
    project.mkdir()
    (project / f"{session}.jsonl").write_bytes(_lines(entries))
    (project / "other.jsonl").write_bytes(_lines(entries[:5]))
    (project / "notes.txt").write_text("not a transcript")
    store = tmp_path / "store"
    done = cli("import", str(store), "p", str(project), "--format", "claude-code").stdout
    assert f"imported 10 entries of {project / (session + '.jsonl')} into p-{session}" in done
    assert f"imported 5 entries of {project / 'other.jsonl'} into p-other" in done
    assert "2 balanced" in cli("verify", str(store)).stdout
    again = cli("import", str(store), "p", str(project), "--format", "claude-code", check_rc=2)
    assert f"p-{session}: exists in" in again.stderr


@pytest.mark.process
def test_a_hostile_transcript_imports_what_it_can_and_says_what_it_dropped(
    tmp_path: Path,
) -> None:
    deep = b"[" * 5000 + b"]" * 5000
    lines = [
        b'{"type":"user","uuid":"u1","message":{"role":"user","content":"hi \\u001b[2J"}}',
        b"\xff\xfe not utf-8 at all",
        deep,
        b'{"type":"assistant","uuid":"a1","message":{"id":"m1","content":'
        b'[{"type":"tool_use","input":{}},{"type":"text","text":"ok"}]}}',
        b'{"type":"user","uuid":"r1","message":{"content":'
        b'[{"type":"tool_result","tool_use_id":"nope","content":"x"}]}}',
        b'{"type":"user","uuid":"s1","message":"just a string"}',
        b'{"type":"user","uuid":"u2","message":{"role":"user","content":"bye"}}',
    ]
    transcript = tmp_path / "t.jsonl"
    transcript.write_bytes(b"\n".join(lines) + b"\n")
    store = tmp_path / "store"
    done = cli("import", str(store), "h", str(transcript), "--format", "claude-code").stdout
    assert "line 2: not a transcript entry" in done
    assert "line 3: not a transcript entry" in done
    assert "line 4: a tool_use without an id or a name: dropped" in done
    assert "line 5: a result for no open call nope: kept as an entry only" in done
    assert "1 balanced" in cli("verify", str(store), "h").stdout
    shown = cli("show", str(store), "h").stdout
    assert "\\x1b[2J" in shown  # (a terminal escape is shown as its escape)
    assert "user: bye" in shown
    back = cli("export", str(store), "h", "--format", "claude-code").stdout
    assert [json.loads(line)["uuid"] for line in back.splitlines()][:2] == ["u1", "a1"]
