"""Retention: :func:`purge` deletes a store's sessions last written before a cutoff (and
carrying given labels), each with a receipt (:mod:`.receipts`) that says what was removed,
when, and by which rule.

Guarantees:

- Each session is deleted by the store's one delete (``SessionPersistence.delete``): whole
  or not at all, refused while a live writer holds it or a legal hold stands on it
  (:mod:`.holds`), and never while it is a conversation's current branch.
- A receipt ``purging`` is durable before the delete starts and a receipt ``purged`` (or
  ``intact``, with why) after it ends. A crash in between leaves a ``purging`` receipt
  without an end; the next :func:`purge` (or :func:`settle_receipts`) looks at the store and
  adds the end that is true: ``purged`` when the session is gone, ``intact`` when it is not.
- A receipt holds no content: the id, the rule, the time, the count of stored lines and
  bytes removed and their SHA-256, so the removal can be proven without keeping what it
  removed.
- A session goes with its child agents' sessions (``origin: subagent``), theirs first,
  each with a receipt, whatever their age; nothing of the tree goes when a hold stands on
  any of it, and a subagent's session never goes without its parent.
- ``dry_run`` writes nothing, receipts included.
"""

from __future__ import annotations

import hashlib
import secrets
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agent_session.governance.labels import labels_in_lines
from agent_session.governance.receipts import Receipts, receipts_for, utc_stamp
from agent_session.session import SessionCollisionError, SessionHeldError, SessionNotFoundError
from agent_session.session.events.holds import holds_in_lines
from agent_session.session.persistence.kit import failpoint

if TYPE_CHECKING:
    from agent_session.session.persistence.service import SessionPersistence
    from agent_session.stores import StoreSpec

__all__ = ["Purged", "purge", "purge_store", "settle_receipts"]


@dataclass(frozen=True, slots=True)
class Purged:
    """What :func:`purge` did with one session: ``purged``, ``would purge`` (a dry run),
    ``held``, ``live``, ``current branch``, ``kept`` (a subagent's session whose parent
    stays, or a parent one of whose subagents could not go), or ``settled`` (a receipt a
    crash left open, ended now)."""

    id: str
    action: str
    detail: str
    receipt: dict[str, Any] = field(default_factory=dict)


def _removed(content: bytes, updated_at: int | None) -> dict[str, Any]:
    lines = content.count(b"\n")
    return {
        "lines": lines,
        "bytes": len(content),
        "sha256": hashlib.sha256(content).hexdigest(),
        **({"lastWrite": updated_at} if updated_at is not None else {}),
    }


async def settle_receipts(store: StoreSpec, backend: SessionPersistence) -> list[Purged]:
    """End each ``purging`` receipt a crash left without an end, as the store is now."""
    receipts = receipts_for(store)
    try:
        written = receipts.all()
        ended = {(r.get("run"), r.get("id")) for r in written if r.get("state") != "purging"}
        done = []
        for receipt in written:
            key = (receipt.get("run"), receipt.get("id"))
            if receipt.get("state") != "purging" or key in ended:
                continue
            id = str(receipt.get("id"))
            gone = await backend.read_raw(id) is None
            end = {
                **receipt,
                "state": "purged" if gone else "intact",
                "settled": utc_stamp(),
                "note": "the purge was interrupted; this is what the store holds now",
            }
            receipts.add(end)
            ended.add(key)
            done.append(Purged(id, "settled", f"{end['state']} (an interrupted purge)", end))
        return done
    finally:
        receipts.close()


async def purge(
    store: StoreSpec,
    backend: SessionPersistence,
    *,
    older_than_ms: int,
    labels: Mapping[str, str] | None = None,
    dry_run: bool = False,
) -> tuple[list[Purged], str]:
    """Delete the sessions of ``store`` (through its open ``backend``) last written more
    than ``older_than_ms`` ago and carrying every label of ``labels``; returns what was done
    to each and where the receipts are."""
    from agent_session.lineage.current import branches_for
    from agent_session.see.inventory import rows, subagent_trees

    cutoff = int(time.time() * 1000) - older_than_ms
    wanted = dict(labels or {})
    shown_rule = _rule(older_than_ms, wanted)
    done = [] if dry_run else await settle_receipts(store, backend)
    pointers = branches_for(store, read_only=True)
    try:
        current = set(pointers.all().values())
    finally:
        pointers.close()
    run = secrets.token_hex(8)
    receipts = receipts_for(store)
    try:
        listed = list(rows(store))
        chosen: dict[str, tuple[bytes, int | None]] = {}
        for row in listed:
            if row.updated_at is None or row.updated_at > cutoff:
                continue
            raw = await backend.read_raw(row.id)
            if raw is None:
                continue
            found = labels_in_lines(raw.content)
            if any(found.get(key) != value for key, value in wanted.items()):
                continue
            chosen[row.id] = (raw.content, row.updated_at)
        trees = subagent_trees(listed)
        stored = {row.id for row in listed}
        parents = {row.id: row.parent for row in listed if row.origin == "subagent"}
        for id, (content, updated_at) in chosen.items():
            parent = parents.get(id)
            if parent is not None and parent in stored:
                if parent not in chosen:
                    why = f"a subagent of {parent}, which is kept: it goes with its parent"
                    done.append(Purged(id, "kept", why))
                continue  # (purged with its parent)
            job = (backend, receipts, run, current, dry_run)
            done += await _tree(job, id, content, updated_at, trees.get(id, []), shown_rule)
        return done, receipts.where
    finally:
        receipts.close()


