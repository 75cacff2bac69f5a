"""The grammar of the commands that look at sessions without changing them: ``stats``,
``search``, ``view``, ``serve`` and ``export-otel`` (the rest of the command line is in
:mod:`agent_session.cli.arguments`)."""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable
from typing import Any, Final

__all__ = [
    "Command",
    "add_looking",
    "age",
    "count",
    "duration_ms",
    "number",
    "prices_file",
    "whole",
]

Command = Callable[[str, str, str], argparse.ArgumentParser]
"""``command(name, help, description)``: adds a command to the parser and returns its own;
every grammar module adds its commands through one."""

_DURATION: Final = re.compile(r"^(\d+)([smhd])$")
_UNITS: Final = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def duration_ms(text: str) -> int | None:
    """A duration written ``30s``, ``30m``, ``2h`` or ``7d``, in milliseconds (``None``: not
    one)."""
    match = _DURATION.match(text)
    return int(match[1]) * _UNITS[match[2]] * 1000 if match else None


def number(text: str, high: int | None = None) -> int:
    """A whole number from 1 (to ``high``, if given), or the argument error that says why
    not."""
    value = whole(text)
    if high is not None and not 1 <= value <= high:
        raise argparse.ArgumentTypeError(f"must be between 1 and {high}, not {value}")
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


def count(text: str) -> int:
    """A count of at least 1."""
    return number(text)


