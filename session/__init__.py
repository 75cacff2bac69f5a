"""The session runtime core: events, lossless JSON, ``Session``, ``SessionStore``, the hook bus
and the ``flush`` durability barrier."""

import importlib.metadata as _metadata

from session.errors import (
    ApprovalError,
    ApprovalExpiredError,
    ApprovalMismatchError,
    ApprovalNotPendingError,
    ApprovalPendingError,
    JsonValueError,
    SessionBackendStateError,
    SessionBusyError,
    SessionChangedError,
    SessionCollisionError,
    SessionCopyError,
    SessionDataError,
    SessionDurabilityError,
    SessionError,
    SessionEventError,
    SessionForkError,
    SessionFormatUnsupportedError,
    SessionHeaderError,
    SessionLogTooLargeError,
    SessionNotFoundError,
    SessionNotHeldError,
    SessionNotLiveError,
    SessionOpenTurnError,
    SessionPersistenceCorruptionError,
    SessionReentrancyError,
    SessionSeqError,
    SessionStoreEntryError,
)
from session.events.event import (
    EVENT_PAYLOADS,
    KNOWN_EVENT_TYPES,
    SURFACE_EVENT_TYPES,
    SessionEvent,
    SurfaceOp,
    SurfaceReplace,
    register_event_type,
)
from session.events.eventlog import EventLog, LazyRun
from session.events.header import SESSION_FORMAT_VERSION, SessionHeader
from session.events.interruption import Interruption
from session.events.surface import SurfaceView
from session.json.codec import decode_json, encode_json
from session.json.lossless import MAX_SAFE_INTEGER, FrozenDict, FrozenList, JsFloat, snapshot, thaw
from session.live.hooks import Disposer, HookBus
from session.live.runtime import Plugin, PluginScope, Runtime
from session.live.session import Session
from session.live.store import SessionStore

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
    "SessionError",
    "SessionEvent",
    "SessionEventError",
    "SessionForkError",
    "SessionFormatUnsupportedError",
    "SessionHeader",
    "SessionHeaderError",
    "SessionLogTooLargeError",
    "SessionNotFoundError",
    "SessionNotHeldError",
    "SessionNotLiveError",
    "SessionOpenTurnError",
    "SessionPersistenceCorruptionError",
    "SessionReentrancyError",
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
