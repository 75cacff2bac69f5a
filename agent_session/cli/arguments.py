"""The ``agent-session`` command line's grammar: its commands, their arguments, help texts and
examples, and where the store comes from (a positional STORE, ``--store`` or
``AGENT_SESSION_STORE``). Imports only the standard library."""

from __future__ import annotations

import argparse
import os
import sys
from typing import NoReturn

from agent_session.cli.arguments_archive import ARCHIVING, ARCHIVING_EXAMPLES, add_archiving
from agent_session.cli.arguments_branching import BRANCHING, BRANCHING_EXAMPLES, add_branching
from agent_session.cli.arguments_governance import (
    GOVERNANCE,
    GOVERNANCE_EXAMPLES,
    STORE_AFTER_ACTION,
    add_governance,
)
from agent_session.cli.arguments_looking import add_looking, count, number
from agent_session.cli.arguments_retention import (
    RETENTION,
    RETENTION_EXAMPLES,
    add_retention,
    add_rm,
)
from agent_session.cli.exits import USAGE
from agent_session.see.states import LISTED_STATES

__all__ = ["EXAMPLES", "MAX_DEMO_TURNS", "STORE_COMMANDS", "parser", "resolve_store"]


class _Parser(argparse.ArgumentParser):
    """argparse, exiting with the usage code of the table in ``agent_session.cli.exits``."""

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(USAGE, f"{self.prog}: error: {message}\n")


