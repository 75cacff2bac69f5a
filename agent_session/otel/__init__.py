"""OpenTelemetry traces of the sessions' turns, crashed ones included (the optional extra
``[otel]``): the mapping (:mod:`agent_session.otel.spans`), the at-least-once export
(:mod:`agent_session.otel.export`, :mod:`agent_session.otel.cursor`), the command
(``agent-session export-otel``) and the live exporter (:func:`otel_exporter`)."""

from agent_session.otel.export import Exported, OtlpSink, TraceExportError, sink_name
from agent_session.otel.settings import OtlpSettings, TraceSettingsError, otlp_settings
from agent_session.otel.spans import Content, SpanRecord, TurnTrace, turn_traces

__all__ = [
    "Content",
    "Exported",
    "OtlpSettings",
    "OtlpSink",
    "SpanRecord",
    "TraceExportError",
    "TraceSettingsError",
    "TurnTrace",
    "otlp_settings",
    "sink_name",
    "turn_traces",
]
