"""The error results a harness gives a tool call that has none of its own: the codes, names
and texts the model reads. Crash repair (``recovery``) writes them into an interrupted log;
the agent loop writes the unknown outcome when a turn is torn down from outside while a tool
body runs. One copy, used by both."""

from __future__ import annotations

from typing import Final

__all__ = [
    "SETTLEMENT",
    "TOOL_NOT_STARTED",
    "TOOL_NOT_STARTED_NAME",
    "TOOL_NOT_STARTED_TEXT",
    "TOOL_OUTCOME_UNKNOWN",
    "TOOL_OUTCOME_UNKNOWN_NAME",
    "TOOL_OUTCOME_UNKNOWN_TEXT",
]

TOOL_NOT_STARTED: Final = "TOOL_NOT_STARTED"
"""Code of the result given to a call the model asked for but that was never recorded."""
TOOL_NOT_STARTED_NAME: Final = "ToolNotStartedError"
TOOL_NOT_STARTED_TEXT: Final = (
    "The tool call was interrupted before the Harness recorded it as started. "
    "Retry it if it is still needed."
)
"""What the model reads for a call that never durably started."""

TOOL_OUTCOME_UNKNOWN: Final = "TOOL_OUTCOME_UNKNOWN"
"""Code of the result given to a recorded call whose body may have run but has no result."""
TOOL_OUTCOME_UNKNOWN_NAME: Final = "ToolOutcomeUnknownError"
TOOL_OUTCOME_UNKNOWN_TEXT: Final = (
    "The tool call was interrupted after it was recorded, but no result was durably recorded. "
    "Its outcome is unknown. Decide whether to retry from the tool semantics: retry only if the "
    "operation is read-only or idempotent; if it may have side effects, first verify external "
    "state or ask the user. Do not retry blindly."
)
"""What the model reads for a call whose side effect may or may not have happened."""

SETTLEMENT: Final = "settlement"
"""The key of a ``tool/result``'s ``meta`` that says how a call a crash interrupted was settled
when the agent resumed (``dispatched``, ``re-run``, ``reconciled``, ``run-after-probe``,
``unknown``; see ``agent_loop.settle``)."""
