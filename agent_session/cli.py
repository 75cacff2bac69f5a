"""The ``agent-session`` command line: run the demo; inspect, verify, recover and export
stores of JSONL session logs."""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, NoReturn

from agent_session.exits import (
    CORRUPT,
    IO_ERROR,
    NOT_FOUND,
    STATUS_CODES,
    USAGE,
    NotFound,
    UserError,
)
from session import (
    Session,
    SessionError,
    SessionNotFoundError,
    __version__,
)
from session.events.types import REQUEST_HEADER
from session.persistence.coordinator import Examination

if TYPE_CHECKING:
    from agent_session.inventory import Verdict
    from persistence_jsonl import JsonlPersistence

__all__ = ["main"]


class _Parser(argparse.ArgumentParser):
    """argparse, exiting with the usage code of the table in ``agent_session.exits``."""

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(USAGE, f"{self.prog}: error: {message}\n")


def _root(path: str) -> str:
    if not os.path.exists(path):
        raise NotFound(f'store root "{path}" does not exist')
    if not os.path.isdir(path):
        raise UserError(f'store root "{path}" is not a directory')
    return path


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="agent-session",
        description="Run the crash-safe session stack; inspect, verify, recover and export "
        "stores of JSONL session logs.",
    )
    parser.add_argument("--version", action="version", version=f"agent-session {__version__}")
    parser.add_argument("--debug", action="store_true", help="show tracebacks for errors")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    demo = commands.add_parser(
        "demo",
        help="run the whole stack through a real crash and recovery",
        description="Run a scripted agent on the JSONL backend with the checkpoint policy, "
        "SIGKILL it at a failpoint in its last turn, then recover, resume and "
        "continue the session.",
    )
    demo.add_argument(
        "--root", default="./agent-sessions", help="store root (default: ./agent-sessions)"
    )
    demo.add_argument(
        "--crash",
        default="tool",
        choices=["none", "request", "tool", "parallel-tool", "midstream"],
        help="where the last turn dies (default: tool)",
    )
    demo.add_argument(
        "--turns", type=int, default=2, help="turns to run, the last one crashing (default: 2)"
    )
    demo.add_argument("--session-id", help="session id (default: demo-<random>)")
    demo.add_argument("--no-recover", action="store_true", help="stop after the crash")
    demo.add_argument("--json", action="store_true", help="print a JSON summary instead")

    ls = commands.add_parser(
        "ls",
        help="list the sessions of a store",
        description="One row per session: id, cwd, created, events, "
        "last turn state, size, and flags.",
    )
    ls.add_argument("root")
    ls.add_argument("--json", action="store_true", help="one JSON object per line")

    show = commands.add_parser(
        "show",
        help="print a session's transcript",
        description="The human transcript of a session (read-only; "
        "repaired tool results are flagged).",
    )
    show.add_argument("root")
    show.add_argument("id")
    group = show.add_mutually_exclusive_group()
    group.add_argument("--events", action="store_true", help="the raw event list")
    group.add_argument(
        "--json",
        action="store_true",
        help="JSON lines: the header, then the events as inspect returns them",
    )

    verify = commands.add_parser(
        "verify",
        help="check sessions without writing",
        description="Read-only check. Exit 0 when every session is balanced, 1 when some need "
        "recovery (interrupted or torn tail), 2 when any is corrupt or "
        "unsupported.",
    )
    verify.add_argument("root")
    verify.add_argument("ids", nargs="*", metavar="ID")

    recover = commands.add_parser(
        "recover",
        help="durably repair interrupted or torn sessions",
        description="Close every interrupted turn and cut every torn tail (a cold load of each "
        "such session). Idempotent. Exit 2 if corrupt or unsupported logs remain.",
    )
    recover.add_argument("root")
    recover.add_argument("ids", nargs="*", metavar="ID")

    export = commands.add_parser(
        "export",
        help="print a session's history as a provider request",
        description="The derived message history in a provider's request shape, after "
        "checking that every tool call has exactly one result.",
    )
    export.add_argument("root")
    export.add_argument("id")
    export.add_argument("--format", required=True, choices=["openai", "anthropic"])
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the process exit code."""
    parser = _parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 0
    try:
        return asyncio.run(_dispatch(args))
    except (UserError, SessionError, OSError, ValueError) as e:
        if args.debug:
            raise
        print(f"agent-session: error: {e}", file=sys.stderr)
        return _exit_code(e)
    except KeyboardInterrupt:
        return 130


def _exit_code(error: Exception) -> int:
    """The code of the table in ``agent_session.exits`` for an error that ends a command."""
    if isinstance(error, UserError):
        return error.code
    if isinstance(error, SessionNotFoundError):
        return NOT_FOUND
    if isinstance(error, OSError):
        return IO_ERROR
    if isinstance(error, ValueError) and not isinstance(error, SessionError):
        return USAGE  # e.g. an id no store can name
    return CORRUPT


async def _dispatch(args: argparse.Namespace) -> int:
    if args.command == "demo":
        from agent_session.demo import run_demo

        if args.turns < 1:
            raise UserError("--turns must be at least 1")
        return await run_demo(
            sys.stdout,
            root=args.root,
            crash=args.crash,
            turns=args.turns,
            session_id=args.session_id,
            recover=not args.no_recover,
            as_json=args.json,
        )
    handlers = {"ls": _ls, "show": _show, "verify": _verify, "recover": _recover, "export": _export}
    return await handlers[args.command](args)


MAX_LOG_BYTES_ENV = "AGENT_SESSION_MAX_LOG_BYTES"
"""Environment variable: the largest log the commands read into memory (bytes)."""


def _max_log_bytes() -> int:
    from persistence_jsonl.reader import DEFAULT_MAX_LOG_BYTES

    limit = os.environ.get(MAX_LOG_BYTES_ENV, "")
    try:
        return int(limit) if limit else DEFAULT_MAX_LOG_BYTES
    except ValueError:
        raise UserError(f"{MAX_LOG_BYTES_ENV} must be a number of bytes, not {limit!r}") from None


def _backend(root: str) -> JsonlPersistence:
    from persistence_jsonl import JsonlPersistence

    return JsonlPersistence(_root(root), max_log_bytes=_max_log_bytes())


def _created(ms: int | None) -> str:
    if ms is None:
        return "-"
    moment = datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC)
    return moment.strftime("%Y-%m-%d %H:%M:%S")


async def _ls(args: argparse.Namespace) -> int:
    from agent_session.inventory import rows

    found = False
    table: list[list[str]] = []
    for row in rows(_root(args.root), _max_log_bytes()):
        found = True
        if args.json:
            print(json.dumps(row.to_json(), ensure_ascii=False))
            continue
        table.append(
            [
                row.id,
                row.cwd or "-",
                _created(row.created_at),
                str(row.events),
                row.state,
                str(row.size),
                ", ".join(row.flags),
            ]
        )
    if not args.json:
        if not found:
            print("no sessions")
            return 0
        header = ["ID", "CWD", "CREATED (UTC)", "EVENTS", "LAST TURN", "BYTES", "FLAGS"]
        widths = [max(len(r[i]) for r in [header, *table]) for i in range(len(header))]
        for line in [header, *table]:
            print(
                "  ".join(
                    cell.ljust(width) for cell, width in zip(line, widths, strict=True)
                ).rstrip()
            )
    return 0


async def _inspect(root: str, id: str) -> Examination:
    """What ``examine`` says of a session (raises :class:`NotFound`)."""
    try:
        return await _backend(root).examine(id)
    except SessionNotFoundError:
        raise NotFound(f'no session "{id}" in {root}') from None


async def _show(args: argparse.Namespace) -> int:
    from agent_session.transcript import render

    examined = await _inspect(args.root, args.id)
    stored, inspected = examined.stored_events, examined.session
    if args.json:
        print(json.dumps(inspected.header.to_json(), ensure_ascii=False))
        for event in inspected.events:
            print(event.encode().decode())
        return 0
    if args.events:
        for event in inspected.events:
            print(event.encode().decode())
        return 0
    pending = stored if len(inspected.events) > stored else None
    if pending is not None and examined.writer_elsewhere:
        print(render(inspected.events[:stored]))
        print(f"\n(session {args.id} is open: its last turn is still running in a live writer)")
        return 0
    print(render(inspected.events, pending_from=pending))
    if pending is not None:
        print(
            f"\n(session {args.id} is interrupted: the closers above are not on disk yet; "
            f"run `agent-session recover {args.root} {args.id}`)"
        )
    return 0


async def _targets(args: argparse.Namespace) -> list[tuple[str, Verdict | None]]:
    """``(id, verdict)`` pairs: the named ids, or every session of the store with the
    ``(status, detail)`` the listing already found for a corrupt or unsupported one."""
    from agent_session.inventory import rows

    if args.ids:
        return [(id, None) for id in args.ids]
    out: list[tuple[str, Verdict | None]] = []
    for row in rows(_root(args.root), _max_log_bytes()):
        bad = next((f for f in row.flags if f in ("corrupt", "unsupported")), None)
        out.append((row.id, (bad, row.problem or "") if bad else None))
    return out


async def _verify(args: argparse.Namespace) -> int:
    from agent_session.inventory import status_of

    backend = _backend(args.root)
    worst = 0
    counts: dict[str, int] = {}
    for id, found in await _targets(args):
        status, detail = found or await status_of(backend, id)
        counts[status] = counts.get(status, 0) + 1
        print(f"{id}: {status} — {detail}")
        worst = max(worst, STATUS_CODES.get(status, CORRUPT))
    summary = ", ".join(f"{n} {status}" for status, n in sorted(counts.items()))
    print(f"verified {sum(counts.values())} session(s): {summary or 'none'}")
    return worst


async def _recover(args: argparse.Namespace) -> int:
    from agent_session.recover import recover

    backend = _backend(args.root)
    try:
        return await recover(backend, await _targets(args))
    finally:
        await backend.aclose()


async def _export(args: argparse.Namespace) -> int:
    from agent_session.export import TranscriptError, check_transcript, to_anthropic, to_openai

    examined = await _inspect(args.root, args.id)
    stored, inspected = examined.stored_events, examined.session
    if len(inspected.events) > stored:
        print(
            f"agent-session: note: session {args.id} is interrupted; exporting it with its "
            "in-memory repair (run `agent-session recover` to make the repair durable)",
            file=sys.stderr,
        )
    session = Session.create(args.id, seed=inspected.events)
    messages = session.derive_messages()
    headers = [e for e in inspected.events if e.type == REQUEST_HEADER]
    system = headers[-1].data["header"].get("system") if headers else None
    try:
        check_transcript(messages)
    except TranscriptError as e:
        print(f"agent-session: error: {args.id} cannot be exported: {e}", file=sys.stderr)
        return CORRUPT
    if args.format == "openai":
        print(json.dumps({"messages": to_openai(messages, system)}, ensure_ascii=False, indent=2))
    else:
        print(json.dumps(to_anthropic(messages, system), ensure_ascii=False, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
