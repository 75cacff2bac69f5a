"""``agent-session copy SRC DST [ID...]``: sessions from one store into another, of any kind
(JSONL directory, SQLite database), every stored event as it is stored."""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from agent_session.exits import CORRUPT, NOT_FOUND, OK, UserError
from agent_session.output import json_line
from agent_session.stores import parse_store
from session import (
    SessionCollisionError,
    SessionError,
    SessionNotFoundError,
)
from session.persistence.coordinator import PersistenceCoordinator

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


async def copy_session(
    source: PersistenceCoordinator, target: PersistenceCoordinator, id: str
) -> Copied:
    """Copy the stored session ``id`` from ``source`` into ``target``: its header, then every
    stored event in one durable append (no closers are added: an interrupted turn stays
    interrupted). The copy is read back, and it must encode exactly as the source's events
    do; otherwise it is deleted again and the copy refused.

    Raises:
        SessionNotFoundError: ``source`` has no session ``id``.
        SessionCollisionError: ``target`` already has one (it is left alone), or a live
            writer holds it in ``source``.
        SessionError: It cannot be stored in ``target`` exactly (for example an event marked
            ``ignorable`` into SQLite); nothing is left in ``target``.
    """
    examined = await source.examine(id)
    if examined.writer_elsewhere:
        raise SessionCollisionError(
            f'session "{id}" is being written by a live writer; copy it once it stopped'
        )
    events = list(examined.session.events[: examined.stored_events])
    await target.create(examined.session.header)
    await target.append(id, events)
    copied = await target.read_from(id, 0)
    wanted = [event.encode() for event in events]
    got = [event.encode() for event in copied]
    if got != wanted:
        seq = next(
            (i for i, (a, b) in enumerate(zip(got, wanted, strict=False)) if a != b),
            min(len(got), len(wanted)),
        )
        await target.delete(id)
        raise SessionError(
            f'session "{id}" would not be byte-identical in the target (event seq {seq} '
            "reads back differently); the copy was removed"
        )
    return Copied(id, len(events), examined.closers > 0, examined.torn_tail)


async def copy(args: argparse.Namespace) -> int:
    """Copy the named sessions (default: every session of SRC) and report each; exits with
    the worst outcome (2 for an id that exists in DST or cannot be stored there, 3 for one
    SRC does not have)."""
    from agent_session.commands import backend, max_log_bytes

    source_spec, target_spec = parse_store(args.source), parse_store(args.target)
    if source_spec == target_spec:
        raise UserError(f"SRC and DST are the same store ({source_spec.shown})")
    source = backend(source_spec)
    target = target_spec.open(max_log_bytes=max_log_bytes())
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
                status = "exists" if isinstance(e, SessionCollisionError) else "refused"
                _say(args, id, status, str(e))
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


def _say(args: argparse.Namespace, id: str, status: str, detail: str) -> None:
    if args.json:
        print(json_line({"id": id, "status": status, "detail": detail}))
    else:
        print(f"{id}: {status} — {detail}")
