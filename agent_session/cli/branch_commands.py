"""The commands that branch sessions: ``fork`` and ``rewind`` (and ``replay`` and ``diff``,
which re-run one and compare two)."""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import Iterator

from agent_session.cli.exits import OK, USAGE, NotFound, UserError
from agent_session.cli.output import json_line

__all__ = ["fork", "rewind"]


@contextlib.contextmanager
def _refused(store: str) -> Iterator[None]:
    """A refused fork as the command's error: a missing session is not found (3), a boundary
    the log cannot be forked at a usage error (4); another store's refusal goes as it is."""
    from agent_session.session import SessionForkError

    try:
        yield
    except SessionForkError as e:
        if e.code == "SESSION_NOT_FOUND":
            raise NotFound(f"{e} in {store}") from None
        raise UserError(f"{e} ({e.code})", code=USAGE) from None


async def fork(args: argparse.Namespace) -> int:
    """Write a fork of a stored session; the parent is only read."""
    from agent_session.cli.commands import backend
    from agent_session.lineage.fork import fork_session

    store = backend(args.store)
    try:
        with _refused(args.store.shown):
            forked = await fork_session(
                store,
                args.id,
                at=args.at,
                turn=args.turn,
                before_turn=args.before_turn,
                new_id=args.new_id,
            )
    finally:
        await store.aclose()
    said = {"id": forked.id, "parentSession": forked.parent, "seedLength": forked.seed_length}
    if args.json:
        print(json_line(said))
    else:
        print(
            f"forked {args.id} into {forked.id} in {args.store.shown}: its first "
            f"{forked.seed_length} events (the parent is unchanged)"
        )
    return OK


async def rewind(args: argparse.Namespace) -> int:
    """Fork a conversation's current branch after a turn and make the fork current."""
    from agent_session.lineage.rewind import rewind_session

    with _refused(args.store.shown):
        forked = await rewind_session(args.store, args.id, turn=args.turn, new_id=args.new_id)
    said = {"conversation": args.id, "current": forked.id, "left": forked.parent}
    if args.json:
        print(json_line(said))
    else:
        print(
            f"rewound {args.id} to the end of turn {args.turn}: its current branch is now "
            f"{forked.id} ({forked.parent} stays as it was)"
        )
    return OK
