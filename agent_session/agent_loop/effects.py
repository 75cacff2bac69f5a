"""What a tool says about its own effect, so that a call a crash interrupted can be settled
honestly: its effect class, and for an unsafe tool an optional probe of the outside world.

- ``read``: the tool has no external effect; running it again is harmless.
- ``idempotent``: running it again under the same call id has the effect at most once (the
  tool sends ``call.call_id`` as its idempotency key).
- ``unsafe`` (the default): running it again may repeat the effect. Only a probe
  (``reconcile``) can say whether it happened: :class:`Applied` (with the result to record),
  :class:`NotApplied` (the body runs once), or :class:`Unknown` (the call stays
  ``TOOL_OUTCOME_UNKNOWN``).

MCP tools declare the same through their annotations: :func:`effect_of_mcp`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Literal

if TYPE_CHECKING:
    from agent_session.agent_loop.tools import ToolCall

__all__ = [
    "EFFECTS",
    "Applied",
    "Effect",
    "NotApplied",
    "Reconcile",
    "Reconciled",
    "Unknown",
    "effect_of_mcp",
]

Effect = Literal["read", "idempotent", "unsafe"]
"""How a tool's body affects the world outside the session."""
EFFECTS: Final[tuple[Effect, ...]] = ("read", "idempotent", "unsafe")


@dataclass(frozen=True, slots=True)
class Applied:
    """The probe found the effect of the call in the outside world: ``result`` is what the
    call's result is recorded as (a string, content blocks, or a ``ToolResult``)."""

    result: Any


@dataclass(frozen=True, slots=True)
class NotApplied:
    """The probe found no trace of the call: its body may run, once."""


@dataclass(frozen=True, slots=True)
class Unknown:
    """The probe cannot tell: the call stays ``TOOL_OUTCOME_UNKNOWN``."""


Reconciled = Applied | NotApplied | Unknown
"""What a probe answers."""
Reconcile = Callable[["ToolCall"], Awaitable[Reconciled]]
"""``async reconcile(call)``: ask the outside world, by ``call.call_id`` (the idempotency key
the body sent), whether the call's effect happened. A probe that raises answers
:class:`Unknown`."""


def effect_of_mcp(annotations: Mapping[str, Any] | None) -> Effect:
    """The effect class of an MCP tool from its annotations: ``readOnlyHint`` → ``read``,
    ``idempotentHint`` → ``idempotent``, anything else (the hints are absent, false, or not
    booleans) → ``unsafe``, MCP's own default."""
    hints = annotations or {}
    if hints.get("readOnlyHint") is True:
        return "read"
    if hints.get("idempotentHint") is True:
        return "idempotent"
    return "unsafe"
