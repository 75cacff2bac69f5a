"""The event vocabulary: one constant per event type this build knows, used everywhere
instead of string literals. Imports nothing, so every module can use it."""

from __future__ import annotations

from typing import Final

__all__ = [
    "ASSISTANT_CHUNK",
    "ASSISTANT_MESSAGE",
    "END_SEED",
    "INBOX_SPLICED",
    "LEGACY_HEADER_DELTA",
    "LLM_RETRY",
    "LLM_RETRY_STARTED",
    "REQUEST_CONTEXT",
    "REQUEST_HEADER",
    "STEP_END",
    "STEP_START",
    "TODO_WRITE",
    "TOOL_CALL",
    "TOOL_RESULT",
    "TURN_END",
    "TURN_START",
    "USER_MESSAGE",
]

INBOX_SPLICED: Final = "agent/inbox/spliced"
TURN_START: Final = "turn/start"
TURN_END: Final = "turn/end"
STEP_START: Final = "step/start"
STEP_END: Final = "step/end"
USER_MESSAGE: Final = "user/message"
REQUEST_HEADER: Final = "request/header"
REQUEST_CONTEXT: Final = "request/context"
ASSISTANT_CHUNK: Final = "assistant/chunk"
ASSISTANT_MESSAGE: Final = "assistant/message"
TOOL_CALL: Final = "tool/call"
TOOL_RESULT: Final = "tool/result"
LLM_RETRY: Final = "llm/retry"
LLM_RETRY_STARTED: Final = "llm/retry-started"
TODO_WRITE: Final = "todo/write"
END_SEED: Final = "session/end-seed"
LEGACY_HEADER_DELTA: Final = "request/header-delta"
"""Retired: refused everywhere, by the reference too."""
