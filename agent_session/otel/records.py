"""The reference's telemetry shape: one OpenTelemetry log record per session event, for
receivers built for the reference's ``dsh-session-telemetry-otel`` (``export-otel --shape
records``).

Each record carries ``session.id``, ``event.type`` and ``event.seq`` (with
``session.parent_id`` and ``session.seed_length`` for a fork), the event's time, and severity
ERROR for a ``tool/result`` that is an error and for a ``turn/end`` that did not complete,
INFO otherwise; of a step's streamed chunks only the first is sent (it times the first token),
as the reference does. Records go turn by turn, with the same cursor rule as the spans (a
turn's records are acknowledged together), and carry the trace and span ids of the turn's
spans, so a receiver that takes both can join them. Receivers dedupe on
(``session.id``, ``event.seq``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from agent_session.otel.ids import trace_id
from agent_session.otel.spans import is_error_result

__all__ = ["EventRecord", "TurnRecords", "sdk_log_record", "turn_records"]


@dataclass(frozen=True)
class EventRecord:
    """One log record: Unix nanoseconds, severity, attributes, and the turn's trace id."""

    time_ns: int
    error: bool
    attributes: dict[str, Any]
    trace_id: int


@dataclass(frozen=True)
class TurnRecords:
    """A closed turn's records (from the event after the previous turn's end) and the seq of
    its ``turn/end``."""

    end_seq: int
    records: list[EventRecord]


def turn_records(
    session_id: str,
    incarnation: int,
    events: Sequence[Any],
    *,
    after_seq: int = -1,
    parent: str | None = None,
    seed_length: int | None = None,
) -> list[TurnRecords]:
    """The records of each closed turn whose ``turn/end`` comes after ``after_seq``."""
    turns: list[TurnRecords] = []
    pending: list[Any] = []
    trace = 0
    chunked: set[Any] = set()
    for event in events:
        if event.seq <= after_seq:
            continue
        if event.type == "turn/start":
            trace = trace_id(session_id, incarnation, event.seq)
        if event.type == "assistant/chunk":
            data = event.data if isinstance(event.data, Mapping) else {}
            step = (data.get("turn"), data.get("step"))
            if step in chunked:
                continue  # the first chunk of a step times its first token; the rest stay
            chunked.add(step)
        pending.append((event, trace))
        if event.type == "turn/end":
            records = [_record(session_id, e, t, parent, seed_length) for e, t in pending]
            turns.append(TurnRecords(event.seq, records))
            pending, chunked = [], set()
    return turns


def _record(
    session_id: str, event: Any, trace: int, parent: str | None, seed_length: int | None
) -> EventRecord:
    attributes: dict[str, Any] = {
        "session.id": session_id,
        "event.type": event.type,
        "event.seq": event.seq,
    }
    if parent is not None:
        attributes["session.parent_id"] = parent
    if seed_length is not None:
        attributes["session.seed_length"] = seed_length
    return EventRecord(event.time * 1_000_000, _is_error(event), attributes, trace)


def _is_error(event: Any) -> bool:
    if event.type == "turn/end":
        reason = event.data.get("reason") if isinstance(event.data, Mapping) else None
        return isinstance(reason, Mapping) and reason.get("kind") not in ("completed", None)
    return event.type == "tool/result" and is_error_result(event.data)


def sdk_log_record(record: EventRecord, resource: Any) -> Any:
    """``record`` as the SDK's readable log record."""
    from opentelemetry._logs import LogRecord, SeverityNumber
    from opentelemetry.sdk._logs import ReadableLogRecord
    from opentelemetry.sdk.util.instrumentation import InstrumentationScope
    from opentelemetry.trace import TraceFlags

    from agent_session.otel.export import SCOPE

    severity = SeverityNumber.ERROR if record.error else SeverityNumber.INFO
    return ReadableLogRecord(
        LogRecord(
            timestamp=record.time_ns,
            observed_timestamp=record.time_ns,
            trace_id=record.trace_id,
            span_id=0,
            trace_flags=TraceFlags(1),
            severity_text=severity.name,
            severity_number=severity,
            body=record.attributes["event.type"],
            attributes=record.attributes,
        ),
        resource,
        InstrumentationScope(SCOPE),
    )
