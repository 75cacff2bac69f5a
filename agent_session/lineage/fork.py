"""Forking a stored session: a new session seeded with a prefix of another's log, its header
naming the parent and the seed length in the reference's format (``parentSession``,
``seedLength``; the log is the prefix then ``session/end-seed``). The parent is only read.

Where the fork starts is said one of three ways: ``at`` a seq, after turn ``turn`` (its
``turn/end``), or ``before_turn`` (the last event before its ``turn/start``). A boundary inside
an open turn is refused with the reference's ``OPEN_TURN``; a session whose last turn a crash
cut is forked from its log as a load would repair it (its honest closers are in the fork, and
the parent is not written); a turn another process is still writing is open.

A JSONL fork is written in its parent's encoding (a fork of a compressed log is compressed),
so a reference configured for one encoding loads both.

Guarantees: the fork is written whole or not at all (the store's first write of a session is
atomic: a JSONL log is written beside and linked into place, a database's in one
transaction), so a kill at any instant leaves either no fork or a complete one; an id that is
already stored is refused (``SESSION_ALREADY_EXISTS``) and nothing is written."""

from __future__ import annotations

import contextlib
import os
import re
import uuid
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Any

from agent_session.session.errors import SessionForkError, SessionNotFoundError
from agent_session.session.events.types import TURN_END, TURN_START
from agent_session.session.live.runtime import Runtime
from agent_session.session.live.session import Session
from agent_session.session.live.store import fork_prefix
from agent_session.session.persistence.api import StoredSession
from agent_session.session.persistence.service import SessionPersistence

__all__ = [
    "Forked",
    "boundary_of",
    "default_id",
    "fork_live",
    "fork_session",
    "forkable",
    "opened_store",
    "turn_spans",
]


@dataclass(frozen=True)
class Forked:
    """A fork that was written."""

    id: str
    parent: str
    seed_length: int
    """How many of the parent's events it holds (then its own ``session/end-seed``)."""


@contextlib.asynccontextmanager
async def opened_store(
    store: str | os.PathLike[str] | SessionPersistence,
) -> AsyncIterator[SessionPersistence]:
    """``store`` itself when it is an open store (its owner closes it), else the store it
    names (as :func:`agent_session.open_store` takes it), closed on the way out."""
    if isinstance(store, SessionPersistence):
        yield store
        return
    from agent_session.stores import open_store

    opened = open_store(store)
    try:
        yield opened
    finally:
        await opened.aclose()


def default_id(source: str) -> str:
    """A new id for a fork of ``source``: ``<source>.fork-<8 hex digits>``, where ``source``
    loses the suffix of a fork it is itself (so a fork of a fork is not named twice over)."""
    root = re.sub(r"(\.fork-[0-9a-f]{8})+$", "", source) or source
    return f"{root}.fork-{uuid.uuid4().hex[:8]}"


def turn_spans(events: Sequence[Any]) -> dict[int, tuple[int, int | None]]:
    """Each turn of ``events``: its number, the seq of its ``turn/start`` and of its
    ``turn/end`` (``None`` while open)."""
    spans: dict[int, tuple[int, int | None]] = {}
    open_turn: int | None = None
    for event in events:
        data = event.data if isinstance(event.data, dict) else {}
        number = data.get("turn")
        if event.type == TURN_START and isinstance(number, int):
            spans[number] = (event.seq, None)
            open_turn = number
        elif event.type == TURN_END and open_turn is not None:
            spans[open_turn] = (spans[open_turn][0], event.seq)
            open_turn = None
    return spans


def boundary_of(
    source: str,
    events: Sequence[Any],
    *,
    at: int | None = None,
    turn: int | None = None,
    before_turn: int | None = None,
) -> int | None:
    """The last seq a fork of ``events`` keeps (``-1``: none; ``None``: all of them), from
    at most one of ``at``, ``turn`` and ``before_turn``. Raises :class:`SessionForkError`
    (``INVALID_BOUNDARY``) for a turn the log does not have, or more than one."""
    given = [
        name
        for name, v in (("at", at), ("turn", turn), ("before_turn", before_turn))
        if v is not None
    ]
    if len(given) > 1:
        raise SessionForkError(
            f"a fork starts at one place: {' and '.join(given)} were both given", "INVALID_BOUNDARY"
        )
    if turn is None and before_turn is None:
        return at
    spans = turn_spans(events)
    number = turn if turn is not None else before_turn
    if number not in spans:
        have = f"turns {min(spans)} to {max(spans)}" if spans else "no turn"
        raise SessionForkError(
            f'session "{source}" has no turn {number} ({have})', "INVALID_BOUNDARY"
        )
    start, end = spans[number]
    if before_turn is not None:
        return start - 1
    if end is None:
        raise SessionForkError(
            f'fork boundary after turn {number} of session "{source}": the turn is still open',
            "OPEN_TURN",
        )
    return end


