"""An OTLP/HTTP trace receiver on 127.0.0.1 for the tests: it decodes each request with
``opentelemetry-proto`` and keeps the spans as plain dicts, or answers as told (``500``,
``echo`` (a 500 whose reason quotes the request's ``Authorization``), ``hang`` until released,
``ok``)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (
    ExportLogsServiceRequest,
    ExportLogsServiceResponse,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

__all__ = ["Receiver", "receiver"]


def _value(value: AnyValue) -> Any:
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return [_value(v) for v in value.array_value.values]
    if kind == "kvlist_value":
        return {kv.key: _value(kv.value) for kv in value.kvlist_value.values}
    return getattr(value, kind) if kind else None


def _attributes(pairs: Any) -> dict[str, Any]:
    return {kv.key: _value(kv.value) for kv in pairs}


class Receiver:
    """What the server received, and how it answers the next requests."""

    def __init__(self) -> None:
        self.spans: list[dict[str, Any]] = []
        self.records: list[dict[str, Any]] = []
        """The log records received (``/v1/logs``)."""
        self.requests = 0
        self.answer = "ok"
        self.release = threading.Event()
        self.stop_at: int | None = None
        """Hold the request of this number (1-based) until :attr:`release` is set, after
        setting :attr:`reached`."""
        self.acknowledge_held = False
        """Acknowledge the held request first (then set :attr:`reached`, without holding)."""
        self.reached = threading.Event()
        self.lock = threading.Lock()
        self.url = ""
        self.seen: list[tuple[str, dict[str, str]]] = []
        """Each request's path and headers (their names in lower case)."""

    def take(self, body: bytes) -> None:
        request = ExportTraceServiceRequest.FromString(body)
        with self.lock:
            for resource in request.resource_spans:
                described = _attributes(resource.resource.attributes)
                service = described.get("service.name")
                for scope in resource.scope_spans:
                    for span in scope.spans:
                        self.spans.append(
                            {
                                "service": service,
                                "resource": described,
                                "scope": scope.scope.name,
                                "trace_id": span.trace_id.hex(),
                                "span_id": span.span_id.hex(),
                                "parent_id": span.parent_span_id.hex() or None,
                                "name": span.name,
                                "kind": span.kind,
                                "start": span.start_time_unix_nano,
                                "end": span.end_time_unix_nano,
                                "attributes": _attributes(span.attributes),
                                "status": (span.status.code, span.status.message),
                                "events": [
                                    (e.name, e.time_unix_nano, _attributes(e.attributes))
                                    for e in span.events
                                ],
                                "links": [
                                    (link.trace_id.hex(), link.span_id.hex()) for link in span.links
                                ],
                            }
                        )

    def take_logs(self, body: bytes) -> None:
        request = ExportLogsServiceRequest.FromString(body)
        with self.lock:
            for resource in request.resource_logs:
                for scope in resource.scope_logs:
                    for record in scope.log_records:
                        self.records.append(
                            {
                                "time": record.time_unix_nano,
                                "severity": record.severity_number,
                                "severity_text": record.severity_text,
                                "body": _value(record.body),
                                "attributes": _attributes(record.attributes),
                                "trace_id": record.trace_id.hex(),
                            }
                        )

    def by_id(self) -> dict[str, dict[str, Any]]:
        """The spans received, the last copy of each id."""
        with self.lock:
            return {span["span_id"]: span for span in self.spans}


@contextmanager
def receiver() -> Iterator[Receiver]:
    """A receiver listening on a free port of 127.0.0.1 for the ``with`` block."""
    state = Receiver()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            with state.lock:
                state.requests += 1
                state.seen.append((self.path, {k.lower(): v for k, v in self.headers.items()}))
                answer = state.answer
                held = state.requests == state.stop_at
            if held and not state.acknowledge_held:
                state.reached.set()
                state.release.wait()
                return  # (the client is gone)
            if answer == "hang":
                state.release.wait()
            if answer.startswith("redirect "):  # "redirect URL": a 303 to another receiver
                self.send_response(303)
                self.send_header("Location", answer.split(" ", 1)[1])
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            if answer in ("500", "echo"):  # "echo": the reason quotes the request's credentials
                reason = self.headers.get("Authorization", "") if answer == "echo" else None
                self.send_response(500, reason)
                self.send_header("Content-Length", "5")
                self.end_headers()
                self.wfile.write(b"boom!")
                return
            if self.path.endswith("/v1/logs"):
                state.take_logs(body)
                reply = ExportLogsServiceResponse().SerializeToString()
            else:
                state.take(body)
                reply = ExportTraceServiceResponse().SerializeToString()
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", str(len(reply)))
            self.end_headers()
            self.wfile.write(reply)
            self.wfile.flush()
            if held:
                state.reached.set()

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    state.url = f"http://127.0.0.1:{server.server_address[1]}/v1/traces"
    # (it looks for shutdown() every 0.05 s, not the default 0.5 s each stop would wait)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield state
    finally:
        state.release.set()
        server.shutdown()
        server.server_close()
