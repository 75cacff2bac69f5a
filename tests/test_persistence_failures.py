"""Failure and cancellation behaviour of the persistence seam, with an in-memory backend whose
storage hooks fail or block on command."""

from __future__ import annotations

import asyncio
import gc
import logging
from collections.abc import Sequence

import pytest

from agent_session.recovery import closers
from agent_session.session import Runtime, Session, SessionError, SessionEvent, SessionHeader
from agent_session.session.persistence.api import StoredLog
from agent_session.session.persistence.memory import MemoryPersistence, MemoryStorage, MemoryStore
from agent_session.session.persistence.service import SessionPersistence
from agent_session.testing.logs import closed_turn, header


class FlakyStorage(MemoryStorage):
    """Fails chosen appends (1-based), counts appends and loads, and can hold a load open on
    a gate."""

    def __init__(
        self, store: MemoryStore | None, fail: Sequence[int], fail_from: int | None
    ) -> None:
        super().__init__(store)
        self.fail = set(fail)
        self.fail_from = fail_from
        self.appends = 0
        self.loads = 0
        self.gate: asyncio.Event | None = None

    async def append(
        self, header: SessionHeader, events: Sequence[SessionEvent], *, materialized: bool
    ) -> None:
        self.appends += 1
        if self.appends in self.fail or (
            self.fail_from is not None and self.appends >= self.fail_from
        ):
            raise OSError(f"injected failure of append #{self.appends}")
        await super().append(header, events, materialized=materialized)

    async def load(self, id: str) -> StoredLog | None:
        self.loads += 1
        if self.gate is not None:
            await self.gate.wait()
        return await super().load(id)


class Flaky(SessionPersistence):
    """A memory backend over a :class:`FlakyStorage`; its counters and gate read through."""

    def __init__(
        self,
        store: MemoryStore | None = None,
        *,
        fail: Sequence[int] = (),
        fail_from: int | None = None,
        cache_size: int = 5,
    ) -> None:
        self.flaky = FlakyStorage(store, fail, fail_from)
        super().__init__(
            self.flaky,
            repair=closers,
            write_batch_max_delay_ms=60_000,
            prepared_session_cache_size=cache_size,
        )

    @property
    def appends(self) -> int:
        return self.flaky.appends

    @property
    def loads(self) -> int:
        return self.flaky.loads

    @property
    def gate(self) -> asyncio.Event | None:
        return self.flaky.gate

    @gate.setter
    def gate(self, gate: asyncio.Event | None) -> None:
        self.flaky.gate = gate

    @property
    def fail_from(self) -> int | None:
        return self.flaky.fail_from

    @fail_from.setter
    def fail_from(self, value: int | None) -> None:
        self.flaky.fail_from = value


@pytest.mark.parametrize("k", [1, 2, 3])
async def test_failed_flush_keeps_the_batch_for_the_next_flush(k: int) -> None:
    backend = Flaky(fail=[k])
    runtime = Runtime()
    runtime.install(backend)
    session = runtime.sessions.create("s")
    written: list[int] = []
    for turn in (1, 2, 3):
        closed_turn(session, turn)
        try:
            await runtime.sessions.flush(session)
            written.append(turn)
        except OSError as e:
            assert f"append #{k}" in str(e)  # noqa: PT017
    # The k-th write failed once. A flush that returned made everything before it durable; a
    # flush that raised kept its batch. (k=1 fails inside background initialization, which
    # the first flush retries, so no flush raises then.)
    assert set(written) >= {t for t in (1, 2, 3) if t != k}
    assert backend.appends > len(written)
    await runtime.sessions.flush(session)
    events = await backend.read_from("s", 0)
    assert [e.seq for e in events] == list(range(18))
    assert [e.encode() for e in events] == [e.encode() for e in session.events]
    await backend.aclose()


async def test_persistent_failure_surfaces_every_flush_and_loses_nothing() -> None:
    store = MemoryStore()
    backend = Flaky(store, fail_from=2)
    runtime = Runtime()
    runtime.install(backend)
    session = runtime.sessions.create("s")
    closed_turn(session, 1)
    await runtime.sessions.flush(session)
    closed_turn(session, 2)
    for _ in range(3):
        with pytest.raises(OSError, match="injected failure"):
            await runtime.sessions.flush(session)
    backend.fail_from = None
    await runtime.sessions.flush(session)
    assert [e.seq for e in await backend.read_from("s", 0)] == list(range(12))
    await backend.aclose()


async def test_teardown_reports_flush_failures_and_still_closes(
    caplog: pytest.LogCaptureFixture,
) -> None:
    backend = Flaky(fail_from=1)
    runtime = Runtime()
    runtime.install(backend)
    session = runtime.sessions.create("s")
    closed_turn(session)
    with pytest.raises(OSError, match="injected failure") as failed:  # one error, not a group
        await backend.aclose()
    with pytest.raises(SessionError, match="is closed") as closed:
        await backend.load("s")
    with caplog.at_level(logging.WARNING, logger="session.persistence"):
        del runtime, backend, session, failed, closed
        gc.collect()  # what could not be written is named as lost
    (warning,) = [r.getMessage() for r in caplog.records if "were not durable" in r.getMessage()]
    assert 'session(s) "s" (6 event(s)) were not durable' in warning


