"""The read-only commands of ``agent-session``: ``ls``, ``show``, ``verify`` and ``export``.

Each returns its exit code from the table in :mod:`agent_session.exits`. None of them writes
to the store (the tests compare bytes and modification times)."""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
from typing import TYPE_CHECKING

from agent_session.exits import CORRUPT, OK, STATUS_CODES, NotFound, UserError
from agent_session.output import Progress, json_line

if TYPE_CHECKING:
    from agent_session.inventory import Verdict
    from persistence_jsonl import JsonlPersistence
    from session.persistence.coordinator import Examination

__all__ = [
    "MAX_LOG_BYTES_ENV",
    "backend",
    "convert",
    "examine",
    "export",
    "ls",
    "max_log_bytes",
    "show",
    "store_root",
    "targets",
    "verify",
]

MAX_LOG_BYTES_ENV = "AGENT_SESSION_MAX_LOG_BYTES"
"""Environment variable: the largest log the commands read into memory (bytes)."""


def store_root(path: str) -> str:
    """``path`` if it names a directory (raises :class:`NotFound` or :class:`UserError`)."""
    if not os.path.exists(path):
        raise NotFound(f'store root "{path}" does not exist')
    if not os.path.isdir(path):
        raise UserError(f'store root "{path}" is not a directory')
    return path


def max_log_bytes() -> int:
    """The ``max_log_bytes`` of the commands' backends (see :data:`MAX_LOG_BYTES_ENV`)."""
    from persistence_jsonl.reader import DEFAULT_MAX_LOG_BYTES

    limit = os.environ.get(MAX_LOG_BYTES_ENV, "")
    try:
        return int(limit) if limit else DEFAULT_MAX_LOG_BYTES
    except ValueError:
        raise UserError(f"{MAX_LOG_BYTES_ENV} must be a number of bytes, not {limit!r}") from None


def backend(root: str) -> JsonlPersistence:
    """A backend on the store ``root`` (which must exist)."""
    from persistence_jsonl import JsonlPersistence

    return JsonlPersistence(store_root(root), max_log_bytes=max_log_bytes())


def _created(ms: int | None) -> str:
    if ms is None:
        return "-"
    moment = datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC)
    return moment.strftime("%Y-%m-%d %H:%M:%S")


