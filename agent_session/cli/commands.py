"""The read-only commands of ``agent-session`` (``show``, ``verify``, ``export``), ``convert``,
``import`` and ``rm``, over any store (:mod:`agent_session.stores`).

Each returns its exit code from the table in :mod:`agent_session.cli.exits`. The read-only ones
never write to the store (the tests compare bytes and modification times)."""

from __future__ import annotations

import argparse
import importlib
import json
import os
import shlex
import stat
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from agent_session.cli.exits import CORRUPT, OK, STATUS_CODES, NotFound, UserError
from agent_session.cli.output import Progress, json_line

if TYPE_CHECKING:
    from agent_session.see.inventory import Verdict
    from agent_session.see.lineage import Child
    from agent_session.session.persistence.api import Diagnosis
    from agent_session.session.persistence.service import SessionPersistence
    from agent_session.stores import StoreSpec

__all__ = [
    "MAX_LOG_BYTES_ENV",
    "backend",
    "check_exists",
    "convert",
    "diagnose",
    "examined",
    "export",
    "max_log_bytes",
    "open_backend",
    "rm",
    "show",
    "targets",
    "verify",
]

MAX_LOG_BYTES_ENV = "AGENT_SESSION_MAX_LOG_BYTES"
"""Environment variable: the largest log the commands read into memory (bytes)."""


def max_log_bytes() -> int:
    """The ``max_log_bytes`` of the commands' backends (see :data:`MAX_LOG_BYTES_ENV`)."""
    from agent_session.persistence_jsonl.reader import DEFAULT_MAX_LOG_BYTES

    limit = os.environ.get(MAX_LOG_BYTES_ENV, "")
    try:
        return int(limit) if limit else DEFAULT_MAX_LOG_BYTES
    except ValueError:
        raise UserError(f"{MAX_LOG_BYTES_ENV} must be a number of bytes, not {limit!r}") from None


def backend(store: StoreSpec, *, read_only: bool = False) -> SessionPersistence:
    """A backend on ``store``, which must exist (raises :class:`NotFound`); ``read_only`` for
    the commands that never write."""
    check_exists(store)
    return open_backend(store, read_only=read_only)


def open_backend(store: StoreSpec, *, read_only: bool = False) -> SessionPersistence:
    """A command's backend on ``store`` (created on its first write): a JSONL root reads logs
    up to :func:`max_log_bytes`; a SQLite database keeps the journal mode it has, and
    ``read_only`` opens it for reading only (a read command never creates, writes or
    checkpoints it, nor waits for a writer)."""
    if store.kind == "sqlite":
        return store.open(journal_mode=None, read_only=read_only)
    if store.kind == "jsonl":
        return store.open(max_log_bytes=max_log_bytes())
    return store.open()


def check_exists(store: StoreSpec) -> None:
    """Refuse a store that is not there (read commands never create a directory or a
    database file; a PostgreSQL database is asked when the command connects)."""
    if store.kind == "postgres":
        return
    what = "store root" if store.kind == "jsonl" else "session database"
    if not os.path.exists(store.path):
        raise NotFound(f'{what} "{store.path}" does not exist')
    if store.kind == "jsonl" and not os.path.isdir(store.path):
        raise UserError(f'store root "{store.path}" is not a directory')
    if store.kind == "sqlite" and os.path.isdir(store.path):
        raise UserError(f'session database "{store.path}" is a directory, not a file')
    if store.kind == "sqlite" and not stat.S_ISREG(os.stat(store.path).st_mode):
        raise UserError(f'session database "{store.path}" is not a regular file')


async def diagnose(store: SessionPersistence, where: StoreSpec, id: str) -> Diagnosis:
    """What ``store.examine`` says of a session (raises :class:`NotFound` naming the
    store)."""
    from agent_session.session import SessionNotFoundError

    try:
        return await store.diagnose(id)
    except SessionNotFoundError:
        raise NotFound(f'no session "{id}" in {where.shown}') from None


async def examined(where: StoreSpec, id: str) -> Diagnosis:
    """A read-only look at one session of the store ``where`` (see :func:`diagnose`)."""
    store = backend(where, read_only=True)
    try:
        return await diagnose(store, where, id)
    finally:
        await store.aclose()


