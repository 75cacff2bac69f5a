"""The tool seam: registered tools and the ``tools/execute`` middleware chain.

A tool is a plain async function ``fn(args, call) -> str | list[content block] | ToolResult``.
``args`` is the parsed argument JSON (``{}`` for an empty string); ``call.call_id`` is the
model's id for the call, stable across a crash and a retry, so a tool with side effects can
pass it on as its idempotency key. A tool that raises produces an error result
(``isError: true``, ``Error: <message>``); it never crashes the loop. Unknown tools and
malformed argument JSON produce error results the model can read.
"""

from __future__ import annotations

import asyncio
import inspect
import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

from agent_session.agent_loop.cancel import CancelSignal
from agent_session.agent_loop.effects import EFFECTS, Effect, Reconcile
from agent_session.session.events.outcomes import (
    TOOL_OUTCOME_UNKNOWN,
    TOOL_OUTCOME_UNKNOWN_NAME,
    TOOL_OUTCOME_UNKNOWN_TEXT,
)
from agent_session.session.json.lossless import snapshot
from agent_session.session.live.hooks import Disposer, HookBus

if TYPE_CHECKING:
    from agent_session.session.live.session import Session

__all__ = [
    "ABORTED_BEFORE_DISPATCH",
    "TOOLS_EXECUTE",
    "ToolCall",
    "ToolResult",
    "ToolService",
    "ToolSpec",
    "aborted_before_dispatch",
    "as_result",
    "outcome_unknown",
    "recordable",
    "torn_down_result",
]

TOOLS_EXECUTE: Final = "tools/execute"
"""Middleware ``async (call, next) -> ToolResult`` around every tool body."""

ABORTED_BEFORE_DISPATCH: Final = "ABORTED_BEFORE_DISPATCH"
"""Code of the result of a call cancelled before its body started."""


@dataclass(frozen=True, slots=True)
class ToolResult:
    """What a tool call produced."""

    content: Sequence[Mapping[str, Any]]
    """Content blocks for the model (usually one ``text`` block)."""
    is_error: bool = False
    """Whether the call failed; the content says why."""
    error: Mapping[str, str] | None = None
    """Machine-readable ``{name, code}`` of a harness-level failure."""
    meta: Any = None
    """Tool-defined JSON metadata, recorded but not shown to the model."""

    @classmethod
    def text(cls, text: str, *, is_error: bool = False) -> ToolResult:
        """A result with one text block."""
        return cls([{"type": "text", "text": text}], is_error)

    @classmethod
    def failure(cls, message: str, error: Mapping[str, str] | None = None) -> ToolResult:
        """An error result whose text is ``Error: <message>``."""
        return cls([{"type": "text", "text": f"Error: {message}"}], True, error)


def aborted_before_dispatch() -> ToolResult:
    """The canonical result of a call cancelled before its body ran."""
    return ToolResult.failure(
        "tool call aborted before dispatch",
        {"name": "AbortError", "code": ABORTED_BEFORE_DISPATCH},
    )


def outcome_unknown() -> ToolResult:
    """The result of a recorded call whose body started and was torn down before it returned
    (its side effects may or may not have happened): the text crash repair gives it too."""
    return ToolResult(
        [{"type": "text", "text": TOOL_OUTCOME_UNKNOWN_TEXT}],
        True,
        {"name": TOOL_OUTCOME_UNKNOWN_NAME, "code": TOOL_OUTCOME_UNKNOWN},
    )


def torn_down_result(task: asyncio.Future[ToolResult]) -> ToolResult:
    """The result of a started call whose turn is being torn down: its own if the body
    returned one, else the unknown outcome (the body ran, or may have)."""
    if task.done() and not task.cancelled() and task.exception() is None:
        return task.result()
    return outcome_unknown()


ToolFunction = Callable[[Any, "ToolCall"], Awaitable[Any]]
"""``async fn(args, call)``: the tool body."""


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """A registered tool."""

    name: str
    description: str
    parameters: Mapping[str, Any]
    """JSON schema of the arguments, offered to the model."""
    fn: ToolFunction
    exclusive: bool = False
    """Run alone: an exclusive call waits for earlier calls and blocks later ones."""
    effect: Effect = "unsafe"
    """What running the body again does (see :mod:`agent_loop.effects`): how a call a crash
    interrupted is settled."""
    reconcile: Reconcile | None = None
    """An unsafe tool's probe of the outside world, for a call a crash interrupted."""

    def definition(self) -> dict[str, Any]:
        """The ``{name, description, parameters}`` the request header records."""
        return {"name": self.name, "description": self.description, "parameters": self.parameters}


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One tool call on its way through ``tools/execute``."""

    call_id: str
    """The model's id for the call; pass it on as the idempotency key of side effects."""
    name: str
    arguments: str
    """The raw JSON string the model produced."""
    session: Session | None = None
    """The session the call belongs to (the checkpoint policy flushes it)."""
    agent: Any = None
    """The agent dispatching the call, if any."""
    parent: ToolCall | None = None
    """The outer call, for a call dispatched from inside another tool's body."""
    cancel: CancelSignal = field(default_factory=CancelSignal)
    """Cancellation of the turn the call belongs to."""


