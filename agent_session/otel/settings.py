"""Where traces go and whom they name, configured the way the OpenTelemetry SDK is: by its
standard environment variables, under what a caller passes explicitly.

- The receiver: an explicit endpoint (its URL as given when it names a path, else its
  ``/v1/<signal>``); else ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` (``_LOGS_`` for log records)
  as given; else ``OTEL_EXPORTER_OTLP_ENDPOINT`` with ``/v1/<signal>`` appended; else the SDK's
  default, ``http://localhost:4318/v1/<signal>``.
- Headers: explicit ones; else ``OTEL_EXPORTER_OTLP_TRACES_HEADERS`` (``_LOGS_``); else
  ``OTEL_EXPORTER_OTLP_HEADERS`` (``k=v,k2=v2``, values percent-decoded, as the SDK reads them).
- Timeout: explicit; else ``OTEL_EXPORTER_OTLP_TRACES_TIMEOUT`` (``_LOGS_``); else
  ``OTEL_EXPORTER_OTLP_TIMEOUT``; else 10 — in seconds, as the Python SDK reads them.
- The resource: ``OTEL_RESOURCE_ATTRIBUTES`` and ``OTEL_SERVICE_NAME`` (which wins for
  ``service.name``), read by the SDK's own detector; ``service.name`` is ``agent-session`` when
  neither names one.

Guarantees: an endpoint that is not an ``http(s)`` URL is refused naming where it came from,
and never quoted with a password it carries.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final, Literal
from urllib.parse import urlsplit

from agent_session.session.errors import SessionError
from agent_session.session.persistence.redaction import mask_store

__all__ = ["DEFAULT_SERVICE", "OtlpSettings", "TraceSettingsError", "otlp_settings", "resource"]

Signal = Literal["traces", "logs"]
DEFAULT_SERVICE: Final = "agent-session"
"""``service.name`` when the environment names none."""
_DEFAULT_ENDPOINT: Final = "http://localhost:4318/"
_DEFAULT_TIMEOUT_S: Final = 10.0


class TraceSettingsError(SessionError, ValueError):
    """A receiver's setting (explicit, or from an ``OTEL_*`` variable) cannot be used; the
    message names the setting."""


@dataclass(frozen=True)
class OtlpSettings:
    """A receiver: the URL posted to, the request headers and the seconds per request."""

    url: str
    headers: dict[str, str]
    timeout: float


def otlp_settings(
    signal: Signal = "traces",
    *,
    endpoint: str | None = None,
    headers: Mapping[str, str] | None = None,
    timeout: float | None = None,
    environ: Mapping[str, str] = os.environ,
) -> OtlpSettings:
    """The receiver of ``signal``: what is passed, else the environment, else the defaults
    (the module's docstring says in which order).

    Raises:
        TraceSettingsError: The URL is not ``http(s)``, or a timeout is not a positive number.
    """
    own = f"OTEL_EXPORTER_OTLP_{signal.upper()}_"
    if endpoint is not None:
        url, source = _with_path(endpoint, signal), "--endpoint"
    elif environ.get(own + "ENDPOINT"):
        url, source = environ[own + "ENDPOINT"], own + "ENDPOINT"
    elif environ.get("OTEL_EXPORTER_OTLP_ENDPOINT"):
        url = _appended(environ["OTEL_EXPORTER_OTLP_ENDPOINT"], signal)
        source = "OTEL_EXPORTER_OTLP_ENDPOINT"
    else:
        url, source = _appended(_DEFAULT_ENDPOINT, signal), "the default endpoint"
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise TraceSettingsError(
            f"{source} must be an http:// or https:// URL, not {mask_store(url)!r}"
        )
    if headers is None:
        text = environ.get(own + "HEADERS", environ.get("OTEL_EXPORTER_OTLP_HEADERS", ""))
        headers = _env_headers(text)
    if timeout is None:
        name = own + "TIMEOUT" if environ.get(own + "TIMEOUT") else "OTEL_EXPORTER_OTLP_TIMEOUT"
        timeout = _seconds(environ[name], name) if environ.get(name) else _DEFAULT_TIMEOUT_S
    elif not timeout > 0:
        raise TraceSettingsError(f"the timeout must be a positive number of seconds: {timeout}")
    return OtlpSettings(url, dict(headers), timeout)


def resource() -> object:
    """The SDK ``Resource`` every exported span or record carries: the environment's
    attributes, and ``service.name`` :data:`DEFAULT_SERVICE` unless it names one."""
    from opentelemetry.sdk.resources import SERVICE_NAME, OTELResourceDetector, Resource

    named = SERVICE_NAME in OTELResourceDetector().detect().attributes
    return Resource.create({} if named else {SERVICE_NAME: DEFAULT_SERVICE})


def _with_path(endpoint: str, signal: Signal) -> str:
    """An explicit endpoint: as given when it names a path, else its ``/v1/<signal>``."""
    return _appended(endpoint, signal) if urlsplit(endpoint).path in ("", "/") else endpoint


def _appended(base: str, signal: Signal) -> str:
    return base.rstrip("/") + f"/v1/{signal}"


def _env_headers(text: str) -> dict[str, str]:
    """``k=v,k2=v2`` as the SDK parses its header variables (liberally: percent-decoded,
    a pair without ``=`` left out)."""
    from opentelemetry.util.re import parse_env_headers

    return dict(parse_env_headers(text, liberal=True))


def _seconds(text: str, name: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not value > 0:
        raise TraceSettingsError(f"{name} must be a positive number of seconds, not {text!r}")
    return value