async def examined_tree(where: StoreSpec, id: str) -> tuple[Diagnosis, list[Child]]:
    """:func:`examined`, with the child agents' sessions its calls ran (``see.lineage``)."""
    from agent_session.see.lineage import children_of

    store = backend(where, read_only=True)
    try:
        looked = await diagnose(store, where, id)
        return looked, await children_of(store, looked.session.events)
    finally:
        await store.aclose()


async def show(args: argparse.Namespace) -> int:
    """The transcript, the raw events, or (``--json``) the stored header line then the
    events."""
    from agent_session.see.inventory import over_budget, waiting
    from agent_session.see.lineage import children_of
    from agent_session.see.transcript import render
    from agent_session.session.events.parked import parked_calls

    store = backend(args.store, read_only=True)
    try:
        examined = await diagnose(store, args.store, args.id)
        raw = await store.read_raw(args.id) if args.json else None
        transcript = not (args.json or args.events)  # (what reads the children)
        children = await children_of(store, examined.session.events) if transcript else []
    finally:
        await store.aclose()
    stored, inspected = examined.stored_events, examined.session
    if raw is not None:  # the header line exactly as stored
        print(raw.content.split(b"\n", 1)[0].decode())
    if args.json or args.events:
        for event in inspected.events:
            print(event.encode().decode())
        return OK
    parent = inspected.header.parent_session
    if parent is not None and inspected.header.origin == "subagent":
        print(
            f"(session {args.id} is a subagent of {parent}, delegation depth "
            f"{inspected.header.delegation_depth}: `agent-session show "
            f"{shlex.quote(args.store.shown)} {shlex.quote(parent)}` shows it)\n"
        )
    elif parent is not None:
        print(
            f"(session {args.id} is a fork of {parent}: its first {inspected.header.seed_length} "
            f"events are {parent}'s; `agent-session show {shlex.quote(args.store.shown)} "
            f"{shlex.quote(parent)}` shows it)\n"
        )
    pending = stored if len(inspected.events) > stored else None
    if pending is not None and examined.writer_elsewhere:
        print(render(inspected.events[:stored], children=children))
        print(f"\n(session {args.id} is open: its last turn is still running in a live writer)")
        return OK
    print(render(inspected.events, pending_from=pending, children=children))
    parked = parked_calls(inspected.events)
    if parked:
        print(
            f"\n(session {args.id} is awaiting-approval: {waiting(parked)}; decide with "
            f"`agent-session approve|reject {args.store.shown} {args.id} CALL_ID`)"
        )
    budget = over_budget(inspected.events)
    if budget is not None:
        print(f"\n(session {args.id} is awaiting-budget: {budget})")
    if pending is not None:
        print(
            f"\n(session {args.id} is interrupted: the closers above are not on disk yet; "
            f"run `agent-session recover {args.store.shown} {args.id}`)"
        )
    return OK


def targets(args: argparse.Namespace) -> list[tuple[str, Verdict | None]]:
    """``(id, verdict)`` pairs: the named ids, or every entry of the store with the
    ``(status, detail)`` the listing already found for a problem entry."""
    from agent_session.see.inventory import rows

    if args.ids:
        return [(id, None) for id in args.ids]
    out: list[tuple[str, Verdict | None]] = []
    check_exists(args.store)
    for row in rows(args.store, max_log_bytes()):
        bad = row.problem_flag
        out.append((row.id, (bad, row.problem or "") if bad else None))
    return out


async def verify(args: argparse.Namespace) -> int:
    """A read-only verdict per session and a summary; the exit code of the worst."""
    from agent_session.see.inventory import status_of

    store = backend(args.store, read_only=True)
    worst = OK
    counts: dict[str, int] = {}
    try:
        todo = targets(args)
        progress = Progress(len(todo), "verified")
        for index, (id, found) in enumerate(todo, start=1):
            status, detail = found or await status_of(store, id)
            counts[status] = counts.get(status, 0) + 1
            worst = max(worst, STATUS_CODES.get(status, CORRUPT))
            if args.json:
                progress.say(json_line({"id": id, "state": status, "detail": detail}))
            else:
                progress.say(f"{id}: {status} — {detail}")
            progress.step(index)
        progress.clear()
    finally:
        await store.aclose()
    if not args.json:
        summary = ", ".join(f"{n} {status}" for status, n in sorted(counts.items()))
        print(f"verified {sum(counts.values())} session(s): {summary or 'none'}")
    return worst


