"""The persistence contract every backend passes (the reference's acceptance
cases 1-17, 22, 65-67, 74-77, 84-98 that apply; legacy-format imports and HMR do not).

Parametrized by backend kit (tests/backends.py): a new backend joins by adding one kit.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from recovery import TOOL_NOT_STARTED, TOOL_OUTCOME_UNKNOWN
from session import (
    Runtime,
    Session,
    SessionCollisionError,
    SessionError,
    SessionEventError,
    SessionFormatUnsupportedError,
    SessionNotFoundError,
    SessionPersistenceCorruptionError,
)
from session.events.event import register_event_type
from session.persistence.service import SessionPersistence
from tests.backends import KITS, Kit
from tests.builders import assistant, user

register_event_type("plugin/test")


@pytest.fixture(params=sorted(KITS))
def kit(request: pytest.FixtureRequest) -> Kit:
    return KITS[request.param]()


@pytest.fixture
async def backend(kit: Kit) -> AsyncIterator[SessionPersistence]:
    instance = kit.make()
    yield instance
    await instance.aclose()


def header(id: str = "s", **extra: Any) -> dict[str, Any]:
    return {"version": 0, "id": id, "createdAt": 1000, "delegationDepth": 0, **extra}


def closed_turn(session: Session, turn: int = 1) -> None:
    session.append("turn/start", {"turn": turn})
    session.append("step/start", {"turn": turn, "step": 1})
    session.append("user/message", user(id=f"u{turn}"), surface_op="append")
    session.append(
        "assistant/message",
        {"turn": turn, "step": 1, "message": assistant(id=f"a{turn}")},
        surface_op="append",
        source_event_seqs=[],
    )
    session.append("step/end", {"turn": turn, "step": 1})
    session.append("turn/end", {"turn": turn, "reason": {"kind": "completed"}})


def detached(id: str = "s", build: Callable[[Session], None] = closed_turn) -> Session:
    session = Session.create(id, clock=lambda: 5)
    build(session)
    return session


def wire(events: Any) -> list[dict[str, Any]]:
    return [e.to_json() for e in events]


# --- create / append / list --------------------------------------------------------------------


async def test_case_1_round_trip(backend: SessionPersistence) -> None:
    source = detached()
    await backend.create(header(cwd="/work"))
    await backend.append("s", source.events)
    loaded = await backend.load("s")
    assert loaded.header.to_json() == header(cwd="/work")
    assert [e.encode() for e in loaded.events] == [e.encode() for e in source.events]


async def test_case_2_3_bad_metadata_reserves_nothing(backend: SessionPersistence) -> None:
    with pytest.raises(TypeError, match="createdAt must be a non-negative safe integer"):
        await backend.create(header(createdAt=1.5))
    with pytest.raises(TypeError, match="losslessly JSON-serializable"):
        await backend.create(header(extra=float("nan")))
    await backend.create(header())


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"version": 3}, "session metadata version must be 0, got 3"),
        ({"cwd": "relative/dir"}, 'session metadata cwd must be an absolute path, got "relative'),
        ({"origin": "user"}, 'session metadata origin must be "subagent"'),
        ({"delegationDepth": -1}, "session metadata delegationDepth must be a non-negative"),
        ({"agentPreset": 7}, "session metadata agentPreset must be a string"),
    ],
)
async def test_metadata_the_load_would_refuse_is_refused_at_create(
    backend: SessionPersistence, change: dict[str, Any], message: str
) -> None:
    """Create checks the header with the same rules a session's header is held to, so no
    header written through the API can make its log unreadable later."""
    with pytest.raises(TypeError, match=message):
        await backend.create(header(**change))
    assert await backend.list_headers() == []
    assert await backend.create(header()) is None


async def test_case_4_5_lazy_materialization(backend: SessionPersistence) -> None:
    await backend.create(header())
    await backend.append("s", [])
    assert await backend.list_headers() == []
    assert await backend.list_snapshots() == []
    await backend.append("s", detached().events[:1])
    assert [h.id for h in await backend.list_headers()] == ["s"]


async def test_case_6_7_contiguity(backend: SessionPersistence) -> None:
    events = detached().events
    await backend.create(header())
    with pytest.raises(
        SessionError,
        match=r'append seq mismatch for "s": expected 1 at index 1, '
        r"got 2",
    ):
        await backend.append("s", [events[0], events[2]])
    assert await backend.list_headers() == []
    await backend.append("s", events)
    with pytest.raises(SessionError, match="expected 6 at index 0, got 0"):
        await backend.append("s", events[:1])


async def test_case_8_non_json_data_names_type_and_path(backend: SessionPersistence) -> None:
    await backend.create(header())
    bad = {"type": "plugin/test", "seq": 0, "time": 1, "data": {"x": [1, float("inf")]}}
    with pytest.raises(TypeError, match=r'event "plugin/test" at index 0 .*data\.x\[1\] is inf'):
        await backend.append("s", [bad])
    assert await backend.list_headers() == []


async def test_case_10_batch_is_snapshotted_at_call_time(backend: SessionPersistence) -> None:
    await backend.create(header())
    raw: dict[str, Any] = {"type": "plugin/test", "seq": 0, "time": 1, "data": {"n": [1]}}
    pending = asyncio.ensure_future(backend.append("s", [raw]))
    raw["data"]["n"].append(2)
    raw["seq"] = 99
    await pending
    assert wire((await backend.load("s")).events) == [
        {"type": "plugin/test", "seq": 0, "time": 1, "data": {"n": [1]}}
    ]


async def test_case_12_13_duplicate_create(kit: Kit, backend: SessionPersistence) -> None:
    await backend.create(header())
    with pytest.raises(SessionCollisionError, match="already exists in this backend"):
        await backend.create(header())
    await backend.append("s", detached().events)
    fresh = kit.make()
    with pytest.raises(SessionCollisionError, match="already has a persisted log on disk"):
        await fresh.create(header(cwd="/elsewhere"))
    await fresh.aclose()


async def test_case_22_fresh_instance_appends_to_a_stored_log(kit: Kit) -> None:
    first = kit.make()
    source = detached()
    await first.create(header())
    await first.append("s", source.events)
    await first.aclose()
    second = kit.make()
    closed_turn(source, 2)
    await second.append("s", source.events[6:])
    assert [e.seq for e in (await second.load("s")).events] == list(range(12))
    await second.aclose()


# --- crash repair ------------------------------------------------------------------------------


def open_turn(session: Session) -> None:
    closed_turn(session)
    session.append("turn/start", {"turn": 2})
    session.append("step/start", {"turn": 2, "step": 1})


async def test_case_14_15_inspect_in_memory_then_load_durably(
    kit: Kit, backend: SessionPersistence
) -> None:
    await backend.create(header())
    await backend.append("s", detached(build=open_turn).events)
    before = await backend.list_snapshots()
    inspected = await backend.inspect("s")
    assert [e.type for e in inspected.events[-2:]] == ["step/end", "turn/end"]
    assert inspected.events[-1].data["reason"] == {"kind": "interrupted"}
    assert len(inspected.events) == 10
    assert await backend.list_snapshots() == before
    assert [e.seq for e in await backend.read_from("s", 0)] == list(range(8))
    loaded = await backend.load("s")
    assert wire(loaded.events) == wire(inspected.events)
    assert (await backend.list_snapshots())[0].revision != before[0].revision
    assert [e.seq for e in await backend.read_from("s", 0)] == list(range(10))
    await backend.append(
        "s", [{"type": "plugin/test", "seq": seq, "time": 1, "data": {}} for seq in (10, 11)]
    )
    fresh = kit.make()
    assert [e.seq for e in (await fresh.load("s")).events] == list(range(12))
    await fresh.aclose()


def with_calls(recorded: tuple[str, ...]) -> Callable[[Session], None]:
    def build(session: Session) -> None:
        session.append("turn/start", {"turn": 1})
        session.append("step/start", {"turn": 1, "step": 1})
        session.append("user/message", user(), surface_op="append")
        session.append(
            "assistant/message",
            {"turn": 1, "step": 1, "message": assistant(calls=("c1", "c2"))},
            surface_op="append",
            source_event_seqs=[],
        )
        for call in recorded:
            session.append(
                "tool/call",
                {"turn": 1, "step": 1, "callId": call, "name": "read_file", "arguments": "{}"},
            )

    return build


async def test_case_16_17_unanswered_calls_get_classified_results(
    backend: SessionPersistence,
) -> None:
    await backend.create(header())
    await backend.append("s", detached(build=with_calls(("c1",))).events)
    loaded = await backend.load("s")
    tail = loaded.events[5:]
    assert [e.type for e in tail] == ["tool/result", "tool/result", "step/end", "turn/end"]
    unknown, not_started = tail[0], tail[1]
    assert unknown.data["error"] == {
        "name": "ToolOutcomeUnknownError",
        "code": TOOL_OUTCOME_UNKNOWN,
    }
    assert unknown.source_event_seqs == (4,)
    assert (
        "retry only if the operation is read-only or idempotent"
        in unknown.data["message"]["content"][0]["content"][0]["text"]
    )
    assert not_started.data["error"]["code"] == TOOL_NOT_STARTED
    assert not_started.source_event_seqs is None
    assert not_started.data["message"]["content"][0]["isError"] is True
    seeded = Session.create("s", seed=loaded.events)
    roles = [m["role"] for m in seeded.derive_messages()]
    assert roles == ["user", "assistant", "user", "user"]


# --- read-side refusals ------------------------------------------------------------------------


async def test_case_65_66_format_versions_name_the_direction(kit: Kit) -> None:
    backend = kit.make()
    kit.plant(header("new", version=7), [])
    kit.plant(header("old", version=-1), [])
    with pytest.raises(
        SessionFormatUnsupportedError,
        match=r'session "new" uses log format v7.*newer harness.*upgrade',
    ):
        await backend.load("new")
    with pytest.raises(
        SessionFormatUnsupportedError, match="older than the supported v0.*no upgrade path"
    ):
        await backend.inspect("old")
    await backend.aclose()


async def test_case_67_unknown_types_refused_unless_ignorable(kit: Kit) -> None:
    backend = kit.make()
    future = {"type": "future/event", "seq": 0, "time": 1, "data": {}}
    kit.plant(header("a"), [future])
    with pytest.raises(
        SessionFormatUnsupportedError,
        match=r'event type "future/event" \(seq 0\) unknown to this harness and not '
        "marked ignorable",
    ):
        await backend.load("a")
    ignorable = {**future, "ignorable": True}
    if kit.keeps_ignorable:
        kit.plant(header("b"), [ignorable])
        assert (await backend.load("b")).events[0].ignorable is True
    else:  # the reference's SQLite rows have no place for the flag: refused, nothing stored
        await backend.create(header("b"))
        with pytest.raises(SessionEventError, match="marked ignorable, which the SQLite"):
            await backend.append("b", [ignorable])
        assert [h.id for h in await backend.list_headers()] == ["a"]
    await backend.aclose()


async def test_invalid_stored_events_are_corruption_naming_the_session(kit: Kit) -> None:
    backend = kit.make()
    bad = {
        "type": "user/message",
        "seq": 0,
        "time": 1,
        "data": {**user(), "role": "assistant"},
        "surfaceOp": "append",
    }
    kit.plant(header("bad"), [bad])
    with pytest.raises(
        SessionPersistenceCorruptionError,
        match='stored session "bad" failed validation: .*must have role "user"',
    ):
        await backend.inspect("bad")
    if kit.header_names_id:  # (a SQLite row's id is its key: it cannot disagree)
        kit.plant(header("x"), [], under="y")
        with pytest.raises(
            SessionPersistenceCorruptionError,
            match=r'requested (id )?"y".*header (contains|id) "x"',
        ):
            await backend.load("y")
    await backend.aclose()


async def test_missing_sessions(backend: SessionPersistence) -> None:
    for call in (backend.load("nope"), backend.inspect("nope"), backend.read_from("nope", 0)):
        with pytest.raises(SessionNotFoundError, match='session "nope" not found'):
            await call


async def test_case_74_75_read_from(backend: SessionPersistence) -> None:
    await backend.create(header())
    source = detached()
    await backend.append("s", source.events)
    assert wire(await backend.read_from("s", 0)) == wire(source.events)
    assert wire(await backend.read_from("s", 3)) == wire(source.events[3:])
    assert await backend.read_from("s", 6) == ()
    assert await backend.read_from("s", 106) == ()
    source.append("turn/start", {"turn": 2})
    await backend.append("s", source.events[6:])
    assert [e.type for e in await backend.read_from("s", 6)] == ["turn/start"]
    for bad in (-1, 1.5):
        with pytest.raises(TypeError, match="non-negative safe integer"):
            await backend.read_from("s", bad)  # type: ignore[arg-type]


async def test_case_77_revisions(backend: SessionPersistence) -> None:
    await backend.create(header())
    source = detached()
    await backend.append("s", source.events[:3])
    first = await backend.list_snapshots()
    assert first == await backend.list_snapshots()
    await backend.append("s", source.events[3:])
    assert (await backend.list_snapshots())[0].revision != first[0].revision


async def test_inspect_cache_sees_external_appends(kit: Kit) -> None:
    reader, writer = kit.make(), kit.make()
    source = detached()
    await writer.create(header())
    await writer.append("s", source.events[:3])
    assert len((await reader.inspect("s")).events) == 3 + 2  # closers: step/end, turn/end
    await writer.append("s", source.events[3:])
    assert len((await reader.inspect("s")).events) == 6
    await reader.aclose()
    await writer.aclose()


# --- the live path -----------------------------------------------------------------------------


@pytest.fixture
def runtime(backend: SessionPersistence) -> Runtime:
    runtime = Runtime(clock=lambda: 7)
    runtime.install(backend)
    return runtime


async def test_case_86_live_session_persists_through_flush(
    runtime: Runtime, backend: SessionPersistence
) -> None:
    session = runtime.sessions.create("live", cwd="/w")
    closed_turn(session)
    assert await runtime.sessions.flush(session) is True
    loaded = await backend.load("live")
    assert loaded.header.cwd == "/w"
    assert wire(loaded.events) == wire(session.events)


async def test_a_checkpoint_of_tens_of_thousands_of_lines_is_stored_whole(
    runtime: Runtime, backend: SessionPersistence
) -> None:
    """More rows than one database statement may carry (PostgreSQL: 65,535 parameters), in
    a new session's first batch and in a later one."""
    session = runtime.sessions.create("huge")
    for turn in range(1, 3_501):
        closed_turn(session, turn)  # 21,000 events, none packable
    await runtime.sessions.flush(session)
    for turn in range(3_501, 7_001):
        closed_turn(session, turn)
    await runtime.sessions.flush(session)
    loaded = await backend.load("huge")
    assert len(loaded.events) == 42_000
    assert [e.encode() for e in loaded.events] == [e.encode() for e in session.events]


