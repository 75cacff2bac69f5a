"""The ``agent-session`` command line."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from session import __version__

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="agent-session",
        description="Inspect, verify and recover crash-safe agent session logs.",
    )
    parser.add_argument("--version", action="version", version=f"agent-session {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    commands.add_parser(
        "demo",
        help="record a turn through the session store and print its events",
        description="Record one tool-using turn through the in-process session store and "
        "print the event log and the derived model history.",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the process exit code."""
    parser = _parser()
    args = parser.parse_args(argv)
    if args.command == "demo":
        from agent_session.demo import run_demo

        return run_demo(sys.stdout)
    parser.print_help()
    return 0


if __name__ == "__main__":
    sys.exit(main())