async def forkable(store: SessionPersistence, source: str) -> tuple[StoredSession, str | None]:
    """The log a fork of ``source`` is cut from (as a load would repair it when its last turn
    was cut by a crash, as stored when a writer elsewhere is still running that turn), and
    where it lives."""
    try:
        seen = await store.diagnose(source)
    except SessionNotFoundError:
        raise SessionForkError(f'session "{source}" not found', "SESSION_NOT_FOUND") from None
    if not seen.writer_elsewhere:
        return seen.session, seen.location
    cut = StoredSession(seen.session.header, seen.session.events[: seen.stored_events])
    return cut, seen.location


def _writer(store: SessionPersistence, parent_at: str | None) -> SessionPersistence | None:
    """A JSONL store that writes the fork in its parent's encoding, where the store would
    write a new session in another (``None``: the store itself writes it)."""
    from agent_session.persistence_jsonl import JsonlPersistence
    from agent_session.sealing.storage import seal_like

    if not isinstance(store, JsonlPersistence) or parent_at is None:
        return None
    packed = parent_at.endswith(".zstd")
    if packed == (store.jsonl.new_encoding.name == "zstd"):
        return None
    writer = JsonlPersistence(store.root, new_session_compression="zstd" if packed else "none")
    seal_like(writer, store.storage)  # (a sealed store's fork is sealed)
    return writer


def _keep_key(
    writer: SessionPersistence, store: SessionPersistence, source: str, child: str
) -> None:
    """A fork of a sealed session is sealed with its parent's key: erasing the parent
    erases the content its forks were seeded with too."""
    key_of = getattr(store.storage, "key_of", None)
    kid = key_of(source) if key_of is not None else None
    if kid is not None:
        writer.storage.use_key(child, kid)  # type: ignore[attr-defined]


async def fork_session(
    store: str | os.PathLike[str] | SessionPersistence,
    source: str,
    *,
    at: int | None = None,
    turn: int | None = None,
    before_turn: int | None = None,
    new_id: str | None = None,
) -> Forked:
    """Write a fork of session ``source`` of ``store`` (a store name, as
    :func:`agent_session.open_store` takes, or an open one) that keeps its events up to the
    boundary (see the module docstring; the whole log when none is given) under ``new_id``
    (default: :func:`default_id`). Raises :class:`SessionForkError` with the reference's
    code (``SESSION_ALREADY_EXISTS`` when ``new_id`` is stored already)."""
    async with opened_store(store) as opened:
        parent, parent_at = await forkable(opened, source)
        events = parent.events
        boundary = boundary_of(source, events, at=at, turn=turn, before_turn=before_turn)
        prefix = [] if boundary == -1 else fork_prefix(source, events, boundary)
        child = new_id if new_id is not None else default_id(source)
        if await opened.storage.revision(child) is not None:
            raise SessionForkError(f'session "{child}" already exists', "SESSION_ALREADY_EXISTS")
        encoded = _writer(opened, parent_at)
        _keep_key(encoded or opened, opened, source, child)
        runtime = Runtime()
        uninstall = runtime.install(encoded or opened)  # (borrowed: the owner closes it)
        try:
            forked = runtime.sessions.create(
                child,
                seed=prefix,
                cwd=parent.header.cwd,
                parent_session=source,
                seed_length=len(prefix),
            )
            try:
                await runtime.sessions.flush(forked)
            finally:
                await runtime.sessions.dispose(forked)
        finally:
            uninstall()
            if encoded is not None:
                await encoded.aclose()
        return Forked(child, source, len(prefix))


async def fork_live(
    runtime: Runtime,
    source: Session,
    *,
    at: int | None = None,
    turn: int | None = None,
    before_turn: int | None = None,
    new_id: str | None = None,
) -> Session:
    """Fork ``source``, live in ``runtime``, at a boundary as :func:`fork_session` takes it:
    the fork is live in ``runtime`` too, and durable when this returns (the integrations'
    forks, of the sessions they hold). Raises :class:`SessionForkError` as the store's
    ``fork`` does."""
    boundary = boundary_of(source.id, source.events, at=at, turn=turn, before_turn=before_turn)
    child = new_id if new_id is not None else default_id(source.id)
    if runtime.persistence is not None and await runtime.persistence.storage.revision(child):
        raise SessionForkError(f'session "{child}" already exists', "SESSION_ALREADY_EXISTS")
    if boundary == -1:  # (nothing before the first turn: an empty seed)
        forked = runtime.sessions.create(
            child, seed=[], cwd=source.header.cwd, parent_session=source.id, seed_length=0
        )
    else:
        forked = runtime.sessions.fork(source, boundary, child)
    await runtime.sessions.flush(forked)
    return forked
