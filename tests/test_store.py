"""``SessionStore``, the hook bus and ``Runtime``.

Acceptance cases 14-17 and 24-28 of the reference's core acceptance list, plus the flush barrier.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from typing import Any

import pytest

from agent_session.session import (
    PluginScope,
    Runtime,
    Session,
    SessionCollisionError,
    SessionEvent,
    SessionForkError,
    SessionNotLiveError,
    SessionReentrancyError,
)
from agent_session.session.live.hooks import CallerFuture
from tests.builders import assistant, until, user


@pytest.fixture
def runtime() -> Runtime:
    return Runtime(clock=lambda: 1000)


# --- store basics (case 14) ------------------------------------------------------------------


def test_case_14_create_publishes_and_announces(runtime: Runtime) -> None:
    created: list[Session] = []
    seen: list[tuple[Session, SessionEvent]] = []
    runtime.hooks.observe("session/created", created.append)
    runtime.hooks.observe("session/event", lambda s, e: seen.append((s, e)))
    session = runtime.sessions.create("a")
    assert created == [session]
    first = session.append("turn/start", {"turn": 1})
    second = session.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    assert seen == [(session, first), (session, second)]
    assert runtime.sessions.get("a") is session
    assert runtime.sessions.get("missing") is None
    listed = runtime.sessions.list()
    assert listed == [session]
    listed.clear()
    assert runtime.sessions.list() == [session]
    with pytest.raises(SessionCollisionError, match='session "a" already exists'):
        runtime.sessions.create("a")
    assert created == [session]


def test_create_without_id_mints_a_uuid_and_header(runtime: Runtime) -> None:
    session = runtime.sessions.create(cwd="/work", delegation_depth=2, agent_preset="p")
    assert uuid.UUID(session.id)
    assert session.header.to_json() == {
        "version": 0,
        "id": session.id,
        "createdAt": 1000,
        "cwd": "/work",
        "delegationDepth": 2,
        "agentPreset": "p",
    }
    other = runtime.sessions.create()
    assert other.id != session.id


def test_created_listener_that_raises_vetoes(runtime: Runtime) -> None:
    disposed: list[Session] = []

    def veto(session: Session) -> None:
        raise RuntimeError("no")

    runtime.hooks.observe("session/created", veto)
    runtime.hooks.observe("session/disposed", disposed.append)
    with pytest.raises(RuntimeError, match="no"):
        runtime.sessions.create("a")
    assert runtime.sessions.get("a") is None
    assert len(disposed) == 1
    assert disposed[0].id == "a"


async def test_dispose_removes_and_announces_once(runtime: Runtime) -> None:
    disposed: list[Session] = []
    runtime.hooks.observe("session/disposed", disposed.append)
    session = runtime.sessions.create("a")
    await runtime.sessions.dispose(session)
    await runtime.sessions.dispose(session)
    assert disposed == [session]
    assert runtime.sessions.get("a") is None
    with pytest.raises(SessionNotLiveError, match='session "a" is not live in this store'):
        await runtime.sessions.flush(session)
    again = runtime.sessions.create("a")  # a stale object cannot remove the new one
    await runtime.sessions.dispose(session)
    assert runtime.sessions.get("a") is again


def test_detach_during_append_is_deferred_until_publication_ends(runtime: Runtime) -> None:
    order: list[str] = []
    session = runtime.sessions.create("a")

    def first(s: Session, e: SessionEvent) -> None:
        order.append("first")
        runtime.sessions.detach(s)
        order.append(f"live={runtime.sessions.get('a') is s}")

    runtime.hooks.observe("session/event", first)
    runtime.hooks.observe("session/event", lambda s, e: order.append("second"))
    runtime.hooks.observe("session/disposed", lambda s: order.append("disposed"))
    session.append("turn/start", {"turn": 1})
    assert order == ["first", "live=True", "second", "disposed"]
    assert runtime.sessions.get("a") is None


# --- observers, reentrancy, validators (cases 15-17) ------------------------------------------


async def test_case_15_observer_failures_are_contained(
    runtime: Runtime, caplog: pytest.LogCaptureFixture
) -> None:
    recorded: list[int] = []
    gate = asyncio.Event()

    def throws(s: Session, e: SessionEvent) -> None:
        raise ValueError("boom")

    async def rejects(s: Session, e: SessionEvent) -> None:
        try:
            raise ValueError("later boom")
        finally:
            gate.set()

    runtime.hooks.observe("session/event", throws)
    runtime.hooks.observe("session/event", rejects)
    runtime.hooks.observe("session/event", lambda s, e: recorded.append(e.seq))
    session = runtime.sessions.create("a")
    with caplog.at_level(logging.WARNING, logger="session"):
        event = session.append("turn/start", {"turn": 1})
        await gate.wait()
        await asyncio.sleep(0)  # let the done-callback of the rejected task run
    assert event.seq == 0
    assert recorded == [0]
    messages = [r.getMessage() for r in caplog.records]
    assert 'session "a": session/event listener threw: boom' in messages
    assert 'session "a": session/event listener rejected: later boom' in messages


def test_case_16_reentrant_append_is_refused(runtime: Runtime) -> None:
    errors: list[BaseException] = []
    others: list[int] = []

    def reenter(s: Session, e: SessionEvent) -> None:
        try:
            s.append("plugin/inner", {})
        except SessionReentrancyError as err:
            errors.append(err)

    runtime.hooks.observe("session/event", reenter)
    runtime.hooks.observe("session/event", lambda s, e: others.append(e.seq))
    session = runtime.sessions.create("a")
    session.append("plugin/outer", {})
    assert [e.type for e in session.events] == ["plugin/outer"]
    assert others == [0]
    assert str(errors[0]) == "session append cannot reenter while another append is being published"
    session.append("plugin/next", {})  # the flag is cleared afterwards
    assert session.seq == 2


def test_case_17_validator_veto_commits_and_publishes_nothing(runtime: Runtime) -> None:
    published: list[int] = []
    vetoes = iter([True, False])

    def validator(s: Session, candidate: SessionEvent) -> None:
        if next(vetoes):
            raise ValueError(f"veto seq {candidate.seq}")

    runtime.hooks.observe("session/validate", validator)
    runtime.hooks.observe("session/event", lambda s, e: published.append(e.seq))
    session = runtime.sessions.create("a")
    with pytest.raises(ValueError, match="veto seq 0"):
        session.append("turn/start", {"turn": 1})
    assert session.events == ()
    assert published == []
    assert session.append("turn/start", {"turn": 1}).seq == 0
    assert published == [0]


def test_hooks_registered_or_removed_between_appends_apply_to_the_next_one(
    runtime: Runtime,
) -> None:
    """Appends reuse the hook lists until a registration changes (added or disposed)."""
    session = runtime.sessions.create("a")
    seen: list[tuple[str, int]] = []
    session.append("turn/start", {"turn": 1})
    observer = runtime.hooks.observe("session/event", lambda s, e: seen.append(("obs", e.seq)))
    session.append("step/start", {"turn": 1, "step": 1})

    def refuse(s: Session, candidate: SessionEvent) -> None:
        raise ValueError(f"refused {candidate.seq}")

    validator = runtime.hooks.observe("session/validate", refuse)
    with pytest.raises(ValueError, match="refused 2"):
        session.append("step/end", {"turn": 1, "step": 1})
    validator()
    observer()
    session.append("step/end", {"turn": 1, "step": 1})
    assert seen == [("obs", 1)]
    assert [e.seq for e in session.events] == [0, 1, 2]


# --- flush ------------------------------------------------------------------------------------


async def test_flush_starts_every_listener_before_any_finishes(runtime: Runtime) -> None:
    started: list[str] = []
    release = asyncio.Event()

    def listener(name: str) -> Any:
        async def run(session: Session) -> None:
            started.append(name)
            await release.wait()
            started.append(f"{name}:done")

        return run

    for name in ("a", "b", "c"):
        runtime.hooks.listen("session/flush", listener(name))
    session = runtime.sessions.create("s")
    flushing = asyncio.ensure_future(runtime.sessions.flush(session))
    await until(lambda: len(started) >= 3)
    assert started == ["a", "b", "c"]
    assert not flushing.done()
    release.set()
    assert await flushing is True
    assert started[3:] == ["a:done", "b:done", "c:done"]


async def test_flush_raises_first_failure_in_registration_order_after_all_settle(
    runtime: Runtime,
) -> None:
    settled: list[str] = []
    gate = asyncio.Event()

    async def slow_failure(session: Session) -> None:
        await gate.wait()
        settled.append("slow")
        raise OSError("first registered")

    async def fast_failure(session: Session) -> None:
        settled.append("fast")
        gate.set()
        raise OSError("second registered")

    async def ok(session: Session) -> None:
        await gate.wait()
        await asyncio.sleep(0)
        settled.append("ok")

    def sync_failure(session: Session) -> None:
        raise OSError("sync")

    runtime.hooks.listen("session/flush", slow_failure)
    runtime.hooks.listen("session/flush", fast_failure)
    runtime.hooks.listen("session/flush", ok)
    runtime.hooks.listen("session/flush", sync_failure)
    session = runtime.sessions.create("s")
    with pytest.raises(OSError, match="first registered"):
        await runtime.sessions.flush(session)
    assert sorted(settled) == ["fast", "ok", "slow"]


async def test_flush_without_listeners_returns_false_and_sync_listeners_count(
    runtime: Runtime,
) -> None:
    session = runtime.sessions.create("s")
    assert await runtime.sessions.flush(session) is False
    calls: list[str] = []
    runtime.hooks.listen("session/flush", lambda s: calls.append(s.id))
    assert await runtime.sessions.flush(session) is True
    assert calls == ["s"]


async def test_cancelling_a_flush_does_not_cancel_listeners(runtime: Runtime) -> None:
    finished = asyncio.Event()
    release = asyncio.Event()

    async def durable(session: Session) -> None:
        await release.wait()
        finished.set()

    runtime.hooks.listen("session/flush", durable)
    session = runtime.sessions.create("s")
    flushing = asyncio.ensure_future(runtime.sessions.flush(session))
    await asyncio.sleep(0)
    flushing.cancel()
    with pytest.raises(asyncio.CancelledError):
        await flushing
    release.set()
    # A cancelled listener would never set the event; the timeout turns that into a failure.
    await asyncio.wait_for(finished.wait(), timeout=5)


async def test_a_lone_listeners_caller_future_is_awaited_directly_and_cancelled_alone(
    runtime: Runtime,
) -> None:
    """A lone listener's ``CallerFuture`` is what the flush awaits (no waiter of its own): its
    outcome is the flush's, and a cancelled flush cancels that future and nothing else."""
    handed: list[CallerFuture] = []
    work = asyncio.get_running_loop().create_future()

    def listener(session: Session) -> CallerFuture:
        waiter = CallerFuture()
        work.add_done_callback(lambda done: waiter.done() or waiter.set_exception(OSError("eio")))
        handed.append(waiter)
        return waiter

    runtime.hooks.listen("session/flush", listener)
    session = runtime.sessions.create("s")
    cancelled = asyncio.ensure_future(runtime.sessions.flush(session))
    await until(lambda: len(handed) == 1)
    cancelled.cancel()
    with pytest.raises(asyncio.CancelledError):
        await cancelled
    assert handed[0].cancelled()
    assert not work.done()  # the listener's work goes on
    failing = asyncio.ensure_future(runtime.sessions.flush(session))
    await until(lambda: len(handed) == 2)
    work.set_result(None)
    with pytest.raises(OSError, match="eio"):
        await failing


