"""Sending a store's turns to an OTLP/HTTP receiver, at least once: the spans of
:mod:`agent_session.otel.spans` in the OpenTelemetry SDK's OTLP encoding, and a
per-session cursor (:mod:`agent_session.otel.cursor`) advanced only after the receiver
acknowledged them.

Guarantees: a turn is sent until a receiver acknowledges it (a crash of the exporter between the
send and the cursor's advance sends it again, with the same ids, which receivers dedupe); a
session whose log another process is writing has only its closed turns sent (its open turn
is not a crash); a failure is retried with backoff, and then raised as
:class:`TraceExportError` naming the receiver's answer, with the cursor where it was.
"""

from __future__ import annotations

import hashlib
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from agent_session.otel.lineage_spans import Adoption, adopted, adoptions
from agent_session.otel.spans import Content, SpanRecord, turn_traces
from agent_session.session.errors import SessionError
from agent_session.session.persistence.redaction import MASK, mask_store, remember_store, scrub

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import ReadableSpan

    from agent_session.otel.cursor import Cursors
    from agent_session.see.prices import PriceTable
    from agent_session.stores import StoreSpec

__all__ = [
    "Exported",
    "OtlpSink",
    "TraceExportError",
    "export_store",
    "first_unsent",
    "fork_link",
    "send_turns",
    "sink_name",
]

Shape = Literal["spans", "records"]
"""What goes to the receiver: GenAI spans, or the reference's one log record per event."""

SCOPE = "agent-session-runtime"
"""The instrumentation scope every span carries."""


class TraceExportError(SessionError, ConnectionError):
    """A trace receiver did not acknowledge a batch after every retry (it failed, hung or
    could not be reached); nothing past the last acknowledged turn is recorded as exported."""


@dataclass
class Exported:
    """What one export sent: sessions looked at, turns and their spans (or log records)
    acknowledged."""

    sessions: int = 0
    turns: int = 0
    items: int = 0


def sink_name(endpoint: str) -> str:
    """The cursor name of a receiver: its URL without credentials, hashed (so a password in
    the URL never reaches the store)."""
    return "otlp:" + hashlib.sha256(mask_store(endpoint).encode()).hexdigest()[:16]


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """A redirect is an answer, not a new receiver: following it would send the request's
    headers (an API key) to wherever the receiver points."""

    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None  # (urllib then raises the 3xx as an HTTPError)


_OPENER = urllib.request.build_opener(_NoRedirect)


class OtlpSink:
    """An OTLP/HTTP receiver: spans (``shape="spans"``, to its ``/v1/traces``) or log records
    (``"records"``, :mod:`agent_session.otel.records`), encoded by the SDK's OTLP protobuf
    encoder and posted here, one request per attempt, with ``attempts`` tries per batch,
    ``backoff`` seconds before the second (doubling), and ``timeout`` seconds per request.
    (The SDK's own exporters retry inside one call, each release differently.)"""

    def __init__(
        self,
        endpoint: str,
        *,
        shape: Shape = "spans",
        headers: Mapping[str, str] | None = None,
        timeout: float = 10.0,
        attempts: int = 5,
        backoff: float = 0.5,
    ) -> None:
        from agent_session.otel.settings import resource

        remember_store(endpoint)  # every message that quotes it is scrubbed
        self._url = endpoint
        self.endpoint = mask_store(endpoint)
        """The receiver's URL without any password it carries."""
        self.name = sink_name(endpoint)
        self.shape = shape
        self._headers = {**(headers or {}), "Content-Type": "application/x-protobuf"}
        self._secrets = [value for value in (headers or {}).values() if value]
        """Header values (API keys, tokens), kept out of every message."""
        self._timeout = timeout
        self._resource = resource()
        self._attempts = max(1, attempts)
        self._backoff = backoff

    def send(self, records: Sequence[Any]) -> None:
        """Deliver ``records`` (spans or log records, as the shape says; one request per
        attempt); raise :class:`TraceExportError`."""
        if self.shape == "spans":
            from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

            spans = [sdk_span(record, self._resource) for record in records]
            body = encode_spans(spans).SerializeToString()
        else:
            from opentelemetry.exporter.otlp.proto.common._log_encoder import encode_logs

            from agent_session.otel.records import sdk_log_record

            logs = [sdk_log_record(record, self._resource) for record in records]
            body = encode_logs(logs).SerializeToString()
        delay = self._backoff
        said = "no answer"
        for attempt in range(self._attempts):
            said = self._post(body)
            if not said:
                return
            if attempt + 1 < self._attempts:
                time.sleep(delay)
                delay *= 2
        for secret in self._secrets:
            said = said.replace(secret, MASK)
        raise TraceExportError(
            f"the OTLP receiver at {self.endpoint} did not take {len(records)} "
            f"{'span' if self.shape == 'spans' else 'log record'}(s) "
            f"after {self._attempts} attempt(s): {scrub(said)}"
        )

    def _post(self, body: bytes) -> str:
        """One request; ``""`` when the receiver acknowledged it (a 2xx), else what it said."""
        request = urllib.request.Request(self._url, body, self._headers, method="POST")
        try:
            with _OPENER.open(request, timeout=self._timeout) as answer:
                answer.read()
                return ""
        except urllib.error.HTTPError as refused:
            return f"code: {refused.code}, reason: {refused.reason}"
        except TimeoutError:
            return f"no answer within {self._timeout:g} s"
        except urllib.error.URLError as failed:
            return f"could not reach it: {failed.reason}"
        except OSError as failed:
            return f"could not reach it: {failed}"

    def close(self) -> None:
        """Nothing is held between requests."""