async def test_case_84_live_open_turn_cannot_be_loaded(
    runtime: Runtime, kit: Kit, backend: SessionPersistence
) -> None:
    session = runtime.sessions.create("live")
    session.append("turn/start", {"turn": 1})
    await runtime.sessions.flush(session)
    with pytest.raises(SessionError, match="while its live turn is open"):
        await backend.load("live")
    assert [e.type for e in (await backend.inspect("live")).events] == ["turn/start"]
    session.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    await runtime.sessions.flush(session)
    await runtime.sessions.dispose(session)
    loaded = await backend.load("live")
    assert [e.type for e in loaded.events] == ["turn/start", "turn/end"]


async def test_case_85_empty_live_session_is_not_found(
    runtime: Runtime, backend: SessionPersistence
) -> None:
    session = runtime.sessions.create("empty")
    with pytest.raises(SessionNotFoundError):
        await backend.load("empty")
    await runtime.sessions.flush(session)
    assert await backend.list_headers() == []


async def test_case_87_fork_persists_seed_once(
    runtime: Runtime, kit: Kit, backend: SessionPersistence
) -> None:
    source = runtime.sessions.create("src")
    closed_turn(source)
    await runtime.sessions.flush(source)  # so its background window cannot fire mid-count
    child = runtime.sessions.fork(source, child_id="kid")
    await runtime.sessions.flush(child)
    calls = kit.append_calls()
    await runtime.sessions.flush(child)
    assert kit.append_calls() == calls
    loaded = await backend.load("kid")
    assert [e.type for e in loaded.events][-1] == "session/end-seed"
    assert loaded.events[-1].seq == 6
    assert loaded.header.parent_session == "src"
    assert loaded.header.seed_length == 6


