"""Google ADK's real ``Runner`` on ``EventLogSessionService``, on every store kind: what ADK's
own ``InMemorySessionService`` holds after the same script, every method of the interface, a
tool body SIGKILLed mid-call, two processes on one session, the log read as a transcript
(by the CLI and by the reference), and the import of ADK's own SQLite databases."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from google.adk.errors.already_exists_error import AlreadyExistsError
from google.adk.sessions import InMemorySessionService
from google.adk.sessions.base_session_service import GetSessionConfig
from google.adk.sessions.sqlite_session_service import SqliteSessionService

from agent_session.integrations.google_adk import EventLogSessionService
from agent_session.integrations.google_adk.mapping import log_id
from agent_session.session.errors import SessionCollisionError
from agent_session.session.live.session import Session
from tests.adk_kit import APP, SCRIPT, lines, requests_are_valid, runner, say, shape, text
from tests.forkserver import Child, run_cli, start_module

REPO = Path(__file__).resolve().parent.parent
CLI = [sys.executable, "-m", "agent_session"]


async def _converse(service: object, session_id: str = "s1") -> None:
    run, _ = runner(service, SCRIPT)  # type: ignore[arg-type]
    await service.create_session(  # type: ignore[attr-defined]
        app_name=APP, user_id="u", state={"app:x": 1, "k": "v", "temp:t": 2}, session_id=session_id
    )
    await say(run, "u", session_id, "add please")
    await say(run, "u", session_id, "thanks")


async def test_a_runner_on_the_log_holds_what_adk_in_memory_holds(store: str) -> None:
    memory = InMemorySessionService()
    await _converse(memory)
    expected = await memory.get_session(app_name=APP, user_id="u", session_id="s1")
    assert expected is not None
    assert len(expected.events) == 6
    async with EventLogSessionService(store) as service:
        await _converse(service)
        live = await service.get_session(app_name=APP, user_id="u", session_id="s1")
    assert live is not None
    assert shape(live) == shape(expected)
    assert (
        live.state
        == expected.state
        == {
            "k": "v",
            "answer": "Bye.",
            "app:x": 1,
            "app:calls": 2,
            "user:last_sum": 7,
        }
    )
    async with EventLogSessionService(store) as again:  # a new process's view: the log
        loaded = await again.get_session(app_name=APP, user_id="u", session_id="s1")
    assert loaded is not None
    assert [e.model_dump(mode="json") for e in loaded.events] == [
        e.model_dump(mode="json") for e in live.events
    ]
    assert loaded.state == live.state
    assert loaded.last_update_time == live.events[-1].timestamp


async def test_every_method_of_the_interface(store: str) -> None:
    async with EventLogSessionService(store) as service:
        first = await service.create_session(
            app_name=APP, user_id="ada", state={"app:theme": "dark", "user:lang": "en", "n": 1}
        )
        assert first.id
        assert first.state == {"n": 1, "app:theme": "dark", "user:lang": "en"}
        with pytest.raises(AlreadyExistsError):
            await service.create_session(app_name=APP, user_id="ada", session_id=first.id)
        second = await service.create_session(app_name=APP, user_id="ada", session_id=" two ")
        assert second.id == "two"
        assert second.state == {"app:theme": "dark", "user:lang": "en"}  # shared, not own
        other = await service.create_session(app_name=APP, user_id="bob", session_id="b1")
        assert other.state == {"app:theme": "dark"}
        assert await service.get_user_state(app_name=APP, user_id="ada") == {"lang": "en"}
        assert await service.get_user_state(app_name=APP, user_id="nobody") == {}
        assert await service.get_session(app_name=APP, user_id="ada", session_id="x") is None
        assert await service.get_session(app_name="other", user_id="ada", session_id="two") is None

        run, _ = runner(service, SCRIPT)
        await say(run, "ada", "two", "add please")
        await say(run, "ada", "two", "thanks")
        full = await service.get_session(app_name=APP, user_id="ada", session_id="two")
        assert full is not None
        assert len(full.events) == 6
        stamps = [e.timestamp for e in full.events]
        recent = await service.get_session(
            app_name=APP,
            user_id="ada",
            session_id="two",
            config=GetSessionConfig(num_recent_events=2),
        )
        assert recent is not None
        assert [e.id for e in recent.events] == [e.id for e in full.events[-2:]]
        none = await service.get_session(
            app_name=APP,
            user_id="ada",
            session_id="two",
            config=GetSessionConfig(num_recent_events=0),
        )
        assert none is not None
        assert none.events == []
        assert none.state == full.state
        after = await service.get_session(
            app_name=APP,
            user_id="ada",
            session_id="two",
            config=GetSessionConfig(after_timestamp=stamps[3]),
        )
        assert after is not None
        assert [e.timestamp for e in after.events] == stamps[3:]

        listed = await service.list_sessions(app_name=APP)
        assert [(s.user_id, s.id) for s in listed.sessions] == [
            ("ada", first.id),
            ("bob", "b1"),
            ("ada", "two"),  # updated last
        ]
        assert all(s.events == [] for s in listed.sessions)
        assert listed.sessions[2].state == full.state
        assert listed.next_page_token is None
        mine = await service.list_sessions(app_name=APP, user_id="ada")
        assert [s.id for s in mine.sessions] == [first.id, "two"]
        pages, token = [], None
        while True:
            page = await service.list_sessions(app_name=APP, page_size=2, page_token=token)
            pages.append([s.id for s in page.sessions])
            token = page.next_page_token
            if token is None:
                break
        assert pages == [[first.id, "b1"], ["two"]]
        with pytest.raises(ValueError, match="page_token"):
            await service.list_sessions(app_name=APP, page_token="not-a-token")
        with pytest.raises(ValueError, match="page_size"):
            await service.list_sessions(app_name=APP, page_size=0)
        assert (await service.list_sessions(app_name="none")).sessions == []

        await service.delete_session(app_name=APP, user_id="ada", session_id="two")
        await service.delete_session(app_name=APP, user_id="ada", session_id="never")
        assert await service.get_session(app_name=APP, user_id="ada", session_id="two") is None
        assert [s.id for s in (await service.list_sessions(app_name=APP)).sessions] == [
            first.id,
            "b1",
        ]
        again = await service.create_session(app_name=APP, user_id="ada", session_id="two")
        assert again.state == {
            "app:theme": "dark",
            "app:calls": 2,
            "user:lang": "en",
            "user:last_sum": 7,
        }
        got = await service.get_session(app_name=APP, user_id="ada", session_id="two")
        assert got is not None
        assert got.events == []
    async with EventLogSessionService(store) as reopened:
        assert [s.id for s in (await reopened.list_sessions(app_name=APP)).sessions] == [
            first.id,
            "b1",
            "two",
        ]
        assert await reopened.get_user_state(app_name=APP, user_id="ada") == {
            "lang": "en",
            "last_sum": 7,
        }


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    """``agent-session ARGS`` (forked from an interpreter that imported ADK already)."""
    return run_cli(*args, server="adk")


def _child(store: str, *args: str, stdin: int | None = None) -> Child:
    return start_module("tests.adk_child", store, *args, stdin=stdin, server="adk")


@pytest.mark.process
async def test_a_tool_body_killed_mid_call_is_answered_outcome_unknown(
    store: str, tmp_path: Path
) -> None:
    marker = tmp_path / "side-effect.txt"
    child = _child(store, "crash", "s1", str(marker))
    assert child.stdout is not None
    line = await asyncio.to_thread(child.stdout.readline)  # the tool body is running
    assert line.strip() == "in-tool", child.stderr.read() if child.stderr else ""
    child.send_signal(signal.SIGKILL)
    assert child.wait(timeout=60) == -signal.SIGKILL
    assert lines(marker) == 1
    async with EventLogSessionService(store) as service:
        session = await service.get_session(app_name=APP, user_id="u", session_id="s1")
        assert session is not None
        call_event, answer = session.events[-2], session.events[-1]
        asked = call_event.get_function_calls()
        assert [c.name for c in asked] == ["write_file"]
        (response,) = answer.get_function_responses()
        assert response.id == asked[0].id
        assert response.name == "write_file"
        assert response.response is not None
        assert response.response["error"]["code"] == "TOOL_OUTCOME_UNKNOWN"
        assert answer.author == "calc"
        run, model = runner(service, [[text("I could not tell whether it was written.")]])
        await say(run, "u", "s1", "did it work?")
        assert requests_are_valid(model) == []
        assert lines(marker) == 1  # the body ran once
        final = await service.get_session(app_name=APP, user_id="u", session_id="s1")
        assert final is not None
        assert final.events[-1].content is not None
        assert final.events[-1].content.parts[0].text == "I could not tell whether it was written."


@pytest.mark.process
async def test_a_second_process_gets_a_clear_error_naming_the_owner(store: str) -> None:
    holder = _child(store, "hold", "s1", stdin=subprocess.PIPE)
    assert holder.stdout is not None
    assert holder.stdin is not None
    line = await asyncio.to_thread(holder.stdout.readline)
    assert line.strip() == "holding", holder.stderr.read() if holder.stderr else ""
    try:
        async with EventLogSessionService(store) as service:
            seen = await service.get_session(app_name=APP, user_id="u", session_id="s1")
            assert seen is not None
            assert len(seen.events) == 2
            run, model = runner(service, [[text("yours")]])
            with pytest.raises(SessionCollisionError) as refused:
                await say(run, "u", "s1", "me too")
            assert "written by another process" in str(refused.value)
            assert f"pid {holder.pid}" in str(refused.value) or f"pid={holder.pid}" in str(
                refused.value
            )
            assert model.requests == []  # refused before the model was asked
            with pytest.raises(SessionCollisionError):
                await service.delete_session(app_name=APP, user_id="u", session_id="s1")
            still = await service.get_session(app_name=APP, user_id="u", session_id="s1")
            assert still is not None
            assert len(still.events) == 2
            holder.stdin.close()
            assert holder.wait(timeout=60) == 0
            await say(run, "u", "s1", "me too")  # the holder is gone: this process writes
            final = await service.get_session(app_name=APP, user_id="u", session_id="s1")
        assert final is not None
        assert [e.content.parts[0].text for e in final.events if e.content] == [
            "hello",
            "mine",
            "me too",
            "yours",
        ]
    finally:
        holder.kill()
        holder.wait()


@pytest.mark.process
async def test_the_log_reads_as_a_transcript_here_and_in_the_reference(tmp_path: Path) -> None:
    async with EventLogSessionService(tmp_path) as service:
        await _converse(service)
    id = log_id(APP, "u", "s1")
    verified = _cli("verify", str(tmp_path))
    assert verified.returncode == 0, verified.stdout + verified.stderr
    exported = _cli("export", str(tmp_path), id, "--format", "openai", "--json")
    assert exported.returncode == 0, exported.stderr
    messages = json.loads(exported.stdout)["messages"]
    assert [m["role"] for m in messages] == [
        "user",
        "assistant",
        "tool",
        "tool",
        "assistant",
        "user",
        "assistant",
    ]
    assert [c["function"]["name"] for c in messages[1]["tool_calls"]] == ["add", "add"]
    assert json.loads(messages[2]["content"]) == {"sum": 3}
    from tests.test_reference_interop import reference_load

    loaded = reference_load(tmp_path, id, "none")
    assert "error" not in loaded, loaded
    assert [e["type"] for e in loaded["events"]].count("tool/result") == 2
    database = tmp_path / "sessions.db"  # and a SQLite store, which holds the catalog too
    async with EventLogSessionService(f"sqlite:///{database}") as service:
        await _converse(service)
    from tests.test_reference_interop import reference_load_sqlite

    rows = reference_load_sqlite(database, id)
    assert "error" not in rows, rows
    assert [e["type"] for e in rows["events"]] == [e["type"] for e in loaded["events"]]


@pytest.mark.process
async def test_a_session_adk_kept_in_sqlite_imports_and_reads_back_the_same(
    tmp_path: Path, store: str
) -> None:
    database = tmp_path / "adk.db"
    adk = SqliteSessionService(str(database))
    await _converse(adk)
    expected = await adk.get_session(app_name=APP, user_id="u", session_id="s1")
    assert expected is not None
    imported = _cli("import", store, "s1", str(database), "--format", "adk")
    assert imported.returncode == 0, imported.stderr
    assert "imported 6 ADK events" in imported.stdout
    async with EventLogSessionService(store) as service:
        got = await service.get_session(app_name=APP, user_id="u", session_id="s1")
    assert got is not None
    assert [e.model_dump(mode="json") for e in got.events] == [
        e.model_dump(mode="json") for e in expected.events
    ]
    assert got.state == expected.state
    again = _cli("import", store, "s1", str(database), "--format", "adk")
    assert again.returncode == 2
    assert "exists" in again.stderr
    missing = _cli("import", store, "nope", str(database), "--format", "adk")
    assert missing.returncode == 3
    assert "no ADK session 'nope'" in missing.stderr
    foreign = tmp_path / "foreign.db"
    foreign.write_bytes(b"not a database at all" * 100)
    refused = _cli("import", store, "s1", str(foreign), "--format", "adk")
    assert refused.returncode == 2
    assert "cannot be read as an ADK session database" in refused.stderr


def test_a_call_never_recorded_is_answered_not_started_and_one_recorded_outcome_unknown() -> None:
    """Crash repair's answers, projected to ADK: a call whose ``tool/call`` is on disk is
    ``TOOL_OUTCOME_UNKNOWN``; one asked for but never recorded (a log another writer left
    that way) is ``TOOL_NOT_STARTED``; both in one ``function_response`` event of the
    asking agent, after the calls."""
    from google.adk.events.event import Event

    from agent_session.integrations.google_adk.mapping import assistant_data, encode, project
    from agent_session.integrations.google_adk.writing import write_event
    from agent_session.integrations.turns import BracketCursor, open_turn, record_call
    from agent_session.recovery import closers
    from agent_session.session.events.types import ASSISTANT_MESSAGE

    session = Session.create("adk:a:u:s")
    brackets = BracketCursor()
    user = Event(
        author="user", invocation_id="i1", content={"role": "user", "parts": [{"text": "go"}]}
    )
    write_event(session, brackets, user.model_dump(exclude_none=True, mode="json"))
    asking = Event(
        author="calc",
        invocation_id="i1",
        content={
            "role": "model",
            "parts": [
                {"function_call": {"id": "ran", "name": "add", "args": {"a": 1}}},
                {"function_call": {"id": "waited", "name": "write_file", "args": {}}},
            ],
        },
    ).model_dump(exclude_none=True, mode="json")
    session.append(
        ASSISTANT_MESSAGE,
        assistant_data(asking, encode(asking), 1, 1),
        surface_op="append",
        source_event_seqs=[],
    )
    turn = open_turn(session.events)
    assert turn is not None
    record_call(session, turn, "ran")  # only the first call's body may have started
    start = turn.start
    log = [*session.events, *closers(session.events[start:])]
    projected = [event for _, event in project(log, {})]
    assert len(projected) == 3
    answer = Event.model_validate(projected[-1])
    assert answer.author == "calc"
    assert answer.invocation_id == "i1"
    codes = {
        r.id: (r.name, r.response["error"]["code"])
        for r in answer.get_function_responses()
        if r.response
    }
    assert codes == {
        "ran": ("add", "TOOL_OUTCOME_UNKNOWN"),
        "waited": ("write_file", "TOOL_NOT_STARTED"),
    }


async def test_at_most_max_open_sessions_are_held_and_the_oldest_is_released(store: str) -> None:
    async with EventLogSessionService(store, max_open=1) as first:
        await first.create_session(app_name=APP, user_id="u", session_id="s1")
        await first.create_session(app_name=APP, user_id="u", session_id="s2")  # s1 released
        mine, _ = runner(first, [[text("first writes s2")]])
        await say(mine, "u", "s2", "hi")  # (a JSONL log, and its lock, exist from here)
        async with EventLogSessionService(store) as second:
            run, _ = runner(second, [[text("second writes s1")], [text("never")]])
            await say(run, "u", "s1", "hi")
            with pytest.raises(SessionCollisionError):
                await say(run, "u", "s2", "hi")  # still held by the first service
        got = await first.get_session(app_name=APP, user_id="u", session_id="s1")
        assert got is not None
        assert [e.content.parts[0].text for e in got.events if e.content and e.content.parts] == [
            "hi",
            "second writes s1",
        ]
    with pytest.raises(ValueError, match="max_open"):
        EventLogSessionService(store, max_open=0)


async def test_runners_on_several_sessions_at_once_share_one_service(store: str) -> None:
    """Concurrent runs change the shared state at the same moments; the catalog takes one
    change at a time and keeps every one."""
    async with EventLogSessionService(store) as service:
        runs = []
        for n in range(4):
            await service.create_session(app_name=APP, user_id=f"u{n}", session_id="s")
            run, _ = runner(service, SCRIPT)
            runs.append(say(run, f"u{n}", "s", "add please"))
        await asyncio.gather(*runs)
        for n in range(4):
            got = await service.get_session(app_name=APP, user_id=f"u{n}", session_id="s")
            assert got is not None
            assert len(got.events) == 4
            assert got.state["user:last_sum"] == 7
        # each run counted from the app state its session was read with, as ADK's own
        # services do: the last write of a key wins
        assert got.state["app:calls"] == 2


async def test_of_two_services_on_a_new_jsonl_session_the_first_to_write_wins(
    tmp_path: Path,
) -> None:
    """On JSONL a created session has no log, and so no lock, until its first event: the
    first writer's append creates it; the other service's append is refused, and nothing
    of it is spliced in."""
    async with EventLogSessionService(tmp_path) as first, EventLogSessionService(tmp_path) as other:
        await first.create_session(app_name=APP, user_id="u", session_id="s")
        run, _ = runner(other, [[text("other's answer")]])
        await say(run, "u", "s", "from the other")
        late, model = runner(first, [[text("never")]])
        with pytest.raises(SessionCollisionError, match="another writer"):
            await say(late, "u", "s", "from the first")
        assert model.requests == []
    async with EventLogSessionService(tmp_path) as reader:
        got = await reader.get_session(app_name=APP, user_id="u", session_id="s")
    assert got is not None
    assert [e.content.parts[0].text for e in got.events if e.content and e.content.parts] == [
        "from the other",
        "other's answer",
    ]


async def test_a_refused_database_is_named_without_its_password() -> None:
    import socket

    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]
    url = f"postgresql://ada:hunter2@127.0.0.1:{port}/sessions"
    async with EventLogSessionService(url) as service:
        with pytest.raises(OSError, match="PostgreSQL at") as refused:
            await service.get_session(app_name=APP, user_id="u", session_id="s")
    assert "hunter2" not in str(refused.value)


def _model_call(invocation: str, id: str = "c1") -> object:
    from google.adk.events.event import Event
    from google.genai import types

    part = types.Part(function_call=types.FunctionCall(id=id, name="add", args={"a": 1}))
    return Event(
        invocation_id=invocation, author="calc", content=types.Content(role="model", parts=[part])
    )


async def test_an_equal_re_delivery_is_idempotent_and_a_different_event_with_its_id_is_kept(
    store: str,
) -> None:
    """As ADK's own services: the same event appended twice (the object, or an equal copy)
    is stored once, so a model event with a call stays one call; an event that merely shares
    an id is stored. The log stays valid for ``verify``."""
    async with EventLogSessionService(store) as service:
        session = await service.create_session(app_name=APP, user_id="u", session_id="s")
        event = _model_call("i1")
        await service.append_event(session, event)
        await service.append_event(session, event)  # the same object again
        await service.append_event(session, event.model_copy(deep=True))  # an equal copy
        assert len(session.events) == 1
        other = _model_call("i2")
        other.id = event.id  # another event that shares the id
        got = await service.get_session(app_name=APP, user_id="u", session_id="s")
        assert got is not None
        assert len(got.events) == 1
        await service.append_event(got, other)
        got = await service.get_session(app_name=APP, user_id="u", session_id="s")
        assert got is not None
        assert [e.invocation_id for e in got.events] == ["i1", "i2"]
    checked = _cli("verify", store)
    assert "invalid" not in checked.stdout, checked.stdout


async def test_the_update_time_is_the_last_event_s_as_adk_reports_it(store: str) -> None:
    """``get_session`` and ``list_sessions`` both say the last event's time, even for an
    event stamped before the session was created (every ADK service does)."""
    async with EventLogSessionService(store) as service:
        session = await service.create_session(app_name=APP, user_id="u", session_id="s")
        event = _model_call("i1")
        event.timestamp = session.last_update_time - 1000.0
        appended = await service.append_event(session, event)
        assert session.last_update_time == appended.timestamp
        got = await service.get_session(app_name=APP, user_id="u", session_id="s")
        assert got is not None
        assert got.last_update_time == event.timestamp
        listed = await service.list_sessions(app_name=APP, user_id="u")
        assert [s.last_update_time for s in listed.sessions] == [event.timestamp]


async def test_a_blank_id_gets_a_fresh_one_and_delete_strips_as_get_does(store: str) -> None:
    async with EventLogSessionService(store) as service:
        blank = await service.create_session(app_name=APP, user_id="u", session_id="   ")
        assert blank.id.strip()
        assert blank.id != "   "
        await service.create_session(app_name=APP, user_id="u", session_id="kept")
        assert await service.get_session(app_name=APP, user_id="u", session_id=" kept ")
        await service.delete_session(app_name=APP, user_id="u", session_id=" kept ")
        assert await service.get_session(app_name=APP, user_id="u", session_id="kept") is None