async def convert(args: argparse.Namespace) -> int:
    """Rewrite a stopped session's log into the other encoding."""
    from agent_session.persistence_jsonl import JsonlPersistence
    from agent_session.persistence_jsonl.convert import convert as rewrite
    from agent_session.session import SessionNotFoundError

    store = backend(args.store)
    try:
        if not isinstance(store, JsonlPersistence):
            kind = "SQLite" if args.store.kind == "sqlite" else "PostgreSQL"
            raise UserError(
                f"convert rewrites JSONL logs; a {kind} database has no per-session encoding "
                "(use `agent-session copy` to move sessions between stores)"
            )
        done = await rewrite(store.jsonl, args.id, args.to)
    except SessionNotFoundError:
        raise NotFound(f'no session "{args.id}" in {args.store.shown}') from None
    finally:
        await store.aclose()
    if done.old is None:
        print(f"{args.id}: already {os.path.basename(done.new)}; nothing to do")
    else:
        print(
            f"{args.id}: {os.path.basename(done.old)} -> {os.path.basename(done.new)} "
            f"({done.plain_bytes:,} bytes of JSONL in {done.stored_bytes:,} bytes)"
        )
    return OK


async def export(args: argparse.Namespace) -> int:
    """The derived history as a provider request, after checking every tool call has
    exactly one result (indented; one compact line with ``--json``)."""
    from agent_session.interchange.export import (
        TranscriptError,
        check_transcript,
        to_anthropic,
        to_openai,
    )
    from agent_session.session import Session
    from agent_session.session.events.compaction import uncompacted
    from agent_session.session.events.types import REQUEST_HEADER

    store = backend(args.store, read_only=True)
    try:
        examined = await diagnose(store, args.store, args.id)
    finally:
        await store.aclose()
    stored, inspected = examined.stored_events, examined.session
    events = redacted(args, inspected.events)
    if len(inspected.events) > stored:
        print(
            f"agent-session: note: session {args.id} is interrupted; exporting it with its "
            "in-memory repair (run `agent-session recover` to make the repair durable)",
            file=sys.stderr,
        )
    if args.format == "claude-code":
        from agent_session.cli.claude_code import export_claude_code

        export_claude_code(args.id, events)
        return OK
    seeded = Session.create(args.id, seed=events)  # validated once, for every format
    messages = uncompacted(events) if args.whole else seeded.derive_messages()
    headers = [e for e in events if e.type == REQUEST_HEADER]
    system = headers[-1].data["header"].get("system") if headers else None
    try:
        check_transcript(messages)
    except TranscriptError as e:
        print(f"agent-session: error: {args.id} cannot be exported: {e}", file=sys.stderr)
        return CORRUPT
    if args.format == "openai":
        document: Any = {"messages": to_openai(messages, system)}
    elif args.format == "anthropic":
        document = to_anthropic(messages, system)
    else:
        document = json.loads(_integration("pydantic_ai", "pydantic-ai").export_messages(seeded))
    if args.json:
        print(json_line(document))
    else:
        print(json.dumps(document, ensure_ascii=False, indent=2))
    return OK


def redacted(args: argparse.Namespace, events: Sequence[Any]) -> Sequence[Any]:
    """``events`` as ``--redact``'s rules rewrite them for a sink (the log is not changed)."""
    from agent_session.governance.redaction import redaction

    rules = redaction(getattr(args, "redact", None))
    return events if rules is None else rules.events(events)


def _integration(name: str, extra: str) -> Any:
    """The integration module ``name``, or a usage error naming the extra it needs."""
    try:
        return importlib.import_module(f"agent_session.integrations.{name}")
    except ImportError as e:
        raise UserError(
            f"the {extra} format needs the {extra} extra: pip install "
            f"'agent-session-runtime[{extra}]' ({e})"
        ) from None