async def ls(args: argparse.Namespace) -> int:
    """One row per entry of the store; a problem entry (corrupt, unsupported, unreadable) is
    listed with its reason, and sets the exit code."""
    from agent_session.inventory import rows

    worst = OK
    table: list[list[str]] = []
    problems: list[str] = []
    for row in rows(store_root(args.root), max_log_bytes()):
        bad = row.problem_flag
        if bad is not None:
            worst = max(worst, STATUS_CODES.get(bad, CORRUPT))
            problems.append(f"{row.id}: {bad} — {row.problem}")
        if args.json:
            print(json_line(row.to_json()))
            continue
        cells = [row.id, row.cwd or "-", _created(row.created_at), str(row.events), row.state]
        log = "zstd" if row.compression == "zstd" else "jsonl"
        table.append([*cells, log, str(row.size), ", ".join(row.flags)])
    if args.json:
        return worst
    if not table:
        print("no sessions")
        return OK
    header = ["ID", "CWD", "CREATED (UTC)", "EVENTS", "LAST TURN", "LOG", "BYTES", "FLAGS"]
    widths = [max(len(r[i]) for r in [header, *table]) for i in range(len(header))]
    for line in [header, *table]:
        print("  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)).rstrip())
    if problems:
        print(f"\n{len(problems)} problem entr{'y' if len(problems) == 1 else 'ies'}:")
        for problem in problems:
            print(f"  {problem}")
    return worst


async def examine(store: JsonlPersistence, root: str, id: str) -> Examination:
    """What ``store.examine`` says of a session (raises :class:`NotFound` naming ``root``)."""
    from session import SessionNotFoundError

    try:
        return await store.examine(id)
    except SessionNotFoundError:
        raise NotFound(f'no session "{id}" in {root}') from None


async def show(args: argparse.Namespace) -> int:
    """The transcript, the raw events, or (``--json``) the stored header line then the
    events."""
    from agent_session.transcript import render

    store = backend(args.root)
    examined = await examine(store, args.root, args.id)
    stored, inspected = examined.stored_events, examined.session
    if args.json:
        raw = await store.read_raw(args.id)
        if raw is not None:  # the header line exactly as stored
            print(raw.content.split(b"\n", 1)[0].decode())
    if args.json or args.events:
        for event in inspected.events:
            print(event.encode().decode())
        return OK
    pending = stored if len(inspected.events) > stored else None
    if pending is not None and examined.writer_elsewhere:
        print(render(inspected.events[:stored]))
        print(f"\n(session {args.id} is open: its last turn is still running in a live writer)")
        return OK
    print(render(inspected.events, pending_from=pending))
    if pending is not None:
        print(
            f"\n(session {args.id} is interrupted: the closers above are not on disk yet; "
            f"run `agent-session recover {args.root} {args.id}`)"
        )
    return OK


def targets(args: argparse.Namespace) -> list[tuple[str, Verdict | None]]:
    """``(id, verdict)`` pairs: the named ids, or every entry of the store with the
    ``(status, detail)`` the listing already found for a problem entry."""
    from agent_session.inventory import rows

    if args.ids:
        return [(id, None) for id in args.ids]
    out: list[tuple[str, Verdict | None]] = []
    for row in rows(store_root(args.root), max_log_bytes()):
        bad = row.problem_flag
        out.append((row.id, (bad, row.problem or "") if bad else None))
    return out


async def verify(args: argparse.Namespace) -> int:
    """A read-only verdict per session and a summary; the exit code of the worst."""
    from agent_session.inventory import status_of

    store = backend(args.root)
    worst = OK
    counts: dict[str, int] = {}
    todo = targets(args)
    progress = Progress(len(todo), "verified")
    for index, (id, found) in enumerate(todo, start=1):
        status, detail = found or await status_of(store, id)
        counts[status] = counts.get(status, 0) + 1
        worst = max(worst, STATUS_CODES.get(status, CORRUPT))
        if args.json:
            progress.say(json_line({"id": id, "status": status, "detail": detail}))
        else:
            progress.say(f"{id}: {status} — {detail}")
        progress.step(index)
    progress.clear()
    if not args.json:
        summary = ", ".join(f"{n} {status}" for status, n in sorted(counts.items()))
        print(f"verified {sum(counts.values())} session(s): {summary or 'none'}")
    return worst


async def convert(args: argparse.Namespace) -> int:
    """Rewrite a stopped session's log into the other encoding."""
    from persistence_jsonl.convert import convert as rewrite
    from session import SessionNotFoundError

    store = backend(args.root)
    try:
        done = await rewrite(store.jsonl, args.id, args.to)
    except SessionNotFoundError:
        raise NotFound(f'no session "{args.id}" in {args.root}') from None
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
    from agent_session.export import TranscriptError, check_transcript, to_anthropic, to_openai
    from session import Session
    from session.events.types import REQUEST_HEADER

    examined = await examine(backend(args.root), args.root, args.id)
    stored, inspected = examined.stored_events, examined.session
    if len(inspected.events) > stored:
        print(
            f"agent-session: note: session {args.id} is interrupted; exporting it with its "
            "in-memory repair (run `agent-session recover` to make the repair durable)",
            file=sys.stderr,
        )
    messages = Session.create(args.id, seed=inspected.events).derive_messages()
    headers = [e for e in inspected.events if e.type == REQUEST_HEADER]
    system = headers[-1].data["header"].get("system") if headers else None
    try:
        check_transcript(messages)
    except TranscriptError as e:
        print(f"agent-session: error: {args.id} cannot be exported: {e}", file=sys.stderr)
        return CORRUPT
    if args.format == "openai":
        document = {"messages": to_openai(messages, system)}
    else:
        document = to_anthropic(messages, system)
    if args.json:
        print(json_line(document))
    else:
        print(json.dumps(document, ensure_ascii=False, indent=2))
    return OK
