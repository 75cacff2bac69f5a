"""``agent-session copy SRC DST [ID...] [--move]``: sessions from one store into another, of
any kind (JSONL directory, SQLite database), every stored event as it is stored; ``--move``
then deletes each from SRC (a session under legal hold is neither copied nor deleted)."""

from __future__ import annotations

import argparse

from agent_session.cli.exits import CORRUPT, NOT_FOUND, OK, UserError
from agent_session.cli.output import say_action
from agent_session.interchange.copying import Copied, copy_session
from agent_session.session import (
    SessionBusyError,
    SessionCollisionError,
    SessionError,
    SessionHeldError,
    SessionNotFoundError,
)
from agent_session.stores import parse_store

__all__ = ["Copied", "copy", "copy_session"]  # (copy_session: interchange.copying)


async def copy(args: argparse.Namespace) -> int:
    """Copy the named sessions (default: every session of SRC) and report each; exits with
    the worst outcome (2 for an id that exists in DST or cannot be stored there, 3 for one
    SRC does not have)."""
    from agent_session.cli.commands import backend, open_backend

    source_spec, target_spec = parse_store(args.source), parse_store(args.target)
    if source_spec == target_spec:
        raise UserError(f"SRC and DST are the same store ({source_spec.shown})")
    source = backend(source_spec, read_only=not args.move)
    target = open_backend(target_spec)
    worst, done, refused = OK, 0, 0
    try:
        ids = args.ids or [header.id for header in await source.list_headers()]
        for id in ids:
            try:
                if args.move:  # (a held session is neither copied nor deleted)
                    await source.refuse_held(id)
                copied = await copy_session(source, target, id)
                if args.move:
                    await source.delete(id)
            except SessionNotFoundError as e:
                worst, refused = max(worst, NOT_FOUND), refused + 1
                say_action(args.json, id, "not found", str(e))
            except (SessionError, ValueError, TypeError) as e:
                worst, refused = max(worst, CORRUPT), refused + 1
                if isinstance(e, SessionHeldError):
                    say_action(args.json, id, "held", str(e))
                elif isinstance(e, SessionBusyError):
                    say_action(args.json, id, "live", str(e))
                elif isinstance(e, SessionCollisionError):
                    say_action(
                        args.json, id, "exists", f"already in {target_spec.shown}; left alone there"
                    )
                else:
                    say_action(args.json, id, "refused", str(e))
            else:
                done += 1
                notes = ["interrupted (a load repairs it)"] if copied.interrupted else []
                notes += ["torn tail in SRC not copied"] if copied.torn_tail else []
                detail = f"{copied.events} events" + "".join(f"; {n}" for n in notes)
                say_action(args.json, id, "moved" if args.move else "copied", detail)
    finally:
        try:
            await target.aclose()
        finally:
            await source.aclose()
    if not args.json:
        verb = "moved" if args.move else "copied"
        print(f"{verb} {done} session(s) to {target_spec.shown}; {refused} refused")
    return worst