async def import_history(args: argparse.Namespace) -> int:
    """Create a session from a pydantic-ai history or an ADK session database (checked whole
    before anything is written; an existing id is refused)."""
    from agent_session.session import Runtime, SessionNotFoundError

    if args.format == "adk":
        importing = _integration("google_adk.importing", "google-adk")
        return int(await importing.import_command(args.store, args.file, args.id))
    if args.format == "claude-code":
        from agent_session.cli.claude_code import import_claude_code

        return await import_claude_code(args)
    integration = _integration("pydantic_ai", "pydantic-ai")
    if args.file == "-":
        document = sys.stdin.buffer.read()
    else:
        with open(args.file, "rb") as file:
            document = file.read()
    try:  # checked whole before anything is written
        messages = integration.parse_history(document)
    except ValueError as e:  # pydantic's ValidationError, SessionEventError
        first = str(e).splitlines()[:3]
        raise UserError(
            f"{args.file} is not a pydantic-ai history this build can import: " + " / ".join(first),
            code=CORRUPT,
        ) from None
    store = open_backend(args.store)  # created if missing, like copy's DST
    async with Runtime() as runtime:
        runtime.install(store)
        try:
            await store.inspect(args.id)
        except SessionNotFoundError:
            pass
        else:
            print(
                f"agent-session: error: session {args.id} exists in {args.store.shown}",
                file=sys.stderr,
            )
            return CORRUPT
        session = runtime.sessions.create(args.id)
        count = integration.append_history(session, messages)
        await runtime.sessions.flush(session)
    print(f"imported {count} messages into {args.id} ({session.seq} events) in {args.store.shown}")
    return OK


def _kept_for(store: StoreSpec, id: str, force: bool, with_subagents: bool) -> list[str]:
    """Refuse to delete ``id`` while it is a conversation's current branch, (unless
    ``force``) while forks of it are stored, or (unless ``with_subagents``) while its child
    agents' sessions are, naming them; return those (theirs first: the order to delete)."""
    from agent_session.lineage.current import branches_for
    from agent_session.see.inventory import rows, subagent_trees

    pointers = branches_for(store, read_only=True)
    try:
        of = [c for c, branch in pointers.all().items() if branch == id]
    finally:
        pointers.close()
    if of:
        raise UserError(
            f"{id} is the current branch of {', '.join(of)} in {store.shown}: rewind the "
            "conversation first (its new branch becomes current); nothing was deleted"
        )
    listed = list(rows(store, max_log_bytes()))
    forks = [row.id for row in listed if row.parent == id and row.origin != "subagent"]
    if forks and not force:
        raise UserError(
            f"{id} has {len(forks)} fork(s) in {store.shown} ({', '.join(sorted(forks)[:5])}"
            f"{', ...' if len(forks) > 5 else ''}); nothing was deleted. --force deletes it "
            "anyway: each fork keeps its own copy of what it was seeded with"
        )
    subagents = subagent_trees(listed).get(id, [])
    if subagents and not with_subagents:
        raise UserError(
            f"{id} has {len(subagents)} subagent session(s) in {store.shown} "
            f"({', '.join(subagents[:5])}{', ...' if len(subagents) > 5 else ''}); nothing was "
            "deleted. --with-subagents deletes them with it"
        )
    return subagents


async def rm(args: argparse.Namespace) -> int:
    """Delete a stopped session durably (refused while a writer holds it, while it is a
    conversation's current branch, unless ``--force`` while forks of it are stored, and
    unless ``--with-subagents`` while its child agents' sessions are: then they go first)."""
    from agent_session.session import SessionNotFoundError

    subagents = _kept_for(args.store, args.id, args.force, args.with_subagents)
    store = backend(args.store)
    try:
        for id in [*subagents, args.id]:  # (a hold anywhere in the tree: nothing is deleted)
            await store.refuse_held(id)
        for id in subagents:
            await store.delete(id)
            print(f"deleted subagent session {id} from {args.store.shown}")
        await store.delete(args.id)
    except SessionNotFoundError:
        raise NotFound(f'no session "{args.id}" in {args.store.shown}') from None
    finally:
        await store.aclose()
    print(f"deleted {args.id} from {args.store.shown}")
    return OK