async def test_case_88_resume_round_trip_across_runtimes(kit: Kit) -> None:
    first = kit.make()
    runtime = Runtime(clock=lambda: 7)
    runtime.install(first)
    session = runtime.sessions.create("r")
    closed_turn(session, 1)
    closed_turn(session, 2)
    await first.aclose()  # quiescent teardown drains the buffered events

    second = kit.make()
    later = Runtime(clock=lambda: 8)
    later.install(second)
    resumed = await later.sessions.resume("r")
    assert resumed.seq == 13
    assert resumed.first_live_seq == 12
    closed_turn(resumed, 3)
    await second.aclose()

    check = kit.make()
    events = (await check.load("r")).events
    assert [e.seq for e in events] == list(range(19))
    assert [e.type for e in events].count("session/end-seed") == 1
    assert events[12].type == "session/end-seed"
    assert [e.data["turn"] for e in events if e.type == "turn/start"] == [1, 2, 3]
    await check.aclose()


async def test_resume_repairs_an_interrupted_session_and_refuses_live_ids(kit: Kit) -> None:
    backend = kit.make()
    await backend.create(header("crashed"))
    await backend.append("crashed", detached("crashed", build=with_calls(("c1",))).events)
    runtime = Runtime()
    runtime.install(backend)
    resumed = await runtime.sessions.resume("crashed")
    assert [e.type for e in resumed.events][-3:] == ["step/end", "turn/end", "session/end-seed"]
    with pytest.raises(SessionCollisionError, match="while it is live"):
        await runtime.sessions.resume("crashed")
    with pytest.raises(SessionNotFoundError):
        await runtime.sessions.resume("never")
    await backend.aclose()