def sdk_span(record: SpanRecord, resource: Any) -> ReadableSpan:
    """``record`` as the SDK's finished span, with its own ids."""
    from opentelemetry.sdk.trace import Event, ReadableSpan
    from opentelemetry.sdk.util.instrumentation import InstrumentationScope
    from opentelemetry.trace import Link, SpanContext, SpanKind, Status, StatusCode, TraceFlags

    def context(trace_id: int, span_id: int) -> SpanContext:
        return SpanContext(trace_id, span_id, is_remote=False, trace_flags=TraceFlags(1))

    parent = None if record.parent_id is None else context(record.trace_id, record.parent_id)
    status = (
        Status(StatusCode.UNSET) if record.error is None else Status(StatusCode.ERROR, record.error)
    )
    return ReadableSpan(
        name=record.name,
        context=context(record.trace_id, record.span_id),
        parent=parent,
        resource=resource,
        attributes=record.attributes,
        events=[Event(name, attributes, timestamp=at) for name, at, attributes in record.events],
        links=[Link(context(t, s), attributes) for t, s, attributes in record.links],
        kind=SpanKind.CLIENT if record.kind == "CLIENT" else SpanKind.INTERNAL,
        status=status,
        start_time=record.start_ns,
        end_time=record.end_ns,
        instrumentation_scope=InstrumentationScope(SCOPE),
    )


def first_unsent(cursor: int, header: Any) -> int:
    """The seq past which a session's turns are still to send: past the cursor, and past a
    fork's seed (its seeded turns are its parent's to send)."""
    return max(cursor, (header.seed_length or 0) - 1)


def fork_link(
    header: Any, events: Sequence[Any], cursor: int, parent_incarnation: int | None
) -> tuple[str, int, int] | None:
    """For a fork none of whose own turns was sent yet, the parent's turn its first turn
    continues, as ``turn_traces`` takes it (the seeded prefix holds the parent's seqs);
    ``None`` otherwise, or when the parent's incarnation is unknown."""
    seed = header.seed_length
    if header.parent_session is None or not seed or parent_incarnation is None:
        return None
    if cursor >= seed:
        return None
    starts = [e.seq for e in events[:seed] if e.type == "turn/start"]
    return (header.parent_session, parent_incarnation, starts[-1]) if starts else None


def send_turns(
    sink: OtlpSink,
    cursors: Cursors,
    session_id: str,
    incarnation: int,
    turns: Iterable[tuple[int, Sequence[Any]]],
    exported: Exported,
) -> None:
    """Send each turn's spans or records (``(end seq, items)``), advancing the session's
    cursor after each acknowledgement."""
    for end_seq, items in turns:
        sink.send(items)
        cursors.advance(sink.name, session_id, incarnation, end_seq)
        exported.turns += 1
        exported.items += len(items)