async def test_teardown_groups_the_failures_of_several_sessions(
    caplog: pytest.LogCaptureFixture,
) -> None:
    backend = Flaky(fail_from=1)
    runtime = Runtime()
    runtime.install(backend)
    for id in ("a", "b"):
        closed_turn(runtime.sessions.create(id))
    with pytest.raises(ExceptionGroup, match="dispose failed") as info:
        await backend.aclose()
    assert [type(e) for e in info.value.exceptions] == [OSError, OSError]
    with caplog.at_level(logging.WARNING, logger="session.persistence"):
        del runtime, backend, info
        gc.collect()  # the events that could not be written are named as lost
    (warning,) = [r.getMessage() for r in caplog.records if "were not durable" in r.getMessage()]
    assert 'session(s) "a" (6 event(s)), "b" (6 event(s)) were not durable' in warning


async def test_empty_flush_does_no_io_and_starts_no_task() -> None:
    backend = Flaky()
    runtime = Runtime()
    runtime.install(backend)
    session = runtime.sessions.create("s")
    closed_turn(session)
    await runtime.sessions.flush(session)
    appends, loads = backend.appends, backend.loads
    before = len(asyncio.all_tasks())
    for _ in range(100):
        assert backend.writer.on_flush(session) is None
        assert await runtime.sessions.flush(session) is True
    assert len(asyncio.all_tasks()) == before
    assert (backend.appends, backend.loads) == (appends, loads)
    await backend.aclose()


async def test_cancelled_inspect_leaves_no_state_behind() -> None:
    store = MemoryStore()
    writer = Flaky(store)
    await writer.create(header())
    runtime_session = Runtime().sessions.create("tmp")
    closed_turn(runtime_session)
    await writer.append("s", runtime_session.events)
    reader = Flaky(store)
    reader.gate = asyncio.Event()
    pending = asyncio.ensure_future(reader.inspect("s"))
    await asyncio.sleep(0)
    assert reader.loads == 1
    pending.cancel()
    with pytest.raises(asyncio.CancelledError):
        await pending
    assert not reader.ledger.locks.busy
    assert not reader.ledger.cached("s")
    reader.gate = None
    assert len((await reader.inspect("s")).events) == 6
    await reader.aclose()
    await writer.aclose()


async def test_option_validation() -> None:
    for bad in (0, 1.5):
        with pytest.raises(TypeError, match="prepared_session_cache_size must be a positive"):
            MemoryPersistence(repair=closers, prepared_session_cache_size=bad)  # type: ignore[arg-type]
    for bad in (0, 1.5, 2**31):
        with pytest.raises(TypeError, match="write_batch_max_delay_ms must be an integer between"):
            MemoryPersistence(repair=closers, write_batch_max_delay_ms=bad)  # type: ignore[arg-type]


async def test_inspect_cache_is_bounded_and_reused_while_fresh() -> None:
    store = MemoryStore()
    writer = MemoryPersistence(store, repair=closers)
    for id in ("a", "b"):
        source = Runtime().sessions.create(id)
        closed_turn(source)
        await writer.create(header(id))
        await writer.append(id, source.events)
    reader = Flaky(store, cache_size=1)
    await reader.inspect("a")
    await reader.inspect("a")
    assert reader.loads == 1  # reused while the revision is unchanged
    await reader.inspect("b")
    await reader.inspect("a")
    assert reader.loads == 3  # capacity 1: "a" was evicted by "b"
    await reader.aclose()
    await writer.aclose()


class GatedRevisions(MemoryStorage):
    """Memory storage whose revision reads of one id wait on a gate (another id's inspection
    runs meanwhile)."""

    def __init__(self, store: MemoryStore, gated: str) -> None:
        super().__init__(store)
        self.gated, self.gate = gated, asyncio.Event()
        self.waiting = asyncio.Event()

    async def revision(self, id: str) -> str | None:
        if id == self.gated and not self.gate.is_set():
            self.waiting.set()
            await self.gate.wait()
        return await super().revision(id)


async def test_an_inspection_evicted_while_its_revision_is_read_is_not_a_key_error() -> None:
    """More sessions bind at once than the inspection cache holds: ``a``'s cached inspection
    is evicted by ``b``'s while ``a``'s revision is read; ``a``'s inspection still answers
    (it raised ``KeyError``, and so did the flush that bound it)."""
    store = MemoryStore()
    for id in ("a", "b"):
        backend = SessionPersistence(MemoryStorage(store), repair=closers)
        await backend.create(header(id))
        session = Session.create(id)
        closed_turn(session)
        await backend.append(id, session.events)
        await backend.aclose()
    storage = GatedRevisions(store, "a")
    backend = SessionPersistence(storage, repair=closers, prepared_session_cache_size=1)
    storage.gate.set()
    await backend.inspect("a")  # cached
    storage.gate.clear()
    first = asyncio.ensure_future(backend.inspect("a"))
    await storage.waiting.wait()
    await backend.inspect("b")  # evicts a's entry
    storage.gate.set()
    inspected = await first
    assert [e.type for e in inspected.events][-1] == "turn/end"
    await backend.aclose()
