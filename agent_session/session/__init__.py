"""The session runtime core: events, lossless JSON, ``Session``, ``SessionStore``, the hook bus
and the ``flush`` durability barrier."""

import importlib.metadata as _metadata

from agent_session.session.errors import (
    ApprovalError,
    ApprovalExpiredError,
    ApprovalMismatchError,
    ApprovalNotPendingError,
    ApprovalPendingError,
    BudgetError,
    BudgetExceededError,
    BudgetPendingError,
    JsonValueError,
    SessionBackendStateError,
    SessionBusyError,
    SessionChangedError,
    SessionCollisionError,
    SessionCopyError,
    SessionDataError,
    SessionDurabilityError,
    SessionErasedError,
    SessionError,
    SessionEventError,
    SessionForkError,
    SessionFormatUnsupportedError,
    SessionHeaderError,
    SessionHeldError,
    SessionLogTooLargeError,
    SessionNotFoundError,
    SessionNotHeldError,
    SessionNotLiveError,
    SessionOpenTurnError,
    SessionPersistenceCorruptionError,
    SessionReentrancyError,
    SessionReplayError,
    SessionSealError,
    SessionSeqError,
    SessionStoreEntryError,
)
from agent_session.session.events.event import (
    EVENT_PAYLOADS,
    KNOWN_EVENT_TYPES,
    SURFACE_EVENT_TYPES,
    SessionEvent,
    SurfaceOp,
    SurfaceReplace,
    register_event_type,
)
from agent_session.session.events.eventlog import EventLog, LazyRun
from agent_session.session.events.header import SESSION_FORMAT_VERSION, SessionHeader
from agent_session.session.events.interruption import Interruption
from agent_session.session.events.surface import SurfaceView
from agent_session.session.json.codec import decode_json, encode_json
from agent_session.session.json.lossless import (
    MAX_SAFE_INTEGER,
    FrozenDict,
    FrozenList,
    JsFloat,
    snapshot,
    thaw,
)
from agent_session.session.live.hooks import Disposer, HookBus
from agent_session.session.live.runtime import Plugin, PluginScope, Runtime
from agent_session.session.live.session import Session
from agent_session.session.live.store import SessionStore

try:
    __version__ = _metadata.version("agent-session-runtime")
except _metadata.PackageNotFoundError:  # run from a source tree that was never installed
    __version__ = "0+unknown"

__all__ = [
    "EVENT_PAYLOADS",
    "KNOWN_EVENT_TYPES",
    "MAX_SAFE_INTEGER",
    "SESSION_FORMAT_VERSION",
    "SURFACE_EVENT_TYPES",
    "ApprovalError",
    "ApprovalExpiredError",
    "ApprovalMismatchError",
    "ApprovalNotPendingError",
    "ApprovalPendingError",
    "BudgetError",
    "BudgetExceededError",
    "BudgetPendingError",
    "Disposer",
    "EventLog",
    "FrozenDict",
    "FrozenList",
    "HookBus",
    "Interruption",
    "JsFloat",
    "JsonValueError",
    "LazyRun",
    "Plugin",
    "PluginScope",
    "Runtime",
    "Session",
    "SessionBackendStateError",
    "SessionBusyError",
    "SessionChangedError",
    "SessionCollisionError",
    "SessionCopyError",
    "SessionDataError",
    "SessionDurabilityError",
    "SessionErasedError",
    "SessionError",
    "SessionEvent",
    "SessionEventError",
    "SessionForkError",
    "SessionFormatUnsupportedError",
    "SessionHeader",
    "SessionHeaderError",
    "SessionHeldError",
    "SessionLogTooLargeError",
    "SessionNotFoundError",
    "SessionNotHeldError",
    "SessionNotLiveError",
    "SessionOpenTurnError",
    "SessionPersistenceCorruptionError",
    "SessionReentrancyError",
    "SessionReplayError",
    "SessionSealError",
    "SessionSeqError",
    "SessionStore",
    "SessionStoreEntryError",
    "SurfaceOp",
    "SurfaceReplace",
    "SurfaceView",
    "__version__",
    "decode_json",
    "encode_json",
    "register_event_type",
    "snapshot",
    "thaw",
]
