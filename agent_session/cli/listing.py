"""``agent-session ls``: one row per entry of a store (read-only), with each fork's parent and
the conversations' current branches; ``--tree`` draws the lineage."""

from __future__ import annotations

import argparse
import datetime
import sqlite3
from collections.abc import AsyncIterator, Iterable
from typing import TYPE_CHECKING, Any

from agent_session.cli.commands import check_exists, max_log_bytes, open_backend
from agent_session.cli.exits import CORRUPT, OK, STATUS_CODES
from agent_session.cli.output import json_line, print_table

if TYPE_CHECKING:
    from agent_session.see.inventory import SessionRow
    from agent_session.session.persistence.service import SessionPersistence
    from agent_session.stores import StoreSpec

__all__ = ["ls"]


def _created(ms: int | None) -> str:
    if ms is None:
        return "-"
    moment = datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC)
    return moment.strftime("%Y-%m-%d %H:%M:%S")


async def _listed(
    found: Iterable[SessionRow], args: argparse.Namespace, reader: _Reader
) -> AsyncIterator[SessionRow]:
    """The rows ``ls`` shows: each with an open last turn read to say more of it
    (:func:`agent_session.see.inventory.refine`), those in ``--state``, in ``--sort`` order (as
    the store reads them without one, so they stream), at most ``--limit``."""
    from agent_session.see.inventory import refine

    async def chosen() -> AsyncIterator[SessionRow]:
        for row in found:
            if row.state in ("interrupted", "open"):
                await refine(await reader.open(), row)
            if not args.state or row.state in args.state:
                yield row

    rows: AsyncIterator[SessionRow] = chosen()
    if args.sort is not None:
        if args.sort == "id":
            key: Any = lambda row: row.id  # noqa: E731
        else:  # created or updated, newest first; unknown times last
            field = "created_at" if args.sort == "created" else "updated_at"
            key = lambda row: -(getattr(row, field) or -1)  # noqa: E731
        ordered = sorted([row async for row in rows], key=key)

        async def replay() -> AsyncIterator[SessionRow]:
            for row in ordered:
                yield row

        rows = replay()
    count = 0
    async for row in rows:
        if args.limit is not None and count >= args.limit:
            return
        count += 1
        yield row


class _Reader:
    """A read-only backend opened on first use (only sessions with an open turn need it)."""

    def __init__(self, store: StoreSpec) -> None:
        self.store = store
        self.backend: SessionPersistence | None = None

    async def open(self) -> SessionPersistence:
        if self.backend is None:
            self.backend = open_backend(self.store, read_only=True)
        return self.backend

    async def aclose(self) -> None:
        if self.backend is not None:
            await self.backend.aclose()


async def ls(args: argparse.Namespace) -> int:
    """One row per entry of the store; a problem entry (corrupt, unsupported, unreadable) is
    listed with its reason, and sets the exit code."""
    from agent_session.see.inventory import rows

    worst = OK
    listed: list[SessionRow] = []
    problems: list[str] = []
    check_exists(args.store)
    current: dict[str, str] | None = None
    reader = _Reader(args.store)
    try:
        async for row in _listed(rows(args.store, max_log_bytes()), args, reader):
            bad = row.problem_flag
            if bad is not None:
                worst = max(worst, STATUS_CODES.get(bad, CORRUPT))
                problems.append(f"{row.id}: {bad} — {row.problem}")
            elif current is None:  # (once the store has shown it can be read)
                current = _current(args.store)
            if current and row.id in current:
                row.flags.append(f"current branch of {current[row.id]}")
            if args.json:
                print(json_line(row.to_json()), flush=True)  # as read, where the store streams
                continue
            listed.append(row)
    finally:
        await reader.aclose()
    if args.json:
        return worst
    if not listed:
        print("no sessions")
        return OK
    if args.tree:
        for line in _tree(listed):
            print(line)
    else:
        print_table([_HEADER, *(_cells(row) for row in listed)])
    if problems:
        print(f"\n{len(problems)} problem entr{'y' if len(problems) == 1 else 'ies'}:")
        for problem in problems:
            print(f"  {problem}")
    return worst


def _current(store: StoreSpec) -> dict[str, str]:
    """Each current branch and its conversation, read without writing. A branch file that is
    not one is an error; a database's own problems are the listing's to say."""
    from agent_session.lineage.current import branches_for
    from agent_session.session import SessionError

    try:
        pointers = branches_for(store, read_only=True)
        try:
            return {branch: conversation for conversation, branch in pointers.all().items()}
        finally:
            pointers.close()
    except (OSError, SessionError, sqlite3.Error):
        if store.kind == "jsonl":
            raise
        return {}


_HEADER = [
    "ID",
    "PARENT",
    "CWD",
    "CREATED (UTC)",
    "UPDATED (UTC)",
    "EVENTS",
    "STATE",
    "BACKEND",
    "BYTES",
    "FLAGS",
]


def _forked(row: SessionRow) -> str:
    """Where a fork branched: ``parent@seed length``; a child agent's parent:
    ``parent (subagent)``; ``-`` for a session that is neither."""
    if row.parent is None:
        return "-"
    if row.origin == "subagent":
        return f"{row.parent} (subagent)"
    return f"{row.parent}@{row.seed_length}"


def _cells(row: SessionRow) -> list[str]:
    created, updated = _created(row.created_at), _created(row.updated_at)
    packed = row.compression not in (None, "none")
    backend = f"{row.backend}+zstd" if packed else row.backend
    size = "-" if row.size is None else str(row.size)
    cells = [row.id, _forked(row), row.cwd or "-", created, updated, str(row.events), row.state]
    return [*cells, backend, size, ", ".join(row.flags)]


def _tree(listed: list[SessionRow]) -> list[str]:
    """The sessions as a lineage tree: each fork and each child agent's session under its
    parent, by id (one whose parent is not listed is a root, its parent named), roots in the
    listing's order."""
    ids = {row.id for row in listed}
    children: dict[str | None, list[SessionRow]] = {}
    for row in listed:
        children.setdefault(row.parent if row.parent in ids else None, []).append(row)
    lines: list[str] = []

    def draw(row: SessionRow, lead: str, branch: str) -> None:
        said = [row.state, f"{row.events} events"]
        if row.origin == "subagent":
            said.append(f"subagent of {row.parent}, depth {row.depth}")
        elif row.parent is not None:
            said.append(f"forked from {row.parent} after its first {row.seed_length} events")
        said += row.flags
        lines.append(f"{lead}{branch}{row.id}  ({', '.join(said)})")
        below = sorted(children.get(row.id, []), key=lambda child: child.id)
        inner = lead + ("" if not branch else "   " if branch == "└─ " else "│  ")
        for index, child in enumerate(below):
            draw(child, inner, "└─ " if index == len(below) - 1 else "├─ ")

    for root in children.get(None, []):
        draw(root, "", "")
    return lines
