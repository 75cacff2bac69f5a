"""The commands that branch sessions: ``fork`` and ``rewind`` (and ``replay`` and ``diff``,
which re-run one and compare two)."""

from __future__ import annotations

import argparse
import contextlib
import shlex
from collections.abc import Iterator
from typing import Any

from agent_session.cli.exits import NEEDS_RECOVERY, OK, USAGE, NotFound, UserError
from agent_session.cli.output import json_line, say

__all__ = ["diff", "fork", "replay", "rewind"]


@contextlib.contextmanager
def _refused(store: str) -> Iterator[None]:
    """A refused fork as the command's error: a missing session is not found (3), a boundary
    the log cannot be forked at a usage error (4); another store's refusal goes as it is."""
    from agent_session.session import SessionForkError, SessionReplayError

    try:
        yield
    except (SessionForkError, SessionReplayError) as e:
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
    say(
        args.json,
        said,
        f"forked {args.id} into {forked.id} in {args.store.shown}: its first "
        f"{forked.seed_length} events (the parent is unchanged)",
    )
    return OK


async def rewind(args: argparse.Namespace) -> int:
    """Fork a conversation's current branch after a turn and make the fork current."""
    from agent_session.lineage.rewind import rewind_session

    with _refused(args.store.shown):
        forked = await rewind_session(args.store, args.id, turn=args.turn, new_id=args.new_id)
    said = {"conversation": args.id, "current": forked.id, "left": forked.parent}
    say(
        args.json,
        said,
        f"rewound {args.id} to the end of turn {args.turn}: its current branch is now "
        f"{forked.id} ({forked.parent} stays as it was)",
    )
    return OK


async def replay(args: argparse.Namespace) -> int:
    """Replay a recorded session into a new one, model and tools served from its log."""
    from agent_session.cli.commands import backend
    from agent_session.lineage.replay import replay_session

    store = backend(args.store)
    try:
        with _refused(args.store.shown):
            done = await replay_session(store, args.id, to=args.to)
    finally:
        await store.aclose()
    said = {"id": done.id, "source": done.source, "answers": done.answers, "modelCalls": 0}
    if args.json:
        print(json_line({**said, "toolBodies": done.tool_bodies}))
    else:
        print(
            f"replayed {args.id} into {done.id} in {args.store.shown}: {done.answers} model "
            f"answers served from the log, no model called, no tool body run\n"
            f"compare them: agent-session diff {shlex.quote(args.store.shown)} "
            f"{shlex.quote(args.id)} {shlex.quote(done.id)}"
        )
    return OK


async def diff(args: argparse.Namespace) -> int:
    """Where two sessions first differ in behaviour, then in text; exit 1 on a divergence."""
    from agent_session.cli.commands import backend, diagnose
    from agent_session.lineage.diff import compare

    store = backend(args.store, read_only=True)
    try:
        a = (await diagnose(store, args.store, args.a)).session.events
        b = (await diagnose(store, args.store, args.b)).session.events
    finally:
        await store.aclose()
    found = compare(a, b)
    if args.json:
        shown = {
            "sameBehaviour": found.same_behaviour,
            "toolCalls": found.calls,
            "toolResults": found.results,
            "behaviour": _json(found.behaviour),
            "text": _json(found.text),
        }
        print(json_line(shown))
        return OK if found.same_behaviour else NEEDS_RECOVERY
    if found.behaviour is None:
        print(
            f"same behaviour: {found.calls} tool calls and {found.results} results alike in "
            f"{args.a} and {args.b}"
        )
    else:
        print(_said(found.behaviour, args.a, args.b, "diverged"))
    if found.text is not None:
        print(_said(found.text, args.a, args.b, "text differs"))
    return OK if found.same_behaviour else NEEDS_RECOVERY


def _json(found: Any) -> Any:
    if found is None:
        return None
    return {
        "kind": found.kind,
        "index": found.index,
        "seqs": list(found.seqs),
        "where": found.where,
        "said": list(found.said),
    }


def _said(found: Any, a: str, b: str, what: str) -> str:
    seq_a, seq_b = (str(s) if s is not None else "-" for s in found.seqs)
    left, right = (s if s is not None else "(none)" for s in found.said)
    return (
        f"{what} at {found.kind} {found.index + 1} ({found.where}; seq {seq_a} in {a}, "
        f"{seq_b} in {b}):\n  {a}: {left}\n  {b}: {right}"
    )
