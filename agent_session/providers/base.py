"""What every provider adapter shares: attempts with retries, and how a failure is told.

An adapter turns one provider response into reference chunks (:meth:`ProviderModel._attempt`).
This base runs attempts: a rate limit (429), a server error (5xx, 529), a timeout or a dropped
connection **before any output** is retried after a back-off (the provider's ``Retry-After``
when it gives one, else exponential with jitter), up to ``max_retries`` times. Each retry is
announced to the loop as a ``retry`` chunk, which the loop records as ``llm/retry`` (and
``llm/retry-started`` after the wait) and makes durable before the next attempt. A failure
after output has streamed, or one that is not retryable, ends the response with
``finish {kind: "error", failure}``: the loop's model-error path, never a second partial
message.
"""

from __future__ import annotations

import asyncio
import random
import uuid
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any, Final

from agent_session.agent_loop.models import ModelRequest, RequestSettings
from agent_session.providers.blocks import Blocks, finish
from agent_session.providers.settings import header_settings

__all__ = [
    "RETRY",
    "ProviderFailure",
    "ProviderModel",
    "missing_extra",
    "sdk_client",
    "sdk_failure",
    "without_retries",
]

RETRY: Final = "retry"
"""The chunk type an adapter yields to announce a retry (not a reference chunk: the loop
records it as ``llm/retry``)."""
RETRY_STARTED: Final = "retry-started"


class ProviderFailure(Exception):
    """A failed attempt: its ``LlmFailure``, whether trying again may help, the provider's
    ``Retry-After`` (ms) and what kind of failure it is (``rate-limit``, ``server-error``,
    ``network``, ``error``)."""

    def __init__(
        self,
        failure: dict[str, Any],
        retryable: bool,
        retry_after_ms: int | None = None,
        policy: str = "error",
    ) -> None:
        super().__init__(failure.get("message"))
        self.failure = failure
        self.retryable = retryable
        self.retry_after_ms = retry_after_ms
        self.policy = policy


def missing_extra(package: str, extra: str) -> ImportError:
    """The error for a provider SDK that is not installed."""
    return ImportError(
        f"the {package!r} package is not installed: pip install 'agent-session-runtime[{extra}]'"
    )


class ProviderModel:
    """A model adapter over a provider SDK (see the module docstring); subclasses implement
    :meth:`_attempt` and :meth:`_classify`."""

    provider: str = "provider"
    mapping: str = "provider/1"
    """Which request mapping this adapter is, and its version (``anthropic-messages/1``):
    recorded in each request header as config ``adapter``, so a log says how its requests
    were built from it."""

    def __init__(
        self,
        *,
        max_retries: int = 3,
        base_delay: float = 0.5,
        max_delay: float = 30.0,
        sleep: Any = None,
    ) -> None:
        if max_retries < 0:
            raise ValueError("max_retries must be 0 or more")
        self.max_retries = max_retries
        self.base_delay = base_delay
        self.max_delay = max_delay
        self._sleep = sleep or asyncio.sleep

    async def stream(self, request: ModelRequest) -> AsyncIterator[dict[str, Any]]:
        """The response's chunks, retrying a failed attempt that produced no output."""
        retry = 0
        while True:
            blocks = Blocks()
            try:
                async for chunk in self._attempt(request, blocks):
                    yield chunk
                return
            except Exception as error:
                failed = error if isinstance(error, ProviderFailure) else self._classify(error)
            if blocks.started or not failed.retryable or retry >= self.max_retries:
                yield finish("error", failed.failure)
                return
            retry += 1
            delay = self._delay(retry, failed.retry_after_ms)
            retry_id = str(uuid.uuid4())
            yield {
                "type": RETRY,
                "retryId": retry_id,
                "provider": self.provider,
                "mode": "stream",
                "policyKey": failed.policy,
                "retry": retry,
                "maxRetries": self.max_retries,
                "delayMs": delay,
                "failure": failed.failure,
            }
            await self._sleep(delay / 1000)
            yield {"type": RETRY_STARTED, "retryId": retry_id, "retry": retry}

    def _delay(self, retry: int, retry_after_ms: int | None) -> int:
        """Milliseconds before retry number ``retry``: the provider's ``Retry-After`` if it
        gave one (capped at ``max_delay``), else exponential with full jitter."""
        cap = self.max_delay * 1000
        if retry_after_ms is not None:
            return int(min(retry_after_ms, cap))
        ceiling = min(cap, self.base_delay * 1000 * 2 ** (retry - 1))
        return int(random.uniform(ceiling / 2, ceiling))

    def request_settings(self) -> RequestSettings:
        """What this adapter sends with every request beyond the request itself (its
        settings and ``extra_body``), as the loop records it in the request header."""
        return header_settings(self.mapping, self._sent(), self._defaults())

    def _sent(self) -> Mapping[str, Any]:
        """The fields this adapter adds to every request body, by the provider's names."""
        return {}

    def _defaults(self) -> frozenset[str]:
        """The header config fields the adapter chose rather than the caller."""
        return frozenset()

    def _attempt(self, request: ModelRequest, blocks: Blocks) -> AsyncIterator[dict[str, Any]]:
        raise NotImplementedError

    def _classify(self, error: Exception) -> ProviderFailure:
        raise NotImplementedError


