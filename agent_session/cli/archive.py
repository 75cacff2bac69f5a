"""``agent-session archive STORE --older-than AGE --to s3://bucket/prefix [ID...]``: the
store's stopped sessions moved to its cold tier (:mod:`agent_session.cold`)."""

from __future__ import annotations

import argparse

from agent_session.cli.exits import CORRUPT, OK, UserError
from agent_session.cli.output import say_action

__all__ = ["archive"]


async def archive(args: argparse.Namespace) -> int:
    """Archive and report each session; exits 2 when one was refused."""
    from agent_session.cli.commands import check_exists
    from agent_session.cold import archive_store

    check_exists(args.store)
    try:
        done = await archive_store(
            args.store.url,
            args.to,
            older_than_ms=args.older_than,
            ids=args.ids or None,
            endpoint=args.endpoint_url,
        )
    except ValueError as e:
        raise UserError(str(e)) from None
    for item in done:
        say_action(args.json, item.id, item.action, item.detail)
    if not args.json:
        moved = sum(item.action == "archived" for item in done)
        print(f"archived {moved} session(s) to {args.to}; {len(done) - moved} kept")
    return CORRUPT if any(item.action in ("refused", "held") for item in done) else OK
