"""One stored session copied from a store into another, of any kind, every stored event as it
is stored, and read back before it counts (``agent-session copy``, the cold tier's archive
and restore)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from agent_session.interchange.publish import publish
from agent_session.session import (
    SessionBusyError,
    SessionCopyError,
    SessionEvent,
    encode_json,
)
from agent_session.session.events.eventlog import EventLog, is_run
from agent_session.session.events.types import ASSISTANT_CHUNK
from agent_session.session.persistence.api import Diagnosis
from agent_session.session.persistence.service import SessionPersistence

__all__ = ["Copied", "copy_session"]


def _keep_key(source: SessionPersistence, target: SessionPersistence, id: str) -> None:
    """A sealed session's copy is sealed with the same key (one erasure covers both).

    Raises:
        SessionCopyError: ``target`` cannot seal it (it would hold the content in clear).
    """
    key_of = getattr(source.storage, "key_of", None)
    kid = key_of(id) if key_of is not None else None
    if kid is None:
        return
    use_key = getattr(target.storage, "use_key", None)
    if use_key is None:
        raise SessionCopyError(
            f'session "{id}" is sealed: open the target store with the keyring too, or its '
            "copy would hold the content in clear (nothing was copied)"
        )
    use_key(id, kid)


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
    source: SessionPersistence,
    target: SessionPersistence,
    id: str,
    *,
    examined: Diagnosis | None = None,
) -> Copied:
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
    if examined is None:  # (a caller that read it already passes what it read)
        examined = await source.diagnose(id)
    if examined.writer_elsewhere:
        raise SessionBusyError(
            f'session "{id}" is being written by a live writer in the source; copy it once '
            "it stopped (nothing was copied)"
        )
    _keep_key(source, target, id)
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
