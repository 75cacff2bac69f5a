"""The ``agent-session`` command line's entry point: parse (``agent_session.cli.arguments``), run
the command, and map every error to an exit code of ``agent_session.cli.exits``.

Startup imports only the standard library: the session stack (and pydantic's model building)
loads when a command needs it, so ``--help`` and ``--version`` are fast and a Ctrl-C at any
moment ends the command with one line."""

from __future__ import annotations

import argparse
import asyncio
import io
import os
import sys
from collections.abc import Sequence

from agent_session.cli.arguments import STORE_COMMANDS, parser, resolve_store
from agent_session.cli.exits import (
    CORRUPT,
    INTERRUPTED,
    IO_ERROR,
    NOT_FOUND,
    STDOUT_CLOSED,
    UNEXPECTED,
    USAGE,
    UserError,
)

__all__ = ["main"]

_MACHINE_OUTPUT = frozenset({"export"})
"""The commands whose output is a format for programs (JSON, a provider's request), written
exactly; every other command's lines (and any command's ``--json`` lines, which escape
controls as JSON does) are for a person."""


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the process exit code (the table in ``agent_session.cli.exits``)."""
    _tolerate_any_stdout_encoding()
    grammar = parser()
    args = grammar.parse_args(argv)
    if args.command is None:
        grammar.print_help()
        return 0
    if not getattr(args, "json", False) and args.command not in _MACHINE_OUTPUT:
        from agent_session.cli.output import ShownText

        sys.stdout = ShownText(sys.stdout)
    try:
        if args.command in ("verify", "export", "budget", "sign", "audit-key", "label"):
            from agent_session.cli.governance import is_export_argument, verify_export_file

            exported = is_export_argument(args)
            if exported is not None:  # verify --integrity FILE: an audit export, no store
                return verify_export_file(args, exported)
        if args.command in STORE_COMMANDS:
            resolve_store(args, grammar)
        return asyncio.run(_dispatch(args))
    except KeyboardInterrupt:
        print("agent-session: interrupted", file=sys.stderr)
        return INTERRUPTED
    except BrokenPipeError:
        return _stdout_closed()
    except Exception as e:
        from agent_session.session import SessionError
        from agent_session.session.persistence.redaction import scrub

        expected = isinstance(e, UserError | OSError | ValueError | SessionError)
        if args.debug or not expected:
            # A traceback, for --debug or a defect, without any secret a message quotes.
            import traceback

            print(scrub("".join(traceback.format_exception(e))), end="", file=sys.stderr)
            return _exit_code(e) if expected else UNEXPECTED
        from agent_session.cli.output import terminal_text

        print(f"agent-session: error: {terminal_text(scrub(str(e)))}", file=sys.stderr)
        return _exit_code(e)


def _tolerate_any_stdout_encoding() -> None:
    """Print what the terminal's encoding cannot show as escapes instead of failing (an
    em dash on a latin-1 terminal)."""
    for stream in (sys.stdout, sys.stderr):
        if isinstance(stream, io.TextIOWrapper):
            stream.reconfigure(errors="backslashreplace")


def _stdout_closed() -> int:
    """The reader of stdout went away (``| head``): end quietly, as a command killed by
    SIGPIPE does, without Python's complaint when it flushes stdout at exit."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return STDOUT_CLOSED


def _exit_code(error: Exception) -> int:
    """The code of the table in ``agent_session.cli.exits`` for an error that ends a command."""
    from agent_session.session import SessionError, SessionNotFoundError

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
    from agent_session.cli import commands

    if args.command == "demo":
        from agent_session.demo.story import run_demo

        return await run_demo(
            sys.stdout,
            root=args.root,
            crash=args.crash,
            turns=args.turns,
            session_id=args.session_id,
            recover=not args.no_recover,
            as_json=args.json,
            compression=args.compression,
            model=args.model,
        )
    if args.command == "recover":
        from agent_session.cli.recover import recover

        store = commands.backend(args.store)
        try:
            return await recover(store, commands.targets(args), as_json=args.json)
        finally:
            await store.aclose()
    if args.command == "copy":
        from agent_session.cli.copy import copy

        return await copy(args)
    if args.command == "archive":
        from agent_session.cli.archive import archive

        return await archive(args)
    if args.command in ("purge", "hold", "release", "erase"):
        from agent_session.cli import retention

        return int(await getattr(retention, args.command)(args))
    if args.command in ("budget", "label", "sign", "audit-key") or _integrity(args):
        from agent_session.cli import governance

        if args.command == "verify":
            return await governance.verify_integrity(args)
        if args.command == "export":
            return await governance.export_audit(args)
        return int(await getattr(governance, args.command.replace("-", "_"))(args))
    from agent_session.cli import approval_commands, branch_commands, listing
    from agent_session.see import search, serve, stats, view

    handlers = {
        "approvals": approval_commands.approvals,
        "stats": stats.stats,
        "search": search.search,
        "view": view.view,
        "serve": serve.serve,
        "approve": approval_commands.decide,
        "reject": approval_commands.decide,
        "rm": commands.rm,
        "fork": branch_commands.fork,
        "rewind": branch_commands.rewind,
        "replay": branch_commands.replay,
        "diff": branch_commands.diff,
        "convert": commands.convert,
        "ls": listing.ls,
        "show": commands.show,
        "verify": commands.verify,
        "export": commands.export,
        "import": commands.import_history,
        "export-otel": _export_otel,
    }
    return await handlers[args.command](args)


def _integrity(args: argparse.Namespace) -> bool:
    """``verify --integrity`` or ``export --format audit``."""
    return bool(getattr(args, "integrity", False)) or getattr(args, "format", None) == "audit"


async def _export_otel(args: argparse.Namespace) -> int:
    from agent_session.otel.command import export_otel

    return await export_otel(args)


if __name__ == "__main__":
    sys.exit(main())