class ToolService:
    """Registered tools and the ``tools/execute`` chain."""

    def __init__(self, hooks: HookBus) -> None:
        self._hooks = hooks
        self._tools: dict[str, ToolSpec] = {}

    def register(
        self,
        name: str,
        description: str,
        parameters: Mapping[str, Any],
        fn: ToolFunction,
        *,
        exclusive: bool = False,
        effect: Effect = "unsafe",
        reconcile: Reconcile | None = None,
    ) -> Disposer:
        """Register a tool; the disposer unregisters it. ``effect`` (``read``,
        ``idempotent`` or ``unsafe``) and ``reconcile`` say how a call a crash interrupted is
        settled (:mod:`agent_loop.effects`)."""
        if name in self._tools:
            raise ValueError(f'a tool named "{name}" is already registered')
        if effect not in EFFECTS:
            raise ValueError(f"effect must be one of {', '.join(EFFECTS)}, got {effect!r}")
        if reconcile is not None and effect != "unsafe":
            raise ValueError(f"a {effect} tool needs no reconcile probe: it is run again")
        spec = ToolSpec(name, description, dict(parameters), fn, exclusive, effect, reconcile)
        self._tools[name] = spec

        def remove() -> None:
            if self._tools.get(name) is spec:
                del self._tools[name]

        return Disposer(remove)

    def tool(
        self,
        name: str | None = None,
        *,
        description: str = "",
        parameters: Mapping[str, Any] | None = None,
        exclusive: bool = False,
        effect: Effect = "unsafe",
        reconcile: Reconcile | None = None,
    ) -> Callable[[ToolFunction], ToolFunction]:
        """Decorator form of :meth:`register` (name and description default to the
        function's)."""

        def decorate(fn: ToolFunction) -> ToolFunction:
            self.register(
                name or fn.__name__,
                description or inspect.getdoc(fn) or "",
                parameters if parameters is not None else {"type": "object"},
                fn,
                exclusive=exclusive,
                effect=effect,
                reconcile=reconcile,
            )
            return fn

        return decorate

    def get(self, name: str) -> ToolSpec | None:
        """The registered tool, or ``None``."""
        return self._tools.get(name)

    def exclusive(self, name: str) -> bool:
        """Whether the tool ``name`` runs alone (an unknown tool does not)."""
        spec = self._tools.get(name)
        return spec is not None and spec.exclusive

    def definitions(self) -> list[dict[str, Any]]:
        """Definitions of every tool, sorted by name (the canonical header order)."""
        return [self._tools[name].definition() for name in sorted(self._tools)]

    async def execute(self, call: ToolCall) -> ToolResult:
        """Run one call through ``tools/execute``. Never raises for a tool's own failure:
        errors of the body, of the middleware (a failed checkpoint), an unknown tool, bad
        argument JSON and a result that cannot be recorded (:func:`recordable`) all become
        error results."""
        if call.cancel.cancelled:
            return aborted_before_dispatch()
        chain = self._hooks.chain(TOOLS_EXECUTE, self._invoke)
        try:
            result = await chain(call)
            if not isinstance(result, ToolResult):
                return ToolResult.failure(
                    f"tools/execute middleware returned {type(result).__name__}, not a ToolResult"
                )
            return recordable(result)  # (the body's, or one a middleware made)
        except Exception as e:
            return ToolResult.failure(str(e) or type(e).__name__)

    async def _invoke(self, call: ToolCall) -> ToolResult:
        if call.cancel.cancelled:
            return aborted_before_dispatch()
        spec = self._tools.get(call.name)
        if spec is None:
            return ToolResult.failure(
                f'unknown tool "{call.name}"', {"name": "ToolNotFoundError", "code": "UNKNOWN_TOOL"}
            )
        try:
            args = json.loads(call.arguments) if call.arguments.strip() else {}
        except ValueError as e:
            return ToolResult.failure(f"the arguments of {call.name} are not valid JSON: {e}")
        try:
            output = await spec.fn(args, call)
        except Exception as e:
            return ToolResult.failure(str(e) or type(e).__name__)
        return as_result(output)


def as_result(output: Any) -> ToolResult:
    """What a tool body (or a probe's :class:`agent_loop.effects.Applied`) returned, as a
    result: a ``ToolResult`` as is, a string as one text block, a list as content blocks,
    anything else as its JSON text (:func:`recordable` then says whether it can be kept).

    Raises:
        TypeError: ``output`` is none of those and not JSON either.
    """
    if isinstance(output, ToolResult):
        return output
    if isinstance(output, str):
        return ToolResult.text(output)
    if isinstance(output, list):
        return ToolResult(output)
    return ToolResult.text(json.dumps(output))


def recordable(result: ToolResult) -> ToolResult:
    """``result``, checked to be one a log can hold: its content blocks are objects, and
    content, error and meta are lossless JSON.

    Raises:
        TypeError: Saying what cannot be recorded.
    """
    snapshot(list(result.content), "content")
    for index, block in enumerate(result.content):
        if not isinstance(block, Mapping):
            raise TypeError(f"content[{index}] is {type(block).__name__}, not a content block")
    snapshot(result.error, "error")
    snapshot(result.meta, "meta")
    return result