# --- fork (cases 24-28) -----------------------------------------------------------------------


def _closed_turn(session: Session) -> None:
    session.append("turn/start", {"turn": 1})
    session.append("user/message", user(), surface_op="append")
    session.append(
        "assistant/message",
        {"turn": 1, "step": 1, "message": assistant()},
        surface_op="append",
        source_event_seqs=[],
    )
    session.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})


def test_case_24_fork_copies_the_log_and_records_lineage(runtime: Runtime) -> None:
    source = runtime.sessions.create("src", cwd="/w")
    _closed_turn(source)
    child = runtime.sessions.fork(source, child_id="kid")
    assert [e.to_json() for e in child.events[:-1]] == [e.to_json() for e in source.events]
    assert child.events[-1].type == "session/end-seed"
    assert child.header.parent_session == "src"
    assert child.header.seed_length == 4
    assert child.header.cwd == "/w"
    assert child.derive_messages() == source.derive_messages()
    child.append("plugin/x", {})
    assert source.seq == 4


def test_case_25_fork_of_empty_source_and_earlier_boundary(runtime: Runtime) -> None:
    empty = runtime.sessions.create("empty")
    child = runtime.sessions.fork(empty)
    assert [e.type for e in child.events] == ["session/end-seed"]
    assert child.header.seed_length == 0
    source = runtime.sessions.create("src")
    _closed_turn(source)
    source.append("turn/start", {"turn": 2})
    source.append("user/message", user("open", id="u2"), surface_op="append")
    early = runtime.sessions.fork(source, 3)
    assert [m["id"] for m in early.derive_messages()] == ["u1", "a1"]