def whole(text: str) -> int:
    """A whole number of at least 0, or the argument error that says why not."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, not {value}")
    return value


def redact_rule(text: str) -> str:
    """A redaction rule (``agent_session.governance.redaction``), checked."""
    from agent_session.governance.redaction import redaction

    try:
        redaction([text])
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    return text


def add_redact(parser: argparse.ArgumentParser) -> None:
    """``--redact RULE`` (repeatable) on a command that shows or sends content."""
    parser.add_argument(
        "--redact",
        type=redact_rule,
        action="append",
        metavar="RULE",
        help="rewrite what leaves the store (never the log): secrets, emails, content or "
        "pattern:REGEX (repeatable; docs/governance.md)",
    )


def age(text: str) -> int:
    """An age written as :func:`duration_ms` reads it, in milliseconds, or the argument
    error that says why not."""
    value = duration_ms(text)
    if value is None:
        raise argparse.ArgumentTypeError(f"not an age (30m, 12h, 7d): {text!r}")
    return value


def add_looking(command: Command) -> None:
    """Add the five commands through ``command(name, help, description)``."""
    # (here, not at the top: ``search`` writes through ``cli``'s exits, so importing it first
    # would find this module's package half made)
    from agent_session.see.search import KINDS

    figures = command(
        "stats",
        "a session's figures: steps, model and tool time, tokens",
        "The reference's session statistics (turns, steps, model time, time to first token, "
        "decode time and tokens, tool time) over the log as a load returns it, and what they "
        "do not count: the crash points and what repair answered, calls settled on resume, "
        "approvals (read-only).",
    )
    figures.add_argument("id", help="the session id")
    figures.add_argument("--json", action="store_true", help="one JSON object")

    finder = command(
        "search",
        "find a phrase in what the sessions said",
        "Full-text search over the surface of every session of the store (user messages, the "
        "model's text, reasoning and tool calls, tool results); each match names its session, "
        "seq and turn. The index is an SQLite FTS5 file outside the store, brought up to date "
        "before each search from what was appended since; the store is never written.",
    )
    finder.add_argument("phrase", help="the words to find, in this order")
    finder.add_argument(
        "--type",
        action="append",
        choices=KINDS,
        help="only this kind of text (repeat for several)",
    )
    finder.add_argument("--limit", type=count, default=20, help="at most this many (default 20)")
    finder.add_argument("--index", help="the index file (default: under $XDG_CACHE_HOME)")
    finder.add_argument("--rebuild", action="store_true", help="build the index afresh")
    finder.add_argument("--json", action="store_true", help="one JSON object per match")

    page = command(
        "view",
        "write a session's timeline as one HTML page",
        "One self-contained HTML file (no server, no network; it opens from a file URL): the "
        "session as a timeline of turns, steps, messages and tool calls with their times, and "
        "the crash points, repaired and settled calls and approvals marked (read-only).",
    )
    page.add_argument("id", help="the session id")
    page.add_argument("-o", "--output", help="the file to write (default: ID.html here)")
    page.add_argument("--prices", type=prices_file, metavar="FILE", help=_PRICES_HELP)
    add_redact(page)

    web = command(
        "serve",
        "a read-only local web app over the store",
        "Serve the session list (state, last write, events, size; filter by state, sort) and "
        "each session's timeline page, which follows a session being written. Read-only; "
        "binds to 127.0.0.1 unless --host says otherwise (a non-loopback address needs "
        "--allow-remote). Ctrl-C stops it.",
    )
    web.add_argument("--port", type=int, default=8765, help="the port (0: any free one)")
    web.add_argument("--host", default="127.0.0.1", help="the address (default 127.0.0.1)")
    web.add_argument(
        "--allow-remote", action="store_true", help="allow an address other hosts can reach"
    )
    web.add_argument("--prices", type=prices_file, metavar="FILE", help=_PRICES_HELP)
    add_redact(web)

    traces = command(
        "export-otel",
        "send the sessions' turns as OpenTelemetry traces",
        "Every closed turn of the sessions (all, or the ids given) as one OpenTelemetry trace "
        "in the GenAI conventions (invoke_agent, chat, execute_tool spans), crashed turns "
        "included, ending in error at the crash point, to an OTLP/HTTP receiver (Jaeger, "
        "Phoenix, Langfuse, Logfire, a collector). At least once: a cursor per receiver and "
        "session, kept in the store, moves only once the receiver took a turn; span ids are "
        "derived from the log, so a turn sent twice is deduplicated. The logs are not written.",
    )
    traces.add_argument("ids", nargs="*", metavar="ID", help="the sessions (default: all)")
    traces.add_argument(
        "--endpoint",
        help="the receiver: its traces URL, or a base URL (then /v1/traces is added); default: "
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT (_LOGS_ with --shape records), else "
        "OTEL_EXPORTER_OTLP_ENDPOINT, else http://localhost:4318",
    )
    traces.add_argument(
        "--headers",
        action="append",
        metavar="K=V[,K=V]",
        help="request headers, as OTEL_EXPORTER_OTLP_HEADERS writes them (repeatable); "
        "default: OTEL_EXPORTER_OTLP_TRACES_HEADERS, else OTEL_EXPORTER_OTLP_HEADERS",
    )
    traces.add_argument(
        "--since", type=_since, help="only turns that ended since: 30m, 2h, 7d or an ISO time"
    )
    traces.add_argument(
        "--content",
        choices=("off", "refs", "full"),
        default="off",
        help="messages on the spans: off (default), refs (session#seq), full (redacted)",
    )
    add_redact(traces)
    traces.add_argument(
        "--shape",
        choices=("spans", "records"),
        default="spans",
        help="GenAI spans (default), or the reference's log record per event (session.id, "
        "event.type, event.seq) to /v1/logs",
    )
    traces.add_argument(
        "--timeout",
        type=float,
        help="seconds per request (default: OTEL_EXPORTER_OTLP_TRACES_TIMEOUT, else "
        "OTEL_EXPORTER_OTLP_TIMEOUT, else 10)",
    )
    traces.add_argument("--attempts", type=count, default=5, help="tries per batch (default 5)")
    traces.add_argument("--prices", type=prices_file, metavar="FILE", help=_PRICES_HELP)
    traces.add_argument("--json", action="store_true", help="one JSON object")


_PRICES_HELP = (
    "a JSON price table (per million tokens, by model) to show what each step cost; "
    "nothing is priced without one"
)


def prices_file(path: str) -> Any:
    """The price table in the file ``path`` (:func:`agent_session.see.prices.read_prices`),
    or the argument error that says why not."""
    from agent_session.see.prices import PriceTableError, read_prices

    try:
        return read_prices(path)
    except PriceTableError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _since(text: str) -> int:
    from agent_session.otel.command import parse_since

    return parse_since(text)