async def test_case_89_new_live_session_colliding_with_stored_id(
    kit: Kit, runtime: Runtime, backend: SessionPersistence
) -> None:
    kit.plant(header("taken"), wire(detached("taken").events))
    if kit.answers_at_once:
        # Earlier than the reference, which accepts the create and fails at the first flush:
        # a new session without events can only collide, so create refuses it at once.
        with pytest.raises(SessionCollisionError, match="already has a stored log: resume it"):
            runtime.sessions.create("taken")
        assert runtime.sessions.get("taken") is None
    else:  # asking would block the event loop: the first flush refuses, as the reference
        fresh = runtime.sessions.create("taken")
        fresh.append("turn/start", {"turn": 1})
        with pytest.raises(SessionCollisionError, match="id collision"):
            await runtime.sessions.flush(fresh)
        await runtime.sessions.dispose(fresh)
    # A seed that is not the stored log still collides at the first flush, as there.
    session = runtime.sessions.create("taken", seed=detached("taken", build=lambda s: None).events)
    session.append("turn/start", {"turn": 1})
    with pytest.raises(SessionCollisionError, match="id collision"):
        await runtime.sessions.flush(session)
    await runtime.sessions.dispose(session)


async def test_case_90_cwd_scope(runtime: Runtime, backend: SessionPersistence) -> None:
    await backend.create(header("scoped", cwd="/a"))
    session = runtime.sessions.create("scoped", cwd="/b")
    with pytest.raises(SessionCollisionError, match=r"different cwd \(persisted: /a, live: /b\)"):
        await runtime.sessions.flush(session)
    await runtime.sessions.dispose(session)


