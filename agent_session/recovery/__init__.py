"""Crash repair: the closers that balance an interrupted turn."""

from agent_session.recovery.closers import (
    REPAIR_RESULT_PREFIX,
    TOOL_NOT_STARTED,
    TOOL_NOT_STARTED_TEXT,
    TOOL_OUTCOME_UNKNOWN,
    TOOL_OUTCOME_UNKNOWN_TEXT,
    answers,
    closers,
    crash_point,
    is_balanced,
    is_repair_result,
)

__all__ = [
    "REPAIR_RESULT_PREFIX",
    "TOOL_NOT_STARTED",
    "TOOL_NOT_STARTED_TEXT",
    "TOOL_OUTCOME_UNKNOWN",
    "TOOL_OUTCOME_UNKNOWN_TEXT",
    "answers",
    "closers",
    "crash_point",
    "is_balanced",
    "is_repair_result",
]
