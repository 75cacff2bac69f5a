"""``agent-session copy SRC DST [ID...]``: sessions from one store into another, of any kind
(JSONL directory, SQLite database), every stored event as it is stored."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass

from agent_session.cli.exits import CORRUPT, NOT_FOUND, OK, UserError
from agent_session.cli.output import json_line
from agent_session.interchange.publish import publish
from agent_session.session import (
    SessionBusyError,
    SessionCollisionError,
    SessionCopyError,
    SessionError,
    SessionEvent,
    SessionNotFoundError,
    encode_json,
)
from agent_session.session.events.eventlog import EventLog, is_run
from agent_session.session.events.types import ASSISTANT_CHUNK
from agent_session.session.persistence.service import SessionPersistence
from agent_session.stores import parse_store

__all__ = ["Copied", "copy", "copy_session"]


@dataclass(frozen=True, slots=True)
class Copied:
    """One session copied."""

    id: str
    events: int
    interrupted: bool
    """Whether its last turn is open (it is copied open; a load in DST repairs it)."""
    torn_tail: bool
    """Whether SRC has a torn tail past those events (not copied)."""


async def copy_session(source: SessionPersistence, target: SessionPersistence, id: str) -> Copied:
    """Copy the stored session ``id`` from ``source`` into ``target``: its header, then every
    stored event (no closers are added: an interrupted turn stays interrupted), in durable
    appends that keep the source's lines: each run of streamed deltas the source holds as one
    packed line, and each delta it holds alone, is appended by itself, so a JSONL or
    PostgreSQL target packs exactly what the source packed (a JSONL log copied into
    PostgreSQL and back is the same file). A copy cut short leaves a prefix in ``target``,
    which a new copy refuses as existing (remove it with ``delete``). The copy is read back:
    every event's ``data`` must encode to the same bytes and its envelope hold the same
    values (a SQLite row keeps the reference's envelope key order, not the written one: a
    repair's closers are written ``surfaceOp`` first); otherwise it is deleted again and the
    copy refused.

    Raises:
        SessionNotFoundError: ``source`` has no session ``id``.
        SessionCollisionError: ``target`` already has one (it is left alone).
        SessionBusyError: A live writer holds it in ``source`` (nothing is copied).
        SessionError: It cannot be stored in ``target`` exactly (for example an event marked
            ``ignorable`` into SQLite); nothing is left in ``target``.
    """
    examined = await source.diagnose(id)
    if examined.writer_elsewhere:
        raise SessionBusyError(
            f'session "{id}" is being written by a live writer in the source; copy it once '
            "it stopped (nothing was copied)"
        )
    batches = _batches(examined.session.events[: examined.stored_events])
    events = [event for batch in batches for event in batch]
    await publish(target, examined.session.header, batches)
    copied = await target.read_from(id, 0)
    wanted = [_kept(event) for event in events]
    got = [_kept(event) for event in copied]
    if got != wanted:
        seq = next(
            (i for i, (a, b) in enumerate(zip(got, wanted, strict=False)) if a != b),
            min(len(got), len(wanted)),
        )
        await target.delete(id)
        raise SessionCopyError(
            f'session "{id}" would not be byte-identical in the target (event seq {seq} '
            "reads back differently); the copy was removed"
        )
    return Copied(id, len(events), examined.closers > 0, examined.torn_tail)


async def copy(args: argparse.Namespace) -> int:
    """Copy the named sessions (default: every session of SRC) and report each; exits with
    the worst outcome (2 for an id that exists in DST or cannot be stored there, 3 for one
    SRC does not have)."""
    from agent_session.cli.commands import backend, open_backend

    source_spec, target_spec = parse_store(args.source), parse_store(args.target)
    if source_spec == target_spec:
        raise UserError(f"SRC and DST are the same store ({source_spec.shown})")
    source = backend(source_spec, read_only=True)
    target = open_backend(target_spec)
    worst, done, refused = OK, 0, 0
    try:
        ids = args.ids or [header.id for header in await source.list_headers()]
        for id in ids:
            try:
                copied = await copy_session(source, target, id)
            except SessionNotFoundError as e:
                worst, refused = max(worst, NOT_FOUND), refused + 1
                _say(args, id, "not found", str(e))
            except (SessionError, ValueError, TypeError) as e:
                worst, refused = max(worst, CORRUPT), refused + 1
                if isinstance(e, SessionBusyError):
                    _say(args, id, "live", str(e))
                elif isinstance(e, SessionCollisionError):
                    _say(args, id, "exists", f"already in {target_spec.shown}; left alone there")
                else:
                    _say(args, id, "refused", str(e))
            else:
                done += 1
                notes = ["interrupted (a load repairs it)"] if copied.interrupted else []
                notes += ["torn tail in SRC not copied"] if copied.torn_tail else []
                detail = f"{copied.events} events" + "".join(f"; {n}" for n in notes)
                _say(args, id, "copied", detail)
    finally:
        try:
            await target.aclose()
        finally:
            await source.aclose()
    if not args.json:
        print(f"copied {done} session(s) to {target_spec.shown}; {refused} refused")
    return worst


def _batches(events: Sequence[SessionEvent]) -> list[list[SessionEvent]]:
    """``events`` in appends that reproduce the source's lines (see :func:`copy_session`): a
    packed run (a :class:`LazyRun` part, built or not) or a lone delta alone, the rest
    together."""
    parts = events.parts if isinstance(events, EventLog) else [events]
    batches: list[list[SessionEvent]] = []
    group: list[SessionEvent] = []
    for part in parts:
        if is_run(part):
            batches += [group, list(part)]
            group = []
            continue
        for event in part:
            if event.type == ASSISTANT_CHUNK:
                batches += [group, [event]]
                group = []
            else:
                group.append(event)
    return [batch for batch in [*batches, group] if batch]


def _kept(event: SessionEvent) -> tuple[bytes, dict[str, object]]:
    """What a copy must keep of an event: its data's bytes, and its envelope's values."""
    wire = event.to_json()
    return encode_json(wire.pop("data")), wire


def _say(args: argparse.Namespace, id: str, status: str, detail: str) -> None:
    if args.json:
        print(json_line({"id": id, "action": status, "detail": detail}))
    else:
        print(f"{id}: {status} — {detail}")