async def test_case_93_abandoned_lazy_session_releases_its_id(
    runtime: Runtime, backend: SessionPersistence
) -> None:
    session = runtime.sessions.create("lazy")
    await runtime.sessions.dispose(session)
    again = runtime.sessions.create("lazy")
    again.append("turn/start", {"turn": 1})
    await runtime.sessions.flush(again)
    assert [e.type for e in (await backend.inspect("lazy")).events] == ["turn/start"]


async def test_case_94_disposal_drains_buffered_events(
    runtime: Runtime, backend: SessionPersistence
) -> None:
    session = runtime.sessions.create("d")
    session.append("plugin/test", {"i": 0})
    session.append("plugin/test", {"i": 1})
    await runtime.sessions.dispose(session)
    assert [e.seq for e in await backend.read_from("d", 0)] == [0, 1]
    with pytest.raises(SessionCollisionError, match="already has a stored log"):
        runtime.sessions.create("d")


async def test_case_95_teardown_drains_unflushed_events(kit: Kit) -> None:
    backend = kit.make(write_batch_max_delay_ms=60_000)
    runtime = Runtime()
    runtime.install(backend)
    session = runtime.sessions.create("t")
    closed_turn(session)
    await backend.aclose()
    with pytest.raises(SessionError, match="is closed"):
        await backend.load("t")
    fresh = kit.make()
    assert len((await fresh.load("t")).events) == 6
    await fresh.aclose()