@pytest.mark.parametrize("boundary", [0, 1, 2, 3, 4])
def test_case_26_boundary_inside_open_turn(runtime: Runtime, boundary: int) -> None:
    source = runtime.sessions.create("src")
    source.append("turn/start", {"turn": 1})
    source.append("step/start", {"turn": 1, "step": 1})
    source.append("user/message", user(), surface_op="append")
    source.append(
        "assistant/message",
        {"turn": 1, "step": 1, "message": assistant(calls=("c1",))},
        surface_op="append",
        source_event_seqs=[],
    )
    source.append(
        "tool/call", {"turn": 1, "step": 1, "callId": "c1", "name": "read_file", "arguments": "{}"}
    )
    with pytest.raises(SessionForkError) as info:
        runtime.sessions.fork(source, boundary)
    assert info.value.code == "OPEN_TURN"
    assert str(info.value) == f'fork boundary {boundary} in session "src" ends inside open turn 1'


def test_case_27_invalid_boundaries(runtime: Runtime) -> None:
    source = runtime.sessions.create("src")
    _closed_turn(source)
    for bad in (-1, 0.5, 2**53):
        with pytest.raises(SessionForkError, match="must be a non-negative safe integer") as info:
            runtime.sessions.fork(source, bad)  # type: ignore[arg-type]
        assert info.value.code == "INVALID_BOUNDARY"
    with pytest.raises(
        SessionForkError, match=r"does not exist in session \"src\" \(last seq: 3\)"
    ):
        runtime.sessions.fork(source, 4)
    empty = runtime.sessions.create("empty")
    with pytest.raises(SessionForkError, match=r"\(last seq: none\)"):
        runtime.sessions.fork(empty, 0)