async def _tree(
    job: tuple[Any, Receipts, str, set[str], bool],
    id: str,
    content: bytes,
    updated_at: int | None,
    subagents: list[str],
    rule: str,
) -> list[Purged]:
    """Purge ``id`` and its child agents' sessions (theirs first, each with a receipt);
    nothing of the tree when a hold stands on any of it."""
    backend, receipts, run, current, dry_run = job
    logs: dict[str, bytes] = {}
    for child in subagents:
        raw = await backend.read_raw(child)
        if raw is not None:
            logs[child] = raw.content
            holds = holds_in_lines(raw.content)
            if holds:
                why = f"its subagent {child} is under legal hold: " + "; ".join(
                    hold.named() for hold in holds
                )
                return [Purged(id, "held", why)]
    out = []
    for child, log in logs.items():
        parts = (child, log, None, run, f"{rule} (a subagent of {id})", current, dry_run)
        out.append(await _one(backend, receipts, *parts))
        if out[-1].action not in ("purged", "would purge"):
            return [*out, Purged(id, "kept", f"its subagent {child} was not purged")]
    out.append(await _one(backend, receipts, id, content, updated_at, run, rule, current, dry_run))
    return out


async def _one(
    backend: SessionPersistence,
    receipts: Receipts,
    id: str,
    content: bytes,
    updated_at: int | None,
    run: str,
    rule: str,
    current: set[str],
    dry_run: bool,
) -> Purged:
    holds = holds_in_lines(content)
    if holds:
        return Purged(id, "held", "; ".join(hold.named() for hold in holds))
    if id in current:
        return Purged(id, "current branch", "a conversation's current branch: rewind it first")
    removed = _removed(content, updated_at)
    receipt: dict[str, Any] = {
        "receipt": "purge",
        "id": id,
        "run": run,
        "rule": rule,
        "at": utc_stamp(),
        "removed": removed,
    }
    if dry_run:
        return Purged(id, "would purge", f"{removed['lines']} lines", receipt)
    receipts.add({**receipt, "state": "purging"})
    failpoint("purge:after-intent")
    try:
        await backend.delete(id)
    except (SessionHeldError, SessionCollisionError) as e:
        end = {**receipt, "state": "intact", "why": str(e)}
        receipts.add(end)
        return Purged(id, "held" if isinstance(e, SessionHeldError) else "live", str(e), end)
    except SessionNotFoundError:
        pass  # (deleted meanwhile by someone else: it is gone all the same)
    failpoint("purge:after-delete")
    end = {**receipt, "state": "purged", "at": utc_stamp()}
    receipts.add(end)
    return Purged(id, "purged", f"{removed['lines']} lines", end)


def _rule(older_than_ms: int, labels: Mapping[str, str]) -> str:
    days, rest = divmod(older_than_ms, 86_400_000)
    age = f"{days}d" if not rest else f"{older_than_ms // 1000}s"
    return " ".join([f"older-than {age}", *(f"label {k}={v}" for k, v in sorted(labels.items()))])


async def purge_store(
    store: str,
    *,
    older_than_ms: int,
    labels: Mapping[str, str] | None = None,
    dry_run: bool = False,
) -> list[Purged]:
    """:func:`purge` on the store ``store`` names (a directory, ``sqlite:///…`` or
    ``postgresql://…``), opened and closed here; what was done to each session."""
    from agent_session.stores import parse_store

    spec = parse_store(store)
    backend = spec.open()
    try:
        done, _ = await purge(
            spec, backend, older_than_ms=older_than_ms, labels=labels, dry_run=dry_run
        )
        return done
    finally:
        await backend.aclose()
