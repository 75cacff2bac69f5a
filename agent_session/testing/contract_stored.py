"""The contract of a backend's stored sessions: create, append, load, repair on load, list,
read, revisions, delete (the reference's acceptance cases 1-17, 22, 65-67, 74-77 that apply)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from agent_session.recovery import TOOL_NOT_STARTED, TOOL_OUTCOME_UNKNOWN
from agent_session.session import (
    Session,
    SessionCollisionError,
    SessionError,
    SessionEventError,
    SessionFormatUnsupportedError,
    SessionNotFoundError,
    SessionPersistenceCorruptionError,
)
from agent_session.session.persistence.kit import SessionPersistence
from agent_session.testing.kits import Kit
from agent_session.testing.logs import (
    ContractBase,
    closed_turn,
    detached,
    header,
    open_turn,
    user,
    wire,
    with_calls,
)

__all__ = ["StoredContract"]


class StoredContract(ContractBase):
    """The cases of stored sessions; subclass it (or :class:`PersistenceContract`) with a
    ``kit`` fixture."""

    async def test_case_1_round_trip(self, backend: SessionPersistence) -> None:
        source = detached()
        await backend.create(header(cwd="/work"))
        await backend.append("s", source.events)
        loaded = await backend.load("s")
        assert loaded.header.to_json() == header(cwd="/work")
        assert [e.encode() for e in loaded.events] == [e.encode() for e in source.events]

    async def test_case_2_3_bad_metadata_reserves_nothing(
        self, backend: SessionPersistence
    ) -> None:
        with pytest.raises(TypeError, match="createdAt must be a non-negative safe integer"):
            await backend.create(header(createdAt=1.5))
        with pytest.raises(TypeError, match="losslessly JSON-serializable"):
            await backend.create(header(extra=float("nan")))
        await backend.create(header())

    @pytest.mark.parametrize(
        ("change", "message"),
        [
            ({"version": 3}, "session metadata version must be 0, got 3"),
            (
                {"cwd": "relative/dir"},
                'session metadata cwd must be an absolute path, got "relative',
            ),
            ({"origin": "user"}, 'session metadata origin must be "subagent"'),
            ({"delegationDepth": -1}, "session metadata delegationDepth must be a non-negative"),
            ({"agentPreset": 7}, "session metadata agentPreset must be a string"),
        ],
    )
    async def test_metadata_the_load_would_refuse_is_refused_at_create(
        self, backend: SessionPersistence, change: dict[str, Any], message: str
    ) -> None:
        """Create checks the header with the same rules a session's header is held to, so no
        header written through the API can make its log unreadable later."""
        with pytest.raises(TypeError, match=message):
            await backend.create(header(**change))
        assert await backend.list_headers() == []
        await backend.create(header())  # accepted once the header is right

    async def test_case_4_5_lazy_materialization(self, backend: SessionPersistence) -> None:
        await backend.create(header())
        await backend.append("s", [])
        assert await backend.list_headers() == []
        assert await backend.list_snapshots() == []
        await backend.append("s", detached().events[:1])
        assert [h.id for h in await backend.list_headers()] == ["s"]

    async def test_case_6_7_contiguity(self, backend: SessionPersistence) -> None:
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

    async def test_case_8_non_json_data_names_type_and_path(
        self, backend: SessionPersistence
    ) -> None:
        await backend.create(header())
        bad = {"type": "plugin/test", "seq": 0, "time": 1, "data": {"x": [1, float("inf")]}}
        with pytest.raises(
            TypeError, match=r'event "plugin/test" at index 0 .*data\.x\[1\] is inf'
        ):
            await backend.append("s", [bad])
        assert await backend.list_headers() == []

    async def test_case_10_batch_is_snapshotted_at_call_time(
        self, backend: SessionPersistence
    ) -> None:
        await backend.create(header())
        raw: dict[str, Any] = {"type": "plugin/test", "seq": 0, "time": 1, "data": {"n": [1]}}
        pending = asyncio.ensure_future(backend.append("s", [raw]))
        raw["data"]["n"].append(2)
        raw["seq"] = 99
        await pending
        assert wire((await backend.load("s")).events) == [
            {"type": "plugin/test", "seq": 0, "time": 1, "data": {"n": [1]}}
        ]

    async def test_case_12_13_duplicate_create(self, kit: Kit, backend: SessionPersistence) -> None:
        await backend.create(header())
        with pytest.raises(SessionCollisionError, match="already exists in this backend"):
            await backend.create(header())
        await backend.append("s", detached().events)
        fresh = kit.make()
        with pytest.raises(SessionCollisionError, match="already has a persisted log on disk"):
            await fresh.create(header(cwd="/elsewhere"))
        await fresh.aclose()

    async def test_case_22_fresh_instance_appends_to_a_stored_log(self, kit: Kit) -> None:
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

    async def test_case_14_15_inspect_in_memory_then_load_durably(
        self, kit: Kit, backend: SessionPersistence
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

    async def test_case_16_17_unanswered_calls_get_classified_results(
        self,
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

    async def test_case_65_66_format_versions_name_the_direction(self, kit: Kit) -> None:
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

    async def test_case_67_unknown_types_refused_unless_ignorable(self, kit: Kit) -> None:
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

    async def test_invalid_stored_events_are_corruption_naming_the_session(self, kit: Kit) -> None:
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

    async def test_missing_sessions(self, backend: SessionPersistence) -> None:
        for call in (backend.load("nope"), backend.inspect("nope"), backend.read_from("nope", 0)):
            with pytest.raises(SessionNotFoundError, match='session "nope" not found'):
                await call

    async def test_case_74_75_read_from(self, backend: SessionPersistence) -> None:
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

    async def test_case_77_revisions(self, backend: SessionPersistence) -> None:
        await backend.create(header())
        source = detached()
        await backend.append("s", source.events[:3])
        first = await backend.list_snapshots()
        assert first == await backend.list_snapshots()
        await backend.append("s", source.events[3:])
        assert (await backend.list_snapshots())[0].revision != first[0].revision

    async def test_inspect_cache_sees_external_appends(self, kit: Kit) -> None:
        reader, writer = kit.make(), kit.make()
        source = detached()
        await writer.create(header())
        await writer.append("s", source.events[:3])
        assert len((await reader.inspect("s")).events) == 3 + 2  # closers: step/end, turn/end
        await writer.append("s", source.events[3:])
        assert len((await reader.inspect("s")).events) == 6
        await reader.aclose()
        await writer.aclose()