def status_failure(
    status: int | None,
    message: str,
    *,
    kind: str | None,
    headers: Mapping[str, str] | None,
    request_id: str | None,
) -> ProviderFailure:
    """A failure from an HTTP status (``None``: the connection failed or timed out)."""
    from agent_session.providers.blocks import failure

    retry_after = _retry_after_ms(headers)
    if status is None:
        code, retryable, policy = "NETWORK", True, "network"
    elif status == 429:
        code, retryable, policy = "RATE_LIMITED", True, "rate-limit"
    elif status >= 500:
        code, retryable, policy = "SERVER_ERROR", True, "server-error"
    elif status in (401, 403):
        code, retryable, policy = "UNAUTHORIZED", False, "error"
    else:
        code, retryable, policy = "BAD_REQUEST", False, "error"
    text = f"{kind}: {message}" if kind else message
    failed = failure(text, code, status=status, retry_after_ms=retry_after, request_id=request_id)
    return ProviderFailure(failed, retryable, retry_after, policy)


def _retry_after_ms(headers: Mapping[str, str] | None) -> int | None:
    """``retry-after-ms``, or ``retry-after`` in seconds, when the provider sent one."""
    if not headers:
        return None
    for name, scale in (("retry-after-ms", 1.0), ("retry-after", 1000.0)):
        value = headers.get(name)
        if value is None:
            continue
        try:
            return max(0, int(float(value) * scale))
        except ValueError:
            continue
    return None


def sdk_client(
    client: Any,
    make: Callable[[], Any],
    error: type[Exception],
    *,
    name: str,
    variable: str,
    keyless: Callable[[Any], bool] = lambda made: False,
) -> Any:
    """``client``, or one ``make`` builds from the environment. Raises ``ValueError`` naming
    ``variable`` when the SDK cannot build one (``error``), or builds one without a key
    (``keyless``)."""
    if client is not None:
        return client
    hint = f"set {variable}, or pass client={name}(...)"
    try:
        client = make()
    except error as e:
        raise ValueError(f"no {name} client: {e} ({hint})") from None
    if keyless(client):
        raise ValueError(f"no {name} client: {variable} is not set ({hint})")
    return client


def without_retries(client: Any, timeout: float | None) -> Any:
    """The SDK client with its own retries off (the adapter's are recorded) and, when given,
    a per-attempt timeout (retried as a dropped connection is)."""
    options: dict[str, Any] = {"max_retries": 0}
    if timeout is not None:
        options["timeout"] = timeout
    return client.with_options(**options)


def sdk_failure(error: Exception, status_error: type, connection_error: type) -> ProviderFailure:
    """The failure an official SDK's exception says (both SDKs share these shapes): a status
    error's code, the body's error type and message, ``Retry-After`` and request id; a
    connection error or timeout; anything else, not retryable."""
    from agent_session.providers.blocks import failure

    if isinstance(error, status_error):
        body = getattr(error, "body", None)
        body = body if isinstance(body, Mapping) else {}
        detail = body.get("error", body)
        kind = detail.get("type") if isinstance(detail, Mapping) else None
        message = detail.get("message") if isinstance(detail, Mapping) else None
        return status_failure(
            getattr(error, "status_code", None),
            str(message or getattr(error, "message", error)),
            kind=str(kind) if kind else None,
            headers=error.response.headers,  # type: ignore[attr-defined]
            request_id=getattr(error, "request_id", None),
        )
    if isinstance(error, connection_error):
        return status_failure(
            None, str(error), kind=type(error).__name__, headers=None, request_id=None
        )
    return ProviderFailure(failure(f"{type(error).__name__}: {error}", "UNKNOWN"), False)
