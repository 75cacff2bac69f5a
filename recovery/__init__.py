"""Crash repair: the closers that balance an interrupted turn."""

from recovery.closers import (
    TOOL_NOT_STARTED,
    TOOL_NOT_STARTED_TEXT,
    TOOL_OUTCOME_UNKNOWN,
    TOOL_OUTCOME_UNKNOWN_TEXT,
    answers,
    closers,
    is_balanced,
)

__all__ = [
    "TOOL_NOT_STARTED",
    "TOOL_NOT_STARTED_TEXT",
    "TOOL_OUTCOME_UNKNOWN",
    "TOOL_OUTCOME_UNKNOWN_TEXT",
    "answers",
    "closers",
    "is_balanced",
]