async def export_store(
    store: StoreSpec,
    sink: OtlpSink,
    ids: Sequence[str] | None = None,
    *,
    content: Content = "off",
    redact: Callable[[str], str] = scrub,
    since: int | None = None,
    on_session: Callable[[int, int], None] | None = None,
    cursors: Cursors | None = None,
    prices: PriceTable | None = None,
) -> Exported:
    """Send every turn of the store's sessions (all, or ``ids``) the sink has not
    acknowledged, session by session; ``since`` (Unix ms) leaves out turns that ended
    before it; ``on_session(done, total)`` hears of each session sent; ``cursors``, when
    given, are used (and left open) instead of opening the store's; with ``prices``, each
    model request's span has its cost. Raises
    :class:`TraceExportError` (what was acknowledged before stays recorded)."""
    import asyncio

    from agent_session.cli.commands import backend, check_exists, diagnose
    from agent_session.cli.exits import NotFound
    from agent_session.otel.cursor import cursors_for

    exported = Exported()
    try:
        check_exists(store)
    except NotFound:
        return exported  # nothing written yet: nothing to send
    reader = backend(store, read_only=True)
    owned = cursors is None
    positions = cursors_for(store) if cursors is None else cursors
    try:
        headers: dict[str, Any] | None = None  # every stored header, read once if needed
        if not ids:
            headers = {h.id: h for h in await reader.list_headers()}
        chosen = list(ids) if ids else sorted(headers or ())
        for id in chosen:
            examined = await diagnose(reader, store, id)
            header, events = examined.session.header, examined.session.events
            if examined.writer_elsewhere:  # its open turn is running, not interrupted
                events = events[: examined.stored_events]
            cursor = positions.position(sink.name, id, header.created_at)
            parent = None
            if header.parent_session is not None and cursor < (header.seed_length or 0):
                if headers is None:
                    headers = {h.id: h for h in await reader.list_headers()}
                parent = headers.get(header.parent_session)
            link = fork_link(header, events, cursor, parent.created_at if parent else None)
            ran = await _runs_of(reader, store, header) if header.origin == "subagent" else []
            turns = _turns_of(sink, header, events, cursor, (content, redact, prices), link, ran)
            if since is not None:
                turns = [t for t in turns if t[2] >= since * 1_000_000]
            await asyncio.to_thread(
                send_turns,
                sink,
                positions,
                id,
                header.created_at,
                [(end, items) for end, items, _ in turns],
                exported,
            )
            exported.sessions += 1
            if on_session is not None:
                on_session(exported.sessions, len(chosen))
    finally:
        if owned:
            positions.close()
        await reader.aclose()
    return exported


async def _runs_of(reader: Any, store: StoreSpec, header: Any) -> list[Adoption]:
    """Where the parent's log ran this child agent's session (none when the parent's log
    cannot be read: the child's traces are then its own)."""
    from agent_session.cli.commands import diagnose
    from agent_session.cli.exits import NotFound

    try:
        parent = (await diagnose(reader, store, header.parent_session)).session
    except (NotFound, SessionError):
        return []
    return adoptions(parent.header.id, parent.header.created_at, parent.events, header.id)


def _turns_of(
    sink: OtlpSink,
    header: Any,
    events: Sequence[Any],
    cursor: int,
    shown: tuple[Content, Callable[[str], str], PriceTable | None],
    link: tuple[str, int, int] | None,
    ran: Sequence[Adoption] = (),
) -> list[tuple[int, Sequence[Any], int]]:
    """Each turn still to send as (end seq, what the sink takes, end time in ns); ``ran``:
    for a child agent's session, where its parent ran it (its spans go in that trace)."""
    content, redact, prices = shown
    after = first_unsent(cursor, header)
    if sink.shape == "spans":
        traces = turn_traces(
            header.id,
            header.created_at,
            events,
            after_seq=after,
            content=content,
            redact=redact,
            parent=link,
            prices=prices,
        )
        return [(t.end_seq, t.spans, t.spans[0].end_ns) for t in adopted(traces, ran)]
    from agent_session.otel.records import turn_records

    return [
        (t.end_seq, t.records, t.records[-1].time_ns)
        for t in turn_records(
            header.id,
            header.created_at,
            events,
            after_seq=after,
            parent=header.parent_session,
            seed_length=header.seed_length,
        )
    ]
