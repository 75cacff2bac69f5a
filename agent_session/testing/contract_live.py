"""The contract of a backend under a runtime: live sessions persisted through flush, forks,
resumes, collisions, disposal and teardown (the reference's acceptance cases 84-98 that
apply)."""

from __future__ import annotations

import asyncio

import pytest

from agent_session.session import (
    Runtime,
    SessionCollisionError,
    SessionError,
    SessionNotFoundError,
)
from agent_session.session.persistence.kit import SessionPersistence
from agent_session.testing.kits import Kit
from agent_session.testing.logs import (
    ContractBase,
    closed_turn,
    detached,
    header,
    open_turn,
    wire,
    with_calls,
)

__all__ = ["LiveContract"]


class LiveContract(ContractBase):
    """The cases of live sessions; subclass it (or :class:`PersistenceContract`) with a
    ``kit`` fixture."""

    @pytest.fixture
    def runtime(self, backend: SessionPersistence) -> Runtime:
        runtime = Runtime(clock=lambda: 7)
        runtime.install(backend)
        return runtime

    async def test_case_86_live_session_persists_through_flush(
        self, runtime: Runtime, backend: SessionPersistence
    ) -> None:
        session = runtime.sessions.create("live", cwd="/w")
        closed_turn(session)
        assert await runtime.sessions.flush(session) is True
        loaded = await backend.load("live")
        assert loaded.header.cwd == "/w"
        assert wire(loaded.events) == wire(session.events)

    async def test_a_checkpoint_of_tens_of_thousands_of_lines_is_stored_whole(
        self, runtime: Runtime, backend: SessionPersistence
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
        self, runtime: Runtime, kit: Kit, backend: SessionPersistence
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
        self, runtime: Runtime, backend: SessionPersistence
    ) -> None:
        session = runtime.sessions.create("empty")
        with pytest.raises(SessionNotFoundError):
            await backend.load("empty")
        await runtime.sessions.flush(session)
        assert await backend.list_headers() == []

    async def test_case_87_fork_persists_seed_once(
        self, runtime: Runtime, kit: Kit, backend: SessionPersistence
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

    async def test_case_88_resume_round_trip_across_runtimes(self, kit: Kit) -> None:
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

    async def test_resume_repairs_an_interrupted_session_and_refuses_live_ids(
        self, kit: Kit
    ) -> None:
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
        self, kit: Kit, runtime: Runtime, backend: SessionPersistence
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
        session = runtime.sessions.create(
            "taken", seed=detached("taken", build=lambda s: None).events
        )
        session.append("turn/start", {"turn": 1})
        with pytest.raises(SessionCollisionError, match="id collision"):
            await runtime.sessions.flush(session)
        await runtime.sessions.dispose(session)

    async def test_case_90_cwd_scope(self, runtime: Runtime, backend: SessionPersistence) -> None:
        await backend.create(header("scoped", cwd="/a"))
        session = runtime.sessions.create("scoped", cwd="/b")
        with pytest.raises(
            SessionCollisionError, match=r"different cwd \(persisted: /a, live: /b\)"
        ):
            await runtime.sessions.flush(session)
        await runtime.sessions.dispose(session)

    async def test_case_93_abandoned_lazy_session_releases_its_id(
        self, runtime: Runtime, backend: SessionPersistence
    ) -> None:
        session = runtime.sessions.create("lazy")
        await runtime.sessions.dispose(session)
        again = runtime.sessions.create("lazy")
        again.append("turn/start", {"turn": 1})
        await runtime.sessions.flush(again)
        assert [e.type for e in (await backend.inspect("lazy")).events] == ["turn/start"]

    async def test_case_94_disposal_drains_buffered_events(
        self, runtime: Runtime, backend: SessionPersistence
    ) -> None:
        session = runtime.sessions.create("d")
        session.append("plugin/test", {"i": 0})
        session.append("plugin/test", {"i": 1})
        await runtime.sessions.dispose(session)
        assert [e.seq for e in await backend.read_from("d", 0)] == [0, 1]
        with pytest.raises(SessionCollisionError, match="already has a stored log"):
            runtime.sessions.create("d")

    async def test_case_95_teardown_drains_unflushed_events(self, kit: Kit) -> None:
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
        self, runtime: Runtime, backend: SessionPersistence
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
        self,
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
        self,
        backend: SessionPersistence,
    ) -> None:
        await backend.create(
            header(
                "h",
                cwd="/w",
                parentSession="p",
                seedLength=0,
                delegationDepth=2,
                agentPreset="minimal",
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
        self, runtime: Runtime, backend: SessionPersistence
    ) -> None:
        await backend.create(header("claimed"))
        session = runtime.sessions.create("claimed", seed=[])
        await runtime.sessions.flush(session)
        assert [e.type for e in await backend.read_from("claimed", 0)] == ["session/end-seed"]

    async def test_fresh_live_session_cannot_reuse_a_loaded_id(
        self, runtime: Runtime, backend: SessionPersistence
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
        self, runtime: Runtime, backend: SessionPersistence
    ) -> None:
        session = runtime.sessions.create("once")
        closed_turn(session)
        await runtime.sessions.flush(session)
        runtime.hooks.emit("session/created", session)
        await runtime.sessions.flush(session)
        assert [e.seq for e in await backend.read_from("once", 0)] == list(range(6))

    async def test_read_raw_returns_the_stored_bytes(self, backend: SessionPersistence) -> None:
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

    async def test_examine_reports_what_is_stored_now(self, backend: SessionPersistence) -> None:
        await backend.create(header("ex"))
        await backend.append("ex", detached("ex", open_turn).events)
        before = await backend.diagnose("ex")
        raw = await backend.read_raw("ex")
        assert raw is not None
        assert before.torn_tail is False
        assert before.size in (None, len(raw.content))  # where the storage can say
        assert before.closers > 0
        assert before.stored_events == len(detached("ex", open_turn).events)
        await backend.load("ex")  # repairs durably: the closers are stored now
        after = await backend.diagnose("ex")
        raw = await backend.read_raw("ex")
        assert raw is not None
        assert after.size in (None, len(raw.content))
        assert (after.closers, after.stored_events) == (0, before.stored_events + before.closers)

    async def test_delete_removes_a_stored_session_for_every_later_reader(self, kit: Kit) -> None:
        backend = kit.make()
        for id in ("gone", "kept"):
            await backend.create(header(id))
            await backend.append(id, detached(id).events)
        if not kit.deletes:  # a medium without delete says so and removes nothing
            with pytest.raises(NotImplementedError, match="cannot delete"):
                await backend.delete("gone")
            assert [h.id for h in await backend.list_headers()] == ["gone", "kept"]
            await backend.aclose()
            return
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
        self, kit: Kit, runtime: Runtime, backend: SessionPersistence
    ) -> None:
        session = runtime.sessions.create("busy")
        closed_turn(session)
        await runtime.sessions.flush(session)
        with pytest.raises(SessionCollisionError, match='cannot delete session "busy" while it is'):
            await backend.delete("busy")
        assert len(await backend.read_from("busy", 0)) == 6
        await runtime.sessions.dispose(session)
        if not kit.deletes:
            with pytest.raises(NotImplementedError):
                await backend.delete("busy")
            return
        await backend.delete("busy")
        assert await backend.list_headers() == []

    async def test_delete_of_an_unknown_id_is_not_found(self, backend: SessionPersistence) -> None:
        with pytest.raises(SessionNotFoundError, match='session "never" not found'):
            await backend.delete("never")
        await backend.create(header("lazy"))  # created, never appended: nothing stored
        with pytest.raises(SessionNotFoundError):
            await backend.delete("lazy")
