"""Tool approvals in the reference's format (``@deepseek-ai/dsh-user-approval``): the events,
their fixed texts and the policy fold.

A ``tools/pre-execute`` listener answers a tool call ``allow``, ``deny`` or ``ask``; an ask goes
to the approval service, which logs ``approval/asked {id, toolName, callId?, reason?}``, asks
its answerers, and logs ``approval/decided {id, outcome}`` with one of four outcomes. Only
``allowed-once`` lets the body run; every other outcome is an error result whose text says why.
The effective policy of a session (``ask`` or ``never``) is the last ``approval/policy`` event
of its log.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Final, Literal

__all__ = [
    "APPROVAL_ASKED",
    "APPROVAL_DECIDED",
    "APPROVAL_POLICY",
    "OUTCOMES",
    "POLICIES",
    "Outcome",
    "Policy",
    "denial",
    "effective_policy",
    "policy_notice",
    "runtime_context",
]

APPROVAL_ASKED: Final = "approval/asked"
APPROVAL_DECIDED: Final = "approval/decided"
APPROVAL_POLICY: Final = "approval/policy"

Outcome = Literal["allowed-once", "rejected", "cancelled", "unavailable"]
OUTCOMES: Final[tuple[Outcome, ...]] = ("allowed-once", "rejected", "cancelled", "unavailable")
Policy = Literal["ask", "never"]
POLICIES: Final[tuple[Policy, ...]] = ("ask", "never")

_SENTENCES: Final[dict[Policy, str]] = {
    "ask": (
        "Approval policy: ask. Operations that require approval may ask through the "
        "configured answerers; without an available answerer, the request fails closed."
    ),
    "never": (
        "Approval prompts are disabled in this session: actions that require approval are "
        "rejected automatically — do not request sandbox escalation (do not set "
        "`sandbox_permissions`)."
    ),
}
"""What the model reads of each policy (the runtime-context section ``approval:policy``)."""
_CONTEXT: Final = (
    "Current runtime context. This snapshot supersedes earlier runtime-context snapshots.\n\n"
)
CONTEXT_PLUGIN: Final = "@deepseek-ai/dsh-system-prompt"
POLICY_PLUGIN: Final = "user-approval"


def denial(outcome: Outcome, tool: str) -> str:
    """The reason a call the approval did not allow is refused with (the model reads
    ``Error: `` and this)."""
    if outcome == "rejected":
        return f'the user rejected tool "{tool}"'
    if outcome == "cancelled":
        return f'approval for tool "{tool}" was cancelled'
    return f'tool "{tool}" requires approval, but no approval channel is available'


def unsupported(tool: str, reason: str | None) -> str:
    """The reason an ``ask`` is refused with when no approval service is mounted."""
    return reason or f'tool "{tool}" requires approval (not yet supported)'


def effective_policy(events: Iterable[Any]) -> Policy | None:
    """The policy of the last ``approval/policy`` event of ``events``; ``None`` when the log
    never switched (the service's configured policy applies)."""
    policy: Policy | None = None
    for event in events:
        if getattr(event, "type", None) == APPROVAL_POLICY:
            value = event.data.get("policy")
            policy = value if value in POLICIES else policy
    return policy


def runtime_context(policy: Policy) -> dict[str, Any]:
    """The runtime-context ``user/message`` data (without its id) the loop adds when the
    approval service is mounted, for ``policy``."""
    sentence = _SENTENCES[policy]
    return {
        "content": [{"type": "text", "text": _CONTEXT + sentence}],
        "source": {
            "kind": "plugin",
            "plugin": CONTEXT_PLUGIN,
            "form": "snapshot",
            "sections": [{"name": "approval:policy", "text": sentence}],
        },
        "role": "user",
    }


def policy_notice(old: Policy, new: Policy) -> dict[str, Any]:
    """The ``user/message`` data (without its id) queued for the agent's next step when the
    policy changes."""
    text = f'The approval policy changed from "{old}" to "{new}" (changed by the user).'
    return {
        "content": [{"type": "text", "text": text}],
        "source": {"kind": "plugin", "plugin": POLICY_PLUGIN},
        "role": "user",
    }
