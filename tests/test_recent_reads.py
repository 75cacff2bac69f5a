"""Reading the last events of a log from its end (``SessionPersistence.read_tail``), on every
store: generated logs give back exactly the end of a whole read; a torn or damaged end is
read whole and says so; a JSONL log is read only near its end; and a new Google ADK service's
first ``get_session(num_recent_events=...)`` gives what a whole read gives (events, state,
update time), also when the catalog's record of the state lags the log (a writer killed
before it recorded) and when the last turn is open (its closers are shown)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sqlite3
import tempfile
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg
import pytest
from google.adk.events.event import Event
from google.adk.events.event_actions import EventActions
from google.adk.sessions.base_session_service import GetSessionConfig
from google.genai import types
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent_session.integrations.google_adk import EventLogSessionService
from agent_session.integrations.google_adk.catalog import catalog_for
from agent_session.integrations.openai_agents import EventLogSession
from agent_session.persistence_jsonl import JsonlPersistence
from agent_session.persistence_jsonl.fileio import FileOps
from agent_session.persistence_postgres import PostgresPersistence
from agent_session.persistence_sqlite import SqlitePersistence
from agent_session.session import Runtime, SessionError
from agent_session.session.persistence.service import SessionPersistence
from agent_session.stores import parse_store
from tests.backends import fresh_database
from tests.sweeps import examples
from tests.test_append_load_parity import SHAPES, action

Actions = list[tuple[str, int, str | None, bool]]


async def _write(backend: SessionPersistence, id: str, actions: Actions) -> None:
    """Append what ``actions`` generate (refused appends leave nothing), flush, close."""
    runtime = Runtime()
    runtime.install(backend)
    session = runtime.sessions.create(id)
    for kind, shape, op, _ in actions:
        with contextlib.suppress(SessionError, TypeError):
            if kind == "delta":
                turn, step, text, index, delta = SHAPES[kind][shape % len(SHAPES[kind])]
                session.append_delta(turn, step, text, index=index, kind=delta)
            else:
                session.append(kind, SHAPES[kind][shape % len(SHAPES[kind])], surface_op=op)
    await runtime.sessions.flush(session)
    await backend.aclose()


async def _tails_match(make: Callable[[], SessionPersistence], id: str, actions: Actions) -> None:
    await _write(make(), id, actions)
    backend = make()
    try:
        try:
            whole = await backend.diagnose(id)
        except SessionError:
            return  # (nothing was appended: no log)
        stored = [e.encode() for e in whole.session.events[: whole.stored_events]]
        for count in (0, 1, 2, 3, 7, len(stored), len(stored) + 5):
            tail = await backend.read_tail(id, count)
            start = max(0, len(stored) - count)
            assert tail.start == start
            assert [e.encode() for e in tail.events] == stored[start:]
            assert tail.torn is whole.torn_tail
            assert tail.header == whole.session.header
    finally:
        await backend.aclose()


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(action, max_size=30), st.sampled_from(["none", "zstd"]))
def test_a_jsonl_tail_is_the_end_of_a_whole_read(actions: Actions, compression: str) -> None:
    with tempfile.TemporaryDirectory() as root:
        make = lambda: JsonlPersistence(root, new_session_compression=compression)  # noqa: E731
        asyncio.run(_tails_match(make, "s", actions))


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(action, max_size=30))
def test_a_sqlite_tail_is_the_end_of_a_whole_read(actions: Actions) -> None:
    with tempfile.TemporaryDirectory() as root:
        path = os.path.join(root, "sessions.db")
        asyncio.run(_tails_match(lambda: SqlitePersistence(path), "s", actions))


def test_a_postgres_tail_is_the_end_of_a_whole_read() -> None:
    dsn = fresh_database()

    @settings(
        max_examples=examples(25), deadline=None, suppress_health_check=[HealthCheck.too_slow]
    )
    @given(st.lists(action, max_size=30))
    def check(actions: Actions) -> None:
        id = f"s-{uuid.uuid4().hex[:8]}"
        asyncio.run(_tails_match(lambda: PostgresPersistence(dsn), id, actions))

    check()


# --- a torn or damaged end ----------------------------------------------------------------


async def _a_finished_and_an_open_turn(backend: SessionPersistence) -> None:
    runtime = Runtime()
    runtime.install(backend)
    session = runtime.sessions.create("s")
    session.append("turn/start", {"turn": 1})
    session.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    session.append("turn/start", {"turn": 2})
    await runtime.sessions.flush(session)
    await backend.aclose()


def _damage(store: str, kind: str) -> None:
    """Leave a torn end past the stored events, as a crash mid-append leaves it."""
    if kind == "jsonl":
        (log,) = Path(store).glob("*/*/session.jsonl")
        with open(log, "ab") as file:
            file.write(b'{"type":"plugin/note","seq":3,"ti')
    elif kind == "sqlite":
        with contextlib.closing(sqlite3.connect(store.removeprefix("sqlite:///"))) as db, db:
            db.execute(
                "INSERT INTO events VALUES ('s', 3, 'plugin/note', 0, '{not json', NULL, NULL)"
            )
    else:
        with psycopg.connect(store, autocommit=True) as db:
            db.execute(
                "INSERT INTO agent_session_event VALUES ('s', 3, 1, 'plugin/note', '{not json')"
            )


async def test_a_torn_end_is_read_whole_and_said_torn(store: str) -> None:
    kind = parse_store(store).kind
    await _a_finished_and_an_open_turn(parse_store(store).open())
    _damage(store, kind)
    backend = parse_store(store).open()
    try:
        tail = await backend.read_tail("s", 2)
        assert tail.torn is True
        assert (tail.start, [e.type for e in tail.events]) == (1, ["turn/end", "turn/start"])
        assert (await backend.diagnose("s")).torn_tail is True  # (and the read wrote nothing)
    finally:
        await backend.aclose()


class _Counting(FileOps):
    """File operations that count the bytes read."""

    read_bytes = 0

    def read_prefix(self, path: str, limit: int) -> bytes | None:
        data = super().read_prefix(path, limit)
        _Counting.read_bytes += len(data or b"")
        return data

    def read_range(self, path: str, offset: int, size: int) -> bytes | None:
        data = super().read_range(path, offset, size)
        _Counting.read_bytes += len(data or b"")
        return data


async def test_a_jsonl_tail_reads_only_near_the_end_of_a_long_log(tmp_path: Path) -> None:
    backend = JsonlPersistence(tmp_path)
    runtime = Runtime()
    runtime.install(backend)
    session = runtime.sessions.create("long")
    for n in range(20_000):
        session.append("plugin/note", {"n": n, "text": "x" * 40})
    await runtime.sessions.flush(session)
    await backend.aclose()
    (log,) = tmp_path.glob("*/*/session.jsonl")
    reader = JsonlPersistence(tmp_path, ops=_Counting())
    try:
        tail = await reader.read_tail("long", 20)
        assert [e.data["n"] for e in tail.events] == list(range(19_980, 20_000))
        assert _Counting.read_bytes < os.path.getsize(log) // 10, _Counting.read_bytes
    finally:
        await reader.aclose()


# --- a new ADK service's first partial read -------------------------------------------------


def _adk_event(n: int, delta: dict[str, Any]) -> Event:
    """The ``n``th event of turns of four: a question, a call, its answer, a final answer."""
    role, author, part = "model", "agent", types.Part(text=f"answer {n}")
    if n % 4 == 0:
        role, author, part = "user", "user", types.Part(text=f"question {n}")
    elif n % 4 == 1:
        part = types.Part(function_call=types.FunctionCall(id=f"c{n}", name="add", args={"n": n}))
    elif n % 4 == 2:
        role, part = (
            "user",
            types.Part(
                function_response=types.FunctionResponse(
                    id=f"c{n - 1}", name="add", response={"n": n}
                )
            ),
        )
    return Event(
        author=author,
        invocation_id=f"i{n // 4}",
        content=types.Content(role=role, parts=[part]),
        actions=EventActions(state_delta=delta),
        timestamp=1_000_000 + n,
    )


async def _append(store: str, events: range, delta: Callable[[int], dict[str, Any]]) -> None:
    async with EventLogSessionService(store) as service:
        session = await service.get_session(app_name="a", user_id="u", session_id="s")
        if session is None:
            session = await service.create_session(
                app_name="a", user_id="u", session_id="s", state={"k0": "created"}
            )
        for n in events:
            await service.append_event(session, _adk_event(n, delta(n)))


async def _partial_and_whole(store: str, count: int) -> tuple[Any, Any]:
    async with EventLogSessionService(store) as first:
        config = GetSessionConfig(num_recent_events=count)
        partial = await first.get_session(app_name="a", user_id="u", session_id="s", config=config)
    async with EventLogSessionService(store) as second:
        whole = await second.get_session(app_name="a", user_id="u", session_id="s")
    return partial, whole


def _same_end(partial: Any, whole: Any, count: int) -> None:
    assert partial is not None
    assert whole is not None
    assert [e.model_dump() for e in partial.events] == [
        e.model_dump() for e in whole.events[-count:]
    ]
    assert partial.state == whole.state
    assert partial.last_update_time == whole.last_update_time


async def test_a_first_partial_read_is_the_end_of_a_whole_read(store: str) -> None:
    await _append(store, range(92), lambda n: {f"k{n % 7}": n, "app:seen": n} if n % 4 else {})
    for count in (1, 2, 5, 40, 500):
        partial, whole = await _partial_and_whole(store, count)
        _same_end(partial, whole, count)
    assert whole.state["k0"] == 91  # (the last n with n % 7 == 0 and n % 4 != 0)
    assert whole.state["app:seen"] == 91


async def test_a_partial_read_takes_nothing_so_another_process_may_write(store: str) -> None:
    await _append(store, range(8), lambda n: {})
    config = GetSessionConfig(num_recent_events=2)
    async with EventLogSessionService(store) as reader, EventLogSessionService(store) as writer:
        seen = await reader.get_session(app_name="a", user_id="u", session_id="s", config=config)
        assert seen is not None
        assert [e.timestamp for e in seen.events] == [1_000_006, 1_000_007]
        session = await writer.get_session(app_name="a", user_id="u", session_id="s")
        assert session is not None
        await writer.append_event(session, _adk_event(8, {}))  # (a whole read would hold it)


async def test_a_partial_read_folds_every_delta_the_catalog_has_not_recorded(store: str) -> None:
    await _append(store, range(30), lambda n: {"early": n})
    catalog = catalog_for(parse_store(store))
    recorded = catalog.get("a", "u", "s")
    assert recorded is not None
    assert recorded.folded > 0
    # the next writer sets "late" once, early on, then is killed before it records anything
    await _append(store, range(30, 300), lambda n: {"late": "set"} if n == 31 else {})
    catalog.update(
        "a", "u", {}, {}, {("u", "s"): (recorded.updated, recorded.state, recorded.folded)}
    )
    catalog.close()
    partial, whole = await _partial_and_whole(store, 3)
    _same_end(partial, whole, 3)
    assert partial.state == {"k0": "created", "early": 29, "late": "set"}


async def test_a_partial_read_of_an_open_last_turn_shows_its_closers(store: str) -> None:
    await _append(store, range(2), lambda n: {})  # a question and a call, never answered
    partial, whole = await _partial_and_whole(store, 1)
    _same_end(partial, whole, 1)
    (answer,) = partial.events[0].get_function_responses()
    assert answer.id == "c1"
    assert answer.response is not None
    assert answer.response["error"]["code"] in ("TOOL_OUTCOME_UNKNOWN", "TOOL_NOT_STARTED")


@pytest.fixture(autouse=True)
def _reset_count() -> None:
    _Counting.read_bytes = 0


def _forget_folded(store: str) -> None:
    """Make the catalog one an earlier build wrote: without the ``folded`` record."""
    spec = parse_store(store)
    if spec.kind == "jsonl":
        (path,) = Path(store).glob(".agent-session-adk-*.json")
        data = json.loads(path.read_text())
        for user in data["users"].values():
            for entry in user["sessions"].values():
                del entry["folded"]
        path.write_text(json.dumps(data))
    elif spec.kind == "sqlite":
        with contextlib.closing(sqlite3.connect(spec.path)) as db, db:
            db.execute("ALTER TABLE agent_session_adk_session DROP COLUMN folded")
    else:
        with psycopg.connect(store, autocommit=True) as db:
            db.execute("ALTER TABLE agent_session_adk_session DROP COLUMN folded")


async def test_a_catalog_of_an_earlier_build_is_read_and_gains_the_record(store: str) -> None:
    await _append(store, range(12), lambda n: {"n": n})
    _forget_folded(store)
    partial, whole = await _partial_and_whole(store, 2)  # (folds from the log's start)
    _same_end(partial, whole, 2)
    assert partial.state == {"k0": "created", "n": 11}
    await _append(store, range(12, 16), lambda n: {"n": n})
    catalog = catalog_for(parse_store(store))
    recorded = catalog.get("a", "u", "s")
    catalog.close()
    assert recorded is not None
    assert recorded.folded > 0


# --- a reopened OpenAI Agents SDK session's first limited read ----------------------------


def _sdk_turn(n: int) -> list[dict[str, Any]]:
    """A run's items: a question, a call and its output, the answer."""
    call = {"type": "function_call", "call_id": f"c{n}", "name": "f", "arguments": "{}"}
    return [
        {"role": "user", "content": f"question {n}"},
        {**call, "id": f"fc{n}"},
        {"type": "function_call_output", "call_id": f"c{n}", "output": str(n)},
        {
            "type": "message",
            "role": "assistant",
            "id": f"msg{n}",
            "status": "completed",
            "content": [{"type": "output_text", "text": f"answer {n}", "annotations": []}],
        },
    ]


