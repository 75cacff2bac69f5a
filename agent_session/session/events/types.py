"""The event vocabulary: one constant per event type this build knows, used everywhere
instead of string literals. Imports nothing, so every module can use it."""

from __future__ import annotations

from typing import Final

__all__ = [
    "ADK_EVENT",
    "APPROVAL_ASKED",
    "APPROVAL_DECIDED",
    "APPROVAL_POLICY",
    "ASSISTANT_CHUNK",
    "ASSISTANT_MESSAGE",
    "AUDIT_ANCHOR",
    "BUDGET_EXCEEDED",
    "BUDGET_RESERVED",
    "BUDGET_SET",
    "CLAUDE_ENTRY",
    "CLAUDE_SUMMARY",
    "COMPACTION_END",
    "COMPACTION_START",
    "COMPACTION_SUMMARY",
    "CONTEXT_COMPACTED",
    "END_SEED",
    "ENGINE_STEP",
    "FRAMEWORK_ITEM",
    "FRAMEWORK_ITEMS_FORGOTTEN",
    "HOLD_RELEASED",
    "HOLD_SET",
    "INBOX_SPLICED",
    "INTEGRATION_EVENT_TYPES",
    "LABEL_SET",
    "LANGGRAPH_CHECKPOINT",
    "LANGGRAPH_WRITES",
    "LEGACY_HEADER_DELTA",
    "LLM_RETRY",
    "LLM_RETRY_STARTED",
    "MARKED_IGNORABLE",
    "REQUEST_CONTEXT",
    "REQUEST_HEADER",
    "STEP_END",
    "STEP_START",
    "SUBAGENT_SPAWNED",
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
APPROVAL_ASKED: Final = "approval/asked"
APPROVAL_DECIDED: Final = "approval/decided"
APPROVAL_POLICY: Final = "approval/policy"
TOOL_CALL: Final = "tool/call"
TOOL_RESULT: Final = "tool/result"
LLM_RETRY: Final = "llm/retry"
LLM_RETRY_STARTED: Final = "llm/retry-started"
TODO_WRITE: Final = "todo/write"
END_SEED: Final = "session/end-seed"
LEGACY_HEADER_DELTA: Final = "request/header-delta"
"""Retired: refused everywhere, by the reference too."""

FRAMEWORK_ITEM: Final = "openai-agents/item"
"""``{item}``: an OpenAI Agents SDK item no event of this vocabulary expresses (a hosted tool
call, an MCP call, a compaction ...), kept verbatim (``agent_session.integrations``)."""
FRAMEWORK_ITEMS_FORGOTTEN: Final = "openai-agents/forgotten"
"""``{seqs}``: earlier :data:`FRAMEWORK_ITEM` events that a ``pop_item`` or ``clear_session``
took out of the session's item history (the events themselves stay in the log)."""
ADK_EVENT: Final = "google-adk/event"
"""``{event}``: a Google ADK event no event of this vocabulary expresses (a state or artifact
change alone, a transfer, an escalation, code execution ...), kept verbatim
(``agent_session.integrations.google_adk``)."""
LANGGRAPH_CHECKPOINT: Final = "langgraph/checkpoint"
"""``{ns, id, parent, checkpoint, metadata | metadataTyped, blobs}``: one LangGraph
``put`` (``agent_session.integrations.langgraph``)."""
LANGGRAPH_WRITES: Final = "langgraph/writes"
"""``{ns, checkpoint, task, path, writes}``: one LangGraph ``put_writes``."""
CLAUDE_ENTRY: Final = "claude-code/entry"
"""``{entry}``: one Claude Agent SDK transcript entry, kept verbatim
(``agent_session.integrations.claude_agent_sdk``)."""
CLAUDE_SUMMARY: Final = "claude-code/summary"
"""``{summary}``: the SDK's folded summary of a main transcript after an append."""
ENGINE_STEP: Final = "engine/step"
"""``{key, seqs}``: the events a durable-execution engine's step appended, by the step's
identity (``agent_session.engines``); written after them, in the same flush."""
AUDIT_ANCHOR: Final = "audit/anchor"
"""``{chain, from, through, hash, lines, header}``: the running hash of a chained log's
stored lines through seq ``through`` (``agent_session.audit``), written at checkpoints."""
BUDGET_SET: Final = "budget/set"
"""``{limits, prices?, by?, reason?}``: the session's spend budget from here on
(``agent_session.governance.budgets``); a raise is a later one."""
BUDGET_RESERVED: Final = "budget/reserved"
"""``{turn, step, provider, model, inputTokens, outputTokens}``: the bound of a model request
about to be made under a budget, durable before it goes out."""
BUDGET_EXCEEDED: Final = "budget/exceeded"
"""``{turn, step, spent, bound, limits, over}``: a model request that would breach the
budget was not made; the turn is parked until the budget is raised."""
LABEL_SET: Final = "label/set"
"""``{labels}``: labels of the session from here on (a key with ``null`` removes it)
(``agent_session.governance.labels``)."""
HOLD_SET: Final = "hold/set"
"""``{reason, by?}``: a legal hold on the session from here on: every delete path refuses it
until a ``hold/released`` (``agent_session.governance.holds``)."""
HOLD_RELEASED: Final = "hold/released"
"""``{holds, reason, by?}``: the holds placed at the seqs ``holds`` no longer stand."""
COMPACTION_START: Final = "compaction/start"
"""``{}``: the reference's opening of a compaction; a summary replaces the surface next."""
COMPACTION_SUMMARY: Final = "compaction/summary"
"""``{}``: the reference's mark that the next ``user/message`` is the compaction's summary."""
COMPACTION_END: Final = "compaction/end"
"""``{}``: the reference's closing of a compaction."""
CONTEXT_COMPACTED: Final = "context/compacted"
"""``{start, summary, trigger, turn, requested, shadowed, estimatedTokensBefore,
estimatedTokensAfter, summarizer?}``: what a compaction did, written inside its
``compaction/*`` bracket after the summary (``agent_session.agent_loop.compaction``); a
resume reads the log from ``start`` on (``session.events.compaction``)."""
SUBAGENT_SPAWNED: Final = "subagent/spawned"
"""``{callId, session, depth}``: the tool call ``callId`` of this session runs a child agent
in session ``session``; durable before the child's first model request
(``agent_session.agent_loop.subagents``)."""
MARKED_IGNORABLE: Final = frozenset(
    {
        CONTEXT_COMPACTED,
        SUBAGENT_SPAWNED,
        LANGGRAPH_CHECKPOINT,
        LANGGRAPH_WRITES,
        CLAUDE_ENTRY,
        CLAUDE_SUMMARY,
        ENGINE_STEP,
        AUDIT_ANCHOR,
        BUDGET_SET,
        BUDGET_RESERVED,
        BUDGET_EXCEEDED,
        LABEL_SET,
        HOLD_SET,
        HOLD_RELEASED,
    }
)
"""Types every event of carries ``ignorable: true``, so the reference (which knows none of
them) skips them and still loads the log. A SQLite row has no column for the flag: the
rows of these types drop it and give it back when read (the type says it)."""
INTEGRATION_EVENT_TYPES: Final = (
    frozenset({FRAMEWORK_ITEM, FRAMEWORK_ITEMS_FORGOTTEN, ADK_EVENT}) | MARKED_IGNORABLE
)
"""Types this build's framework integrations write: every reader of this build knows them,
so a log written through an integration loads without importing it. They never enter the
surface."""