async def test_case_28_fork_lookup_errors_in_order(runtime: Runtime) -> None:
    source = runtime.sessions.create("src")
    runtime.sessions.create("taken")
    with pytest.raises(SessionForkError) as info:
        runtime.sessions.fork("nope", -1, child_id="taken")
    assert info.value.code == "SESSION_ALREADY_EXISTS"
    assert str(info.value) == 'session "taken" already exists'
    with pytest.raises(SessionForkError) as info:
        runtime.sessions.fork("nope")
    assert info.value.code == "SESSION_NOT_FOUND"
    assert str(info.value) == 'session "nope" not found'
    detached = Session.create("ghost")
    with pytest.raises(SessionForkError) as info:
        runtime.sessions.fork(detached)
    assert info.value.code == "SESSION_NOT_FOUND"
    await runtime.sessions.dispose(source)
    runtime.sessions.create("src")
    with pytest.raises(SessionForkError) as info:
        runtime.sessions.fork(source)
    assert info.value.code == "SESSION_NOT_LIVE"
    assert str(info.value) == 'session "src" is not the live store instance'


# --- hook bus and plugins ---------------------------------------------------------------------


def test_middleware_composes_in_registration_order(runtime: Runtime) -> None:
    trace: list[str] = []

    def middleware(name: str) -> Any:
        def wrap(value: list[str], next: Any) -> Any:
            trace.append(f"{name}>")
            result = next([*value, name])
            trace.append(f"<{name}")
            return result

        return wrap

    runtime.hooks.wrap("x", middleware("outer"))
    runtime.hooks.wrap("x", middleware("inner"))
    result = runtime.hooks.chain("x", lambda value: [*value, "terminal"])([])
    assert result == ["outer", "inner", "terminal"]
    assert trace == ["outer>", "inner>", "<inner", "<outer"]


async def test_async_middleware_can_delay_the_downstream(runtime: Runtime) -> None:
    order: list[str] = []

    async def gate(value: int, next: Any) -> Any:
        order.append("gate")
        return await next(value + 1)

    async def terminal(value: int) -> int:
        order.append("terminal")
        return value * 10

    runtime.hooks.wrap("y", gate)
    assert await runtime.hooks.chain("y", terminal)(1) == 20
    assert order == ["gate", "terminal"]


def test_install_returns_a_disposer_that_removes_everything(runtime: Runtime) -> None:
    calls: list[str] = []
    cleaned: list[bool] = []

    def plugin(scope: PluginScope) -> Any:
        scope.observe("session/event", lambda s, e: calls.append("observe"))
        scope.listen("session/flush", lambda s: calls.append("listen"))
        scope.wrap("z", lambda v, next: next(v))
        return lambda: cleaned.append(True)

    before = runtime.hooks.observers("session/event")
    dispose = runtime.install(plugin)
    assert len(runtime.hooks.observers("session/event")) == len(before) + 1
    session = runtime.sessions.create("s")
    session.append("plugin/x", {})
    dispose()
    dispose()
    session.append("plugin/y", {})
    assert calls == ["observe"]
    assert runtime.hooks.observers("session/event") == before
    assert runtime.hooks.listeners("session/flush") == ()
    assert runtime.hooks.middleware("z") == ()
    assert cleaned == [True]


def test_plugin_object_and_failed_install_rollback(runtime: Runtime) -> None:
    class Broken:
        def install(self, scope: PluginScope) -> None:
            scope.observe("session/event", lambda s, e: None)
            raise RuntimeError("install failed")

    with pytest.raises(RuntimeError, match="install failed"):
        runtime.install(Broken())
    assert runtime.hooks.observers("session/event") == ()


def test_attach_refuses_a_session_attached_elsewhere(runtime: Runtime) -> None:
    session = runtime.sessions.create("s")
    other = Runtime()
    with pytest.raises(SessionCollisionError, match="already attached to a store"):
        other.sessions.attach(session)
    detached = Session.create("s")
    with pytest.raises(SessionCollisionError, match='session "s" already exists'):
        runtime.sessions.attach(detached)