async def _sdk_limited_and_whole(store: str, limit: int) -> tuple[list[Any], list[Any]]:
    first = EventLogSession("chat", store, warn_without_hooks=False)
    try:
        limited = await first.get_items(limit=limit)
    finally:
        await first.aclose()
    second = EventLogSession("chat", store, warn_without_hooks=False)
    try:
        whole = await second.get_items()
    finally:
        await second.aclose()
    return limited, whole


async def test_a_reopened_sdk_session_s_first_limited_read_is_its_history_s_end(
    store: str,
) -> None:
    writer = EventLogSession("chat", store, warn_without_hooks=False)
    for n in range(20):
        await writer.add_items(_sdk_turn(n))
    await writer.pop_item()  # (a surface replace, past which the end reads alone)
    for n in range(20, 40):
        await writer.add_items(_sdk_turn(n))
    await writer.aclose()
    for limit in (0, 1, 3, 10, 100, 1_000):
        limited, whole = await _sdk_limited_and_whole(store, limit)
        assert limited == (whole[-limit:] if limit else [])
    assert len(whole) == 159
    assert whole[-1]["content"][0]["text"] == "answer 39"


async def test_a_reopened_sdk_session_s_limited_read_after_a_clear_or_a_crash(
    store: str,
) -> None:
    writer = EventLogSession("chat", store, warn_without_hooks=False)
    await writer.add_items(_sdk_turn(0))
    await writer.clear_session()  # (a replace among the last events: read whole)
    await writer.aclose()
    assert await _sdk_limited_and_whole(store, 5) == ([], [])
    writer = EventLogSession("chat", store, warn_without_hooks=False)
    await writer.add_items(_sdk_turn(1)[:2])  # a call, never answered: the turn stays open
    await writer.aclose()
    limited, whole = await _sdk_limited_and_whole(store, 1)
    assert limited == whole[-1:]
    assert whole[-1]["type"] == "function_call_output"
    assert "interrupted" in whole[-1]["output"]  # (crash repair's answer)


async def test_a_reopened_sdk_session_s_limited_read_takes_nothing(store: str) -> None:
    writer = EventLogSession("chat", store, warn_without_hooks=False)
    await writer.add_items(_sdk_turn(0))
    await writer.add_items([{"role": "user", "content": "no answer yet"}])  # (an open turn
    await writer.aclose()  # of user input only: its repair adds no item)
    reader = EventLogSession("chat", store, warn_without_hooks=False)
    other = EventLogSession("chat", store, warn_without_hooks=False)
    try:
        latest = await reader.get_items(limit=2)
        assert [item.get("content") for item in latest] == [
            _sdk_turn(0)[3]["content"],
            "no answer yet",
        ]
        await other.add_items(_sdk_turn(1))  # (a whole read would hold the session)
        assert len(await reader.get_items(limit=9)) == 9
    finally:
        await other.aclose()
        await reader.aclose()
