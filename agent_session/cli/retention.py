"""``purge``, ``hold``, ``release`` and ``erase``: retention, legal holds and erasure on a
store (:mod:`agent_session.governance`)."""

from __future__ import annotations

import argparse
from collections.abc import Awaitable, Callable

from agent_session.cli.exits import CORRUPT, NOT_FOUND, OK, UserError
from agent_session.cli.output import say, say_action
from agent_session.session import (
    SessionCollisionError,
    SessionError,
    SessionNotFoundError,
)

__all__ = ["erase", "hold", "purge", "release"]


async def purge(args: argparse.Namespace) -> int:
    """Purge and report each session; exits 2 when one was kept for a hold, a writer or a
    branch."""
    from agent_session.cli.commands import backend, check_exists
    from agent_session.governance.retention import purge as run

    check_exists(args.store)
    store = backend(args.store)
    try:
        done, where = await run(
            args.store,
            store,
            older_than_ms=args.older_than,
            labels=dict(args.label),
            dry_run=args.dry_run,
        )
    finally:
        await store.aclose()
    for item in done:
        say_action(args.json, item.id, item.action, item.detail)
    kept = [item for item in done if item.action in ("held", "live", "current branch")]
    if not args.json:
        gone = sum(item.action == "purged" for item in done)
        if args.dry_run:
            would = sum(item.action == "would purge" for item in done)
            print(f"would purge {would} session(s); {len(kept)} kept; nothing was deleted")
        else:
            print(f"purged {gone} session(s); {len(kept)} kept; receipts in {where}")
    return CORRUPT if kept else OK


async def _targets(args: argparse.Namespace) -> list[str]:
    """The ids named, or every stored session labelled ``--label``."""
    from agent_session.cli.commands import backend
    from agent_session.governance.labels import labels_in_lines

    if bool(args.ids) == bool(args.label):
        raise UserError("name the sessions, or give --label K=V (one of the two)")
    if args.ids:
        return list(args.ids)
    key, value = args.label
    store = backend(args.store, read_only=True)
    try:
        found = []
        for header in await store.list_headers():
            raw = await store.read_raw(header.id)
            if raw is not None and labels_in_lines(raw.content).get(key) == value:
                found.append(header.id)
    finally:
        await store.aclose()
    if not found:
        raise UserError(f"no session of {args.store.shown} is labelled {key}={value}")
    return found


async def _each(
    args: argparse.Namespace, act: Callable[[str, str], Awaitable[str]], done: str
) -> int:
    """``act(id, by)`` on each target, reporting ``done`` with what it returns; exits with
    the worst outcome (3 for an id not stored, 2 for one refused)."""
    from agent_session.cli.commands import check_exists
    from agent_session.deciders import who

    check_exists(args.store)
    worst = OK
    for id in await _targets(args):
        try:
            detail = await act(id, args.by or who())
        except SessionNotFoundError as e:
            worst = max(worst, NOT_FOUND)
            say_action(args.json, id, "not found", str(e))
        except (SessionError, ValueError) as e:
            worst = max(worst, CORRUPT)
            live = isinstance(e, SessionCollisionError)
            say_action(args.json, id, "live" if live else "kept", str(e))
        else:
            say_action(args.json, id, done, detail)
    return worst


async def hold(args: argparse.Namespace) -> int:
    """Place a hold on each target."""
    from agent_session.governance.holds import place_hold

    async def act(id: str, by: str) -> str:
        await place_hold(args.store, id, args.reason, by=by)
        return str(args.reason)

    return await _each(args, act, "held")


async def release(args: argparse.Namespace) -> int:
    """Release the holds of each target."""
    from agent_session.governance.holds import release_hold

    async def act(id: str, by: str) -> str:
        gone = await release_hold(args.store, id, args.reason, seqs=args.hold, by=by)
        return f"{', '.join(f'seq {hold.seq}' for hold in gone)}: {args.reason}"

    return await _each(args, act, "released")


async def erase(args: argparse.Namespace) -> int:
    """Erase each sealed session; exits with the worst outcome."""
    from agent_session.cli.commands import backend, check_exists
    from agent_session.governance.erasure import erase as run
    from agent_session.sealing.keyring import KEYRING_ENV, keyring_from_env

    check_exists(args.store)
    keyring = keyring_from_env()
    if keyring is None:
        raise UserError(f"erase needs the keyring: set {KEYRING_ENV} to its directory")
    store = backend(args.store)
    worst = OK
    try:
        for id in args.ids:
            try:
                receipt, where = await run(args.store, store, id, keyring)
            except SessionNotFoundError as e:
                worst = max(worst, NOT_FOUND)
                say_action(args.json, id, "not found", str(e))
            except SessionError as e:
                worst = max(worst, CORRUPT)
                say_action(args.json, id, "kept", str(e))
            else:
                text = f"{id}: erased — key(s) {', '.join(receipt['keys'])}; receipt in {where}"
                say(args.json, receipt, text)
    finally:
        await store.aclose()
    return worst
