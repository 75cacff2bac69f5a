"""The model seam: adapters that stream reference chunks, and the ``llm/stream`` middleware
chain around them.

An adapter implements one method, ``stream(request)``, returning an async iterator of stream
chunks in the reference's wire shape (``{"type": "text-delta", "index": 0, "text": "..."}``).
``ModelService.stream(request)`` runs the ``llm/stream`` chain: each middleware is called as
``middleware(request, next)`` and returns an async iterator; ``next(request)`` constructs the
downstream stream, so a middleware can delay that construction (the checkpoint policy flushes
first).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Protocol

from agent_session.agent_loop.cancel import CancelSignal
from agent_session.session.errors import SessionError
from agent_session.session.live.hooks import Disposer, HookBus

__all__ = [
    "LLM_STREAM",
    "LlmError",
    "ModelAdapter",
    "ModelRequest",
    "ModelService",
    "ModelUnavailableError",
    "RequestSettings",
]


class LlmError(SessionError):
    """A model request failed; ``failure`` is the reference's ``LlmFailure`` JSON."""

    def __init__(self, failure: Mapping[str, Any]) -> None:
        super().__init__(str(failure.get("message", "model request failed")))
        self.failure = dict(failure)


class ModelUnavailableError(SessionError, LookupError):
    """No request can be made with this model configuration (no adapter is registered for
    the provider, or the adapter says at once that it cannot serve the model). The loop
    raises it before a turn writes anything."""


LLM_STREAM: Final = "llm/stream"
"""Middleware ``(request, next) -> AsyncIterator[chunk]`` around every model request."""

Chunk = Mapping[str, Any]
"""One stream chunk in the reference's wire shape."""


@dataclass(frozen=True, slots=True)
class ModelRequest:
    """One model request, built from the session's derived history."""

    provider: str
    """Which registered adapter serves the request."""
    model: str
    """The model name at that provider."""
    messages: Sequence[Any]
    """The derived message history (frozen message mappings)."""
    system: str | None = None
    """The system prompt, if any."""
    tools: Sequence[Mapping[str, Any]] = ()
    """Tool definitions ``{name, description, parameters}`` offered to the model."""
    session_id: str | None = None
    """The live session the request belongs to (the checkpoint policy flushes it)."""
    cancel: CancelSignal = field(default_factory=CancelSignal)
    """Cancellation of the turn the request belongs to."""


@dataclass(frozen=True, slots=True)
class RequestSettings:
    """What an adapter sends with every request beyond the request itself, as the loop's
    ``request/header`` records it, so the log says what each request was sent."""

    config: Mapping[str, Any] = field(default_factory=dict)
    """Header config fields besides ``provider`` and ``model``: the reference's names where
    it has one (``temperature``, ``maxTokens``, ``stop``, ``reasoningEffort``), then
    ``adapter`` (which request mapping, and its version) and ``extraBody`` (every other field
    sent as is)."""
    defaults: frozenset[str] = frozenset()
    """Which of ``maxTokens`` and ``reasoningEffort`` are the adapter's defaults rather than
    the caller's (the header's ``adapterDefaults``)."""

    def __post_init__(self) -> None:
        named = sorted({"provider", "model"} & set(self.config))
        if named:
            raise ValueError(f"request settings cannot name {', '.join(named)}: the loop's do")
        allowed = {"maxTokens", "reasoningEffort"} & set(self.config)
        wrong = sorted(self.defaults - allowed)
        if wrong:
            raise ValueError(
                f"request settings' defaults must be config fields among maxTokens and "
                f"reasoningEffort, not {', '.join(wrong)}"
            )


class ModelAdapter(Protocol):
    """A provider: one method that streams the reference chunks for a request. An adapter
    may also have ``check(model: str) -> None``, which raises
    :class:`ModelUnavailableError` when it can tell at once, without a request, that it
    cannot serve ``model`` (the loop asks before a turn writes anything), and
    ``request_settings() -> RequestSettings``, what it sends with every request (recorded in
    the request header; an adapter without it records none)."""

    def stream(self, request: ModelRequest) -> AsyncIterator[Chunk]: ...


class ModelService:
    """Registered adapters by provider name, and the ``llm/stream`` chain."""

    def __init__(self, hooks: HookBus) -> None:
        self._hooks = hooks
        self._adapters: dict[str, ModelAdapter] = {}

    def register(self, provider: str, adapter: ModelAdapter) -> Disposer:
        """Serve ``provider`` with ``adapter``; the disposer unregisters it."""
        self._adapters[provider] = adapter

        def remove() -> None:
            if self._adapters.get(provider) is adapter:
                del self._adapters[provider]

        return Disposer(remove)

    def adapter(self, provider: str) -> ModelAdapter:
        """The adapter of ``provider``; :class:`ModelUnavailableError` (a ``LookupError``)
        naming the registered ones if none."""
        try:
            return self._adapters[provider]
        except KeyError:
            known = ", ".join(sorted(self._adapters)) or "none"
            raise ModelUnavailableError(
                f'no model adapter is registered for provider "{provider}" (registered: {known})'
            ) from None

    def check(self, provider: str, model: str) -> None:
        """Raise :class:`ModelUnavailableError` when a request for ``model`` at ``provider``
        cannot be made (no adapter, or the adapter's own ``check`` says so); no I/O."""
        check = getattr(self.adapter(provider), "check", None)
        if callable(check):
            check(model)

    def settings(self, provider: str) -> RequestSettings:
        """What the adapter of ``provider`` sends with every request (none when it does not
        say); no I/O."""
        settings = getattr(self.adapter(provider), "request_settings", None)
        made = settings() if callable(settings) else None
        return made if isinstance(made, RequestSettings) else RequestSettings()

    def stream(self, request: ModelRequest) -> AsyncIterator[Chunk]:
        """The request's chunks through the ``llm/stream`` middleware chain. The adapter's
        stream is constructed only when the innermost ``next(request)`` is called."""

        def terminal(final: ModelRequest) -> AsyncIterator[Chunk]:
            return self.adapter(final.provider).stream(final)

        call: Callable[[Any], Any] = self._hooks.chain(LLM_STREAM, terminal)
        stream: AsyncIterator[Chunk] = call(request)
        return stream
