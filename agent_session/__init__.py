"""agent-session-runtime: an LLM agent's conversation as a crash-safe, event-sourced log.

One import for the common jobs::

    from agent_session import AgentRuntime, checkpoint_policy, open_store

Every name below is loaded on first use, so importing this package (and running the
``agent-session`` command) stays fast and an optional extra is needed only for the names that
use it (``EventLogSession`` and ``DurableRunHooks``: ``[openai-agents]``;
``EventLogSessionService``: ``[google-adk]``; ``EventLogSaver``: ``[langgraph]``;
``EventLogSessionStore``: ``[claude-agent-sdk]``; ``otel_exporter``: ``[otel]``; a
``postgresql://`` store: ``[postgres]``).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agent_session.agent_loop import (
        Agent as Agent,
    )
    from agent_session.agent_loop import (
        AgentRuntime as AgentRuntime,
    )
    from agent_session.agent_loop import (
        ModelRequest as ModelRequest,
    )
    from agent_session.agent_loop import (
        ModelUnavailableError as ModelUnavailableError,
    )
    from agent_session.agent_loop import (
        RequestSettings as RequestSettings,
    )
    from agent_session.agent_loop import (
        ScriptedCall as ScriptedCall,
    )
    from agent_session.agent_loop import (
        ScriptedModel as ScriptedModel,
    )
    from agent_session.agent_loop import (
        ScriptedStep as ScriptedStep,
    )
    from agent_session.agent_loop import (
        ToolCall as ToolCall,
    )
    from agent_session.agent_loop import (
        ToolResult as ToolResult,
    )
    from agent_session.agent_loop.approval import set_approval_policy as set_approval_policy
    from agent_session.agent_loop.approval import user_approval as user_approval
    from agent_session.agent_loop.compaction import CompactionPolicy as CompactionPolicy
    from agent_session.agent_loop.effects import Applied as Applied
    from agent_session.agent_loop.effects import NotApplied as NotApplied
    from agent_session.agent_loop.effects import Unknown as Unknown
    from agent_session.agent_loop.effects import effect_of_mcp as effect_of_mcp
    from agent_session.agent_loop.parking import AWAITING_APPROVAL as AWAITING_APPROVAL
    from agent_session.agent_loop.parking import decide as decide
    from agent_session.agent_loop.spending import AWAITING_BUDGET as AWAITING_BUDGET
    from agent_session.audit import SigningError as SigningError
    from agent_session.audit import new_key as new_key
    from agent_session.audit import sign_anchors as sign_anchors
    from agent_session.audit.stored import check_store_log as check_store_log
    from agent_session.checkpoints import checkpoint_policy as checkpoint_policy
    from agent_session.deciders import PendingApproval as PendingApproval
    from agent_session.deciders import approve as approve
    from agent_session.deciders import pending_approvals as pending_approvals
    from agent_session.deciders import reject as reject
    from agent_session.governance.budgets import budget_report as budget_report
    from agent_session.governance.budgets import set_budget as set_budget
    from agent_session.governance.budgets import set_stored_budget as set_stored_budget
    from agent_session.governance.holds import hold_live as hold_live
    from agent_session.governance.holds import place_hold as place_hold
    from agent_session.governance.holds import release_hold as release_hold
    from agent_session.governance.labels import labels_of as labels_of
    from agent_session.governance.labels import set_labels as set_labels
    from agent_session.governance.labels import set_stored_labels as set_stored_labels
    from agent_session.governance.redaction import redaction as redaction
    from agent_session.governance.retention import purge_store as purge_store
    from agent_session.governance.windows import spend_windows as spend_windows
    from agent_session.integrations.claude_agent_sdk import (
        EventLogSessionStore as EventLogSessionStore,
    )
    from agent_session.integrations.google_adk import (
        EventLogSessionService as EventLogSessionService,
    )
    from agent_session.integrations.langgraph import EventLogSaver as EventLogSaver
    from agent_session.integrations.openai_agents import (
        DurableRunHooks as DurableRunHooks,
    )
    from agent_session.integrations.openai_agents import (
        EventLogSession as EventLogSession,
    )
    from agent_session.lineage.fork import Forked as Forked
    from agent_session.lineage.fork import fork_session as fork_session
    from agent_session.lineage.rewind import current_branch as current_branch
    from agent_session.lineage.rewind import rewind_session as rewind_session
    from agent_session.otel.export import TraceExportError as TraceExportError
    from agent_session.otel.live import otel_exporter as otel_exporter
    from agent_session.otel.settings import TraceSettingsError as TraceSettingsError
    from agent_session.persistence_jsonl import JsonlPersistence as JsonlPersistence
    from agent_session.persistence_postgres import PostgresPersistence as PostgresPersistence
    from agent_session.persistence_sqlite import SqlitePersistence as SqlitePersistence
    from agent_session.recovery import (
        TOOL_NOT_STARTED as TOOL_NOT_STARTED,
    )
    from agent_session.recovery import (
        TOOL_OUTCOME_UNKNOWN as TOOL_OUTCOME_UNKNOWN,
    )
    from agent_session.sealing import Keyring as Keyring
    from agent_session.see.prices import PriceTableError as PriceTableError
    from agent_session.session import ApprovalError as ApprovalError
    from agent_session.session import ApprovalExpiredError as ApprovalExpiredError
    from agent_session.session import ApprovalMismatchError as ApprovalMismatchError
    from agent_session.session import ApprovalNotPendingError as ApprovalNotPendingError
    from agent_session.session import ApprovalPendingError as ApprovalPendingError
    from agent_session.session import BudgetError as BudgetError
    from agent_session.session import BudgetExceededError as BudgetExceededError
    from agent_session.session import BudgetPendingError as BudgetPendingError
    from agent_session.session import (
        Interruption as Interruption,
    )
    from agent_session.session import (
        JsonValueError as JsonValueError,
    )
    from agent_session.session import (
        Runtime as Runtime,
    )
    from agent_session.session import (
        Session as Session,
    )
    from agent_session.session import (
        SessionBackendStateError as SessionBackendStateError,
    )
    from agent_session.session import (
        SessionBusyError as SessionBusyError,
    )
    from agent_session.session import (
        SessionChangedError as SessionChangedError,
    )
    from agent_session.session import (
        SessionCollisionError as SessionCollisionError,
    )
    from agent_session.session import (
        SessionCopyError as SessionCopyError,
    )
    from agent_session.session import (
        SessionDataError as SessionDataError,
    )
    from agent_session.session import (
        SessionDurabilityError as SessionDurabilityError,
    )
    from agent_session.session import (
        SessionErasedError as SessionErasedError,
    )
    from agent_session.session import (
        SessionError as SessionError,
    )
    from agent_session.session import (
        SessionEvent as SessionEvent,
    )
    from agent_session.session import (
        SessionEventError as SessionEventError,
    )
    from agent_session.session import (
        SessionForkError as SessionForkError,
    )
    from agent_session.session import (
        SessionFormatUnsupportedError as SessionFormatUnsupportedError,
    )
    from agent_session.session import (
        SessionHeader as SessionHeader,
    )
    from agent_session.session import (
        SessionHeaderError as SessionHeaderError,
    )
    from agent_session.session import (
        SessionHeldError as SessionHeldError,
    )
    from agent_session.session import (
        SessionLogTooLargeError as SessionLogTooLargeError,
    )
    from agent_session.session import (
        SessionNotFoundError as SessionNotFoundError,
    )
    from agent_session.session import (
        SessionNotHeldError as SessionNotHeldError,
    )
    from agent_session.session import (
        SessionNotLiveError as SessionNotLiveError,
    )
    from agent_session.session import (
        SessionOpenTurnError as SessionOpenTurnError,
    )
    from agent_session.session import (
        SessionPersistenceCorruptionError as SessionPersistenceCorruptionError,
    )
    from agent_session.session import (
        SessionReentrancyError as SessionReentrancyError,
    )
    from agent_session.session import (
        SessionReplayError as SessionReplayError,
    )
    from agent_session.session import (
        SessionSealError as SessionSealError,
    )
    from agent_session.session import (
        SessionSeqError as SessionSeqError,
    )
    from agent_session.session import (
        SessionStoreEntryError as SessionStoreEntryError,
    )
    from agent_session.session.events.builders import (
        assistant_message as assistant_message,
    )
    from agent_session.session.events.builders import (
        model_message as model_message,
    )
    from agent_session.session.events.builders import (
        step_end as step_end,
    )
    from agent_session.session.events.builders import (
        step_start as step_start,
    )
    from agent_session.session.events.builders import (
        tool_call as tool_call,
    )
    from agent_session.session.events.builders import (
        tool_call_block as tool_call_block,
    )
    from agent_session.session.events.builders import (
        tool_result as tool_result,
    )
    from agent_session.session.events.builders import (
        tool_result_message as tool_result_message,
    )
    from agent_session.session.events.builders import (
        turn_end as turn_end,
    )
    from agent_session.session.events.builders import (
        turn_start as turn_start,
    )
    from agent_session.session.events.builders import (
        user_message as user_message,
    )
    from agent_session.session.events.parked import ParkedCall as ParkedCall
    from agent_session.session.events.parked import arguments_digest as arguments_digest
    from agent_session.session.events.requests import LoggedRequest as LoggedRequest
    from agent_session.session.events.requests import logged_requests as logged_requests
    from agent_session.session.events.stats import session_stats as session_stats
    from agent_session.session.persistence.memory import (
        MemoryPersistence as MemoryPersistence,
    )
    from agent_session.session.persistence.memory import (
        MemoryStore as MemoryStore,
    )
    from agent_session.session.persistence.service import SessionPersistence as SessionPersistence
    from agent_session.stores import STORE_ENV as STORE_ENV
    from agent_session.stores import open_store as open_store


def _homes() -> dict[str, str]:
    """Each exported name and the module it comes from, read from the imports above (the one
    list of what this package exports)."""
    import ast
    from pathlib import Path

    tree = ast.parse(Path(__file__).read_text(encoding="utf-8"))
    guarded = next(node for node in tree.body if isinstance(node, ast.If))
    return {
        alias.name: node.module
        for node in guarded.body
        if isinstance(node, ast.ImportFrom) and node.module
        for alias in node.names
    }


def __getattr__(name: str) -> Any:
    homes = globals().get("_HOME_OF")
    if homes is None:
        homes = globals()["_HOME_OF"] = _homes()
    if name == "__all__":
        return sorted(homes)
    module = homes.get(name)
    if module is None:
        raise AttributeError(f"module 'agent_session' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # the next lookup does not come here
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__getattr__("__all__")})