async def test_events_admitted_during_a_flush_are_included(
    runtime: Runtime, backend: SessionPersistence
) -> None:
    session = runtime.sessions.create("f")
    session.append("plugin/test", {"i": 0})
    flushing = asyncio.ensure_future(runtime.sessions.flush(session))
    await asyncio.sleep(0)
    session.append("plugin/test", {"i": 1})
    await flushing
    await runtime.sessions.flush(session)
    assert [e.seq for e in await backend.read_from("f", 0)] == [0, 1]


async def test_plugin_disposal_stops_persisting(
    backend: SessionPersistence,
) -> None:
    runtime = Runtime()
    dispose = runtime.install(backend)
    assert runtime.persistence is backend
    dispose()
    assert runtime.persistence is None
    session = runtime.sessions.create("gone")
    session.append("plugin/test", {})
    assert await runtime.sessions.flush(session) is False
    assert await backend.list_headers() == []


async def test_loaded_events_are_immutable_and_headers_round_trip(
    backend: SessionPersistence,
) -> None:
    await backend.create(
        header(
            "h", cwd="/w", parentSession="p", seedLength=0, delegationDepth=2, agentPreset="minimal"
        )
    )
    await backend.append("h", detached("h").events)
    loaded = await backend.load("h")
    assert loaded.header.to_json() == header(
        "h", cwd="/w", parentSession="p", seedLength=0, delegationDepth=2, agentPreset="minimal"
    )
    with pytest.raises(TypeError):
        loaded.events[2].data["content"].append("x")
    with pytest.raises(AttributeError):
        loaded.events.append(loaded.events[0])  # type: ignore[attr-defined]


async def test_public_create_then_live_session_claims_the_lazy_state(
    runtime: Runtime, backend: SessionPersistence
) -> None:
    await backend.create(header("claimed"))
    session = runtime.sessions.create("claimed", seed=[])
    await runtime.sessions.flush(session)
    assert [e.type for e in await backend.read_from("claimed", 0)] == ["session/end-seed"]