class _Formatter(argparse.HelpFormatter):
    """argparse's help, with an indented line (an example) kept as written."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        return "\n\n".join(
            paragraph
            if paragraph.startswith("Example:")
            else super(_Formatter, self)._fill_text(paragraph, width, indent)
            for paragraph in text.split("\n\n")
        )


class _CommandList(argparse.HelpFormatter):
    """argparse's help, measuring the command names at the indent they are shown at (argparse
    measures them one indent short, and wraps the longest)."""

    def add_argument(self, action: argparse.Action) -> None:
        super().add_argument(action)
        if isinstance(action, argparse._SubParsersAction):
            self._action_max_length += self._indent_increment


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("agent-session-runtime")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown"


MAX_DEMO_TURNS = 1000
"""The most turns ``demo --turns`` runs (about 35 events and a few milliseconds each)."""

_STORE_HELP = (
    "the store: a directory of JSONL session logs, a SQLite database as "
    "sqlite:///relative/path.db or sqlite:////absolute/path.db, or a PostgreSQL database as "
    "postgresql://user@host:port/dbname (default: $AGENT_SESSION_STORE)"
)
STORE_COMMANDS = (
    "ls",
    "show",
    "verify",
    "recover",
    "approvals",
    "approve",
    "reject",
    "stats",
    "search",
    "view",
    "serve",
    "export-otel",
    "convert",
    "export",
    "import",
    "rm",
    *BRANCHING,
    *ARCHIVING,
    *GOVERNANCE,
    *RETENTION,
)
_EXITS = (
    "Exit codes: 0 healthy, 1 needs recovery, 2 corrupt/unsupported/invalid, 3 not found, "
    "4 usage error, 5 I/O or permission error, 70 a defect (traceback), 130 interrupted."
)
EXAMPLES = {
    "demo": "agent-session demo --store sqlite:///sessions.db --crash tool",
    "ls": "agent-session ls ./agent-sessions --state interrupted --sort updated --limit 20",
    "show": "agent-session show ./agent-sessions chat-1",
    "verify": "agent-session verify postgresql://app@db.internal/sessions",
    "recover": "agent-session recover ./agent-sessions chat-1",
    "approvals": "agent-session approvals sqlite:///sessions.db",
    "stats": "agent-session stats ./agent-sessions chat-1 --json",
    "search": "agent-session search ./agent-sessions 'invoice 7' --type tool",
    "view": "agent-session view ./agent-sessions chat-1 -o chat-1.html",
    "serve": "agent-session serve sqlite:///sessions.db --port 8765",
    "approve": "agent-session approve ./agent-sessions chat-1 call_7 --reason 'as agreed'",
    "reject": "agent-session reject ./agent-sessions chat-1 call_7 --reason 'wrong account'",
    "export-otel": "agent-session export-otel ./agent-sessions --endpoint http://localhost:4318",
    "convert": "agent-session convert ./agent-sessions chat-1 --to zstd",
    "export": "agent-session export sqlite:///sessions.db chat-1 --format anthropic",
    "import": "agent-session import ./agent-sessions chat-2 history.json --format pydantic-ai",
    "rm": "agent-session rm ./agent-sessions chat-1",
    "copy": "agent-session copy ./agent-sessions sqlite:///sessions.db",
    **BRANCHING_EXAMPLES,
    **ARCHIVING_EXAMPLES,
    **GOVERNANCE_EXAMPLES,
    **RETENTION_EXAMPLES,
}
"""One example per command, shown at the end of its ``--help``."""


def _turns(text: str) -> int:
    return number(text, MAX_DEMO_TURNS)


_PROBLEMS = ("corrupt", "unsupported", "unreadable")


def _session_id(text: str) -> str:
    if not text:
        raise argparse.ArgumentTypeError("must not be empty")
    return text


def parser() -> argparse.ArgumentParser:
    """The parser of every command."""
    common = _Parser(add_help=False)
    common.add_argument(
        "--debug", action="store_true", default=argparse.SUPPRESS, help="show tracebacks"
    )
    parser = _Parser(
        prog="agent-session",
        description="Run the crash-safe session stack; inspect, verify, recover, decide the "
        "parked tool calls of, export, "
        "import, delete and copy the sessions of a store: a directory of JSONL logs, a SQLite "
        "database (sqlite:///path.db) or a PostgreSQL database (postgresql://...). Every "
        "command takes the store first, or as --store.",
        epilog=_EXITS,
        formatter_class=_CommandList,
    )
    parser.add_argument("--version", action="version", version=f"agent-session {_version()}")
    parser.add_argument("--debug", action="store_true", help="show tracebacks for errors")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    def command(name: str, help: str, description: str) -> argparse.ArgumentParser:
        parser = commands.add_parser(
            name,
            help=help,
            description=description,
            epilog=f"Example:\n  {EXAMPLES[name]}\n\n{_EXITS}",
            parents=[common],
            formatter_class=_Formatter,
        )
        if name in STORE_COMMANDS and name not in STORE_AFTER_ACTION:
            add_store(parser)
        return parser

    def add_store(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("root", nargs="?", metavar="STORE", help=_STORE_HELP)
        parser.add_argument(
            "--store",
            dest="store_option",
            metavar="STORE",
            help="the store, as an option (then every positional argument is an id)",
        )

    demo = command(
        "demo",
        "run the whole stack through a real crash and recovery",
        "Run a scripted agent with the checkpoint policy, SIGKILL it at a failpoint in its "
        "last turn, then recover, resume and continue the session.",
    )
    demo.add_argument(
        "--store",
        "--root",
        dest="root",
        metavar="STORE",
        default=os.environ.get("AGENT_SESSION_STORE") or "./agent-sessions",
        help=_STORE_HELP.replace(
            "$AGENT_SESSION_STORE", "$AGENT_SESSION_STORE, else ./agent-sessions"
        ),
    )
    demo.add_argument(
        "--crash",
        default="tool",
        choices=["none", "request", "tool", "parallel-tool", "midstream"],
        help="where the last turn dies (default: tool)",
    )
    demo.add_argument(
        "--turns",
        type=_turns,
        default=2,
        help=f"turns to run, the last one crashing (1 to {MAX_DEMO_TURNS}; default: 2)",
    )
    demo.add_argument("--session-id", type=_session_id, help="session id (default: demo-<random>)")
    demo.add_argument(
        "--compression",
        choices=["none", "zstd"],
        default="none",
        help="a JSONL store: write the log plain (session.jsonl, the default) or as the "
        "reference's default session.jsonl.zstd",
    )
    demo.add_argument(
        "--model",
        metavar="PROVIDER/NAME",
        help="a real model instead of the script: openai/NAME (Responses), openai-chat/NAME "
        "(Chat Completions) or anthropic/NAME; the key comes from OPENAI_API_KEY or "
        "ANTHROPIC_API_KEY",
    )
    demo.add_argument("--no-recover", action="store_true", help="stop after the crash")
    demo.add_argument("--json", action="store_true", help="print a JSON summary instead")

    ls = command(
        "ls",
        "list the sessions of a store",
        "One row per session: id, parent (a fork's, with how many of its events it was "
        "seeded with), cwd, created, events, last turn state, size, and flags. "
        "An entry that is not a readable session is listed with its reason.",
    )
    ls.add_argument("--json", action="store_true", help="one JSON object per line, as read")
    ls.add_argument(
        "--tree", action="store_true", help="each fork and subagent under its parent session"
    )
    ls.add_argument(
        "--state",
        action="append",
        choices=[*LISTED_STATES, *_PROBLEMS],
        help="only sessions in this state (repeat for several)",
    )
    ls.add_argument("--limit", type=count, help="at most this many rows")
    ls.add_argument(
        "--sort",
        choices=["id", "created", "updated"],
        help="by id, or newest first by creation or last write (default: as the store "
        "reads them, which lets --json stream)",
    )

    add_looking(command)

    show = command(
        "show",
        "print a session's transcript",
        "The human transcript of a session (read-only; repaired tool results are flagged).",
    )
    show.add_argument("id", help="the session id")
    group = show.add_mutually_exclusive_group()
    group.add_argument("--events", action="store_true", help="the raw event list")
    group.add_argument(
        "--json",
        action="store_true",
        help="JSON lines: the header line as stored, then the events as inspect returns them",
    )

    for name, help, description, verb in (
        (
            "verify",
            "check sessions without writing",
            "Read-only check of the named sessions, or of every entry of the store. For a "
            "turn a crash interrupted it says which calls resuming the agent could settle: "
            "this tool runs no tools, so settling happens when the agent resumes.",
            "check",
        ),
        (
            "recover",
            "durably repair interrupted or torn sessions",
            "Close every interrupted turn and cut every torn tail (a cold load of each such "
            "session); sessions a live writer holds are skipped. Idempotent. This tool runs no "
            "tools: the calls a crash interrupted are settled by their tools' effect classes "
            "when the agent resumes (agent.resume(), resume_run).",
            "repair",
        ),
    ):
        judge = command(name, help, description)
        judge.add_argument(
            "ids", nargs="*", metavar="ID", help=f"sessions to {verb} (default: all)"
        )
        judge.add_argument("--json", action="store_true", help="one JSON object per session")

    approvals = command(
        "approvals",
        "list the tool calls that wait for approval",
        "One row per parked tool call of the store (or of the sessions named): session, call "
        "id, tool, its recorded arguments (--json: all of them), the start of their digest "
        "(what approve --digest takes), when it was asked, its deadline, its state (a "
        "decision not yet carried out, or arguments that differ from the ones asked about) "
        "and the reason it asks (read-only).",
    )
    approvals.add_argument("ids", nargs="*", metavar="ID", help="sessions (default: all)")
    approvals.add_argument("--json", action="store_true", help="one JSON object per call")
    for verb, what, effect in (
        (
            "approve",
            "allow a parked tool call once",
            "the agent runs it, with its recorded arguments, when it resumes",
        ),
        (
            "reject",
            "reject a parked tool call",
            "when the agent resumes, the model reads that the user rejected it",
        ),
    ):
        decide = command(
            verb,
            what,
            f"{what[0].upper()}{what[1:]}: {effect}. The decision is appended under the store's "
            "writer lock, from any host; a call already decided, or one whose deadline passed, "
            "is refused (a passed deadline is recorded as cancelled).",
        )
        decide.add_argument("id", help="the session id")
        decide.add_argument("call_id", metavar="CALL_ID", help="the parked call's id")
        decide.add_argument("--reason", help="why (kept in the decision)")
        decide.add_argument("--by", help="who decides (default: user@host)")
        if verb == "approve":
            decide.add_argument(
                "--digest",
                help="the arguments' digest as listed (sha256: and at least 12 hex digits, "
                "or all of it): refuse if the recorded arguments differ",
            )

    convert = command(
        "convert",
        "rewrite a stopped session's log plain or compressed",
        "Rewrite a session's log as session.jsonl (--to none) or as the reference's default "
        "session.jsonl.zstd (--to zstd). The new file is durable before the old one is "
        "removed; a session a live writer holds, or one with a torn tail, is refused.",
    )
    convert.add_argument("id", help="the session id")
    convert.add_argument("--to", required=True, choices=["none", "zstd"])

    export = command(
        "export",
        "print a session's history as a provider request",
        "The derived message history in a provider's request shape, after checking that "
        "every tool call has exactly one result.",
    )
    export.add_argument("id", help="the session id")
    export.add_argument(
        "--format",
        required=True,
        choices=["openai", "anthropic", "pydantic-ai", "claude-code", "audit"],
        help="pydantic-ai: its ModelMessagesTypeAdapter JSON (needs the pydantic-ai extra); "
        "claude-code: a Claude Code transcript (JSON Lines) the Claude Agent SDK resumes from",
    )
    export.add_argument("--json", action="store_true", help="one compact JSON line")

    import_ = command(
        "import",
        "create a session from another framework's history",
        "Create session ID from FILE (- for stdin), a pydantic-ai message history "
        "(ModelMessagesTypeAdapter JSON, as export --format pydantic-ai writes it); with "
        "--format adk, ID is an ADK session of the SQLite database FILE that ADK's "
        "SqliteSessionService or DatabaseSessionService wrote, kept as EventLogSessionService "
        "keeps it. The history is checked whole before anything is written; an ID that "
        "exists is refused. With --format claude-code, FILE is a Claude Code transcript "
        "(or a project directory of them: one session ID-<session> each); what a crash or a "
        "resume left in it is repaired with the reference's closers, and each line salvaged, "
        "dropped or answered is reported.",
    )
    import_.add_argument("id", help="the id of the new session")
    import_.add_argument("file", metavar="FILE", help="the history (- reads stdin)")
    import_.add_argument("--format", required=True, choices=["pydantic-ai", "adk", "claude-code"])

    add_rm(command)

    copy = command(
        "copy",
        "copy sessions between stores",
        "Copy sessions (default: every session of SRC) into DST, which may be of another "
        "kind (a JSONL directory, a SQLite or a PostgreSQL database). Every stored event is "
        "copied as it is stored, byte for byte (an interrupted turn stays interrupted; a torn "
        "tail is not copied); an id that already exists in DST is refused and left alone there.",
    )
    copy.add_argument("source", metavar="SRC", help=_STORE_HELP)
    copy.add_argument("target", metavar="DST", help="the store to copy into (created if missing)")
    copy.add_argument("ids", nargs="*", metavar="ID", help="sessions to copy (default: all)")
    copy.add_argument("--json", action="store_true", help="one JSON object per session")
    copy.add_argument(
        "--move",
        action="store_true",
        help="then delete each copied session from SRC (refused under a legal hold: the copy "
        "is kept, the source too)",
    )
    add_branching(command)
    add_archiving(command)
    add_governance(command, add_store, commands.choices)
    add_retention(command)
    return parser


def resolve_store(args: argparse.Namespace, parser: argparse.ArgumentParser) -> None:
    """Set ``args.store`` from the positional STORE or ``--store`` (then every positional
    argument is an id), or else from ``AGENT_SESSION_STORE``: then a first positional
    argument that is neither a URL nor an existing path is an id."""
    from agent_session.stores import STORE_ENV, parse_store

    given, positional = args.store_option, args.root
    from_env = os.environ.get(STORE_ENV) or None
    if given is None and from_env is not None and positional is not None:
        if "://" not in positional and not os.path.exists(positional):
            given = from_env  # the positional argument is an id
    elif given is None and positional is None:
        given = from_env
    if given is not None and positional is not None:
        if hasattr(args, "ids"):  # verify/recover --store S a b: "a" is an id
            args.ids = [positional, *args.ids]
        else:
            parser.error(f"the store was given twice ({positional!r} and --store {given!r})")
    text = given if given is not None else positional
    named = getattr(args, "id", None)
    if text is None and named is not None and ("://" in named or os.path.exists(named)):
        # argparse bound the store to the id's place: the id is what is missing
        parser.error(f"missing session id: agent-session {args.command} {named} ID")
    if text is None:
        parser.error(
            "a store is required: a directory, sqlite:///path.db or postgresql://... (or "
            "--store, or AGENT_SESSION_STORE)"
        )
    args.store = parse_store(text)
