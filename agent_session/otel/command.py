"""``agent-session export-otel STORE [ID...] [--endpoint URL]``: every closed turn of the store's
sessions (crashed ones included) as OpenTelemetry traces to an OTLP/HTTP receiver, at least once
(:mod:`agent_session.otel.export`). The session logs are never written; the store gains the
sink's cursor (:mod:`agent_session.otel.cursor`)."""

from __future__ import annotations

import argparse
import datetime
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from agent_session.cli.arguments_looking import duration_ms
from agent_session.cli.exits import OK, UserError
from agent_session.cli.output import Progress, json_line

if TYPE_CHECKING:
    from agent_session.governance.redaction import Redaction

__all__ = ["export_otel", "parse_headers", "parse_since"]


def parse_since(text: str, now: Callable[[], float] = time.time) -> int:
    """``--since``: a duration back from now (``30m``, ``2h``, ``7d``) or an ISO 8601 date or
    time (UTC unless it says otherwise), as Unix milliseconds."""
    back = duration_ms(text)
    if back is not None:
        return int(now() * 1000) - back
    try:
        moment = datetime.datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"not a duration (30m, 2h, 7d) or an ISO 8601 time: {text!r}"
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.UTC)
    return int(moment.timestamp() * 1000)


def parse_headers(values: list[str] | None) -> dict[str, str]:
    """``--headers k=v,k2=v2`` (repeatable), the format of ``OTEL_EXPORTER_OTLP_HEADERS``."""
    headers: dict[str, str] = {}
    for value in values or ():
        for pair in value.split(","):
            key, equals, content = pair.partition("=")
            if not equals or not key.strip():
                raise UserError(f"--headers takes key=value pairs, not {pair.split('=')[0]!r}")
            headers[key.strip()] = content.strip()
    return headers


def _redactor(rules: Redaction | None, scrub: Callable[[str], str]) -> Callable[[str], str]:
    """The texts of ``--content full`` masked of known secrets, then ``--redact``'s rules."""
    if rules is None:
        return scrub
    return lambda text: rules.text(scrub(text))


async def export_otel(args: argparse.Namespace) -> int:
    """Export, then print what was sent (one JSON object with ``--json``)."""
    from agent_session.cli.commands import check_exists
    from agent_session.governance.redaction import redaction
    from agent_session.otel.export import OtlpSink, export_store
    from agent_session.otel.settings import TraceSettingsError, otlp_settings
    from agent_session.session.persistence.redaction import scrub

    check_exists(args.store)
    try:
        settings = otlp_settings(
            "traces" if args.shape == "spans" else "logs",
            endpoint=args.endpoint,
            headers=parse_headers(args.headers) if args.headers else None,
            timeout=args.timeout,
        )
    except TraceSettingsError as error:
        raise UserError(str(error)) from None
    sink = OtlpSink(
        settings.url,
        shape=args.shape,
        headers=settings.headers,
        timeout=settings.timeout,
        attempts=args.attempts,
    )
    try:
        progress: Progress | None = None

        def step(done: int, total: int) -> None:
            nonlocal progress
            if progress is None:
                progress = Progress(total, "export-otel")
            progress.step(done)

        exported = await export_store(
            args.store,
            sink,
            args.ids,
            content=args.content,
            redact=_redactor(redaction(args.redact), scrub),
            since=args.since,
            on_session=step,
            prices=args.prices,
        )
        if progress is not None:
            progress.clear()
    finally:
        sink.close()
    kind = "spans" if args.shape == "spans" else "records"
    summary = {
        "endpoint": sink.endpoint,
        "sessions": exported.sessions,
        "turns": exported.turns,
        kind: exported.items,
    }
    if args.json:
        print(json_line(summary))
    else:
        print(
            f"exported {exported.turns} turn(s), {exported.items} {kind[:-1]}(s) of "
            f"{exported.sessions} session(s) to {sink.endpoint}"
        )
    return OK