async def test_fresh_live_session_cannot_reuse_a_loaded_id(
    runtime: Runtime, backend: SessionPersistence
) -> None:
    await backend.create(header("used"))
    await backend.append("used", detached("used").events)
    await backend.load("used")
    session = runtime.sessions.create("used", seed=[])
    with pytest.raises(
        SessionCollisionError, match=r"already persisted with 6 event\(s\) that do not match"
    ):
        await runtime.sessions.flush(session)
    await runtime.sessions.dispose(session)


async def test_reannouncing_a_live_session_does_not_reinitialize(
    runtime: Runtime, backend: SessionPersistence
) -> None:
    session = runtime.sessions.create("once")
    closed_turn(session)
    await runtime.sessions.flush(session)
    runtime.hooks.emit("session/created", session)
    await runtime.sessions.flush(session)
    assert [e.seq for e in await backend.read_from("once", 0)] == list(range(6))


async def test_read_raw_returns_the_stored_bytes(backend: SessionPersistence) -> None:
    assert await backend.read_raw("absent") is None
    await backend.create(header("raw"))
    source = detached("raw")
    await backend.append("raw", source.events)
    raw = await backend.read_raw("raw")
    assert raw is not None
    assert raw.filename == "session.jsonl"
    lines = raw.content.split(b"\n")
    assert lines[0].startswith(b'{"type":"session","version":0,"id":"raw"')
    assert lines[1:-1] == [e.encode() for e in source.events]
    assert lines[-1] == b""


async def test_examine_reports_what_is_stored_now(backend: SessionPersistence) -> None:
    await backend.create(header("ex"))
    await backend.append("ex", detached("ex", open_turn).events)
    before = await backend.diagnose("ex")
    raw = await backend.read_raw("ex")
    assert raw is not None
    assert (before.size, before.torn_tail) == (len(raw.content), False)
    assert before.closers > 0
    assert before.stored_events == len(detached("ex", open_turn).events)
    await backend.load("ex")  # repairs durably: the closers are stored now
    after = await backend.diagnose("ex")
    raw = await backend.read_raw("ex")
    assert raw is not None
    assert after.size == len(raw.content)
    assert (after.closers, after.stored_events) == (0, before.stored_events + before.closers)


# --- delete (beyond the reference, which has none) ---------------------------------------------


async def test_delete_removes_a_stored_session_for_every_later_reader(kit: Kit) -> None:
    backend = kit.make()
    for id in ("gone", "kept"):
        await backend.create(header(id))
        await backend.append(id, detached(id).events)
    await backend.delete("gone")
    assert [h.id for h in await backend.list_headers()] == ["kept"]
    with pytest.raises(SessionNotFoundError):
        await backend.load("gone")
    await backend.aclose()
    fresh = kit.make()  # a restart finds no trace of it, and the id is free again
    assert [h.id for h in await fresh.list_headers()] == ["kept"]
    assert await fresh.read_raw("gone") is None
    await fresh.create(header("gone"))
    await fresh.append("gone", detached("gone").events[:1])
    assert len((await fresh.inspect("gone")).events) == 2  # the new log (plus its closer)
    assert len((await fresh.load("kept")).events) == 6
    await fresh.aclose()


async def test_delete_is_refused_while_the_session_is_live(
    runtime: Runtime, backend: SessionPersistence
) -> None:
    session = runtime.sessions.create("busy")
    closed_turn(session)
    await runtime.sessions.flush(session)
    with pytest.raises(SessionCollisionError, match='cannot delete session "busy" while it is'):
        await backend.delete("busy")
    assert len(await backend.read_from("busy", 0)) == 6
    await runtime.sessions.dispose(session)
    await backend.delete("busy")
    assert await backend.list_headers() == []


async def test_delete_of_an_unknown_id_is_not_found(backend: SessionPersistence) -> None:
    with pytest.raises(SessionNotFoundError, match='session "never" not found'):
        await backend.delete("never")
    await backend.create(header("lazy"))  # created, never appended: nothing stored
    with pytest.raises(SessionNotFoundError):
        await backend.delete("lazy")
