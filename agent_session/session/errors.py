"""The error hierarchy of the session runtime.

Every error the runtime raises on purpose derives from :class:`SessionError`. Errors that are
also the caller's fault in the ordinary Python sense additionally derive from the matching
built-in (``TypeError`` for values that are not lossless JSON, ``ValueError`` for events or
headers that break a rule), so ``except ValueError`` keeps working for callers who do not know
this library. Every message says what was wrong and where.
"""

from __future__ import annotations

__all__ = [
    "ApprovalError",
    "ApprovalExpiredError",
    "ApprovalMismatchError",
    "ApprovalNotPendingError",
    "ApprovalPendingError",
    "BudgetError",
    "BudgetExceededError",
    "BudgetPendingError",
    "JsonValueError",
    "SessionBackendStateError",
    "SessionBusyError",
    "SessionChangedError",
    "SessionCollisionError",
    "SessionCopyError",
    "SessionDataError",
    "SessionDurabilityError",
    "SessionErasedError",
    "SessionError",
    "SessionEventError",
    "SessionForkError",
    "SessionFormatUnsupportedError",
    "SessionHeaderError",
    "SessionHeldError",
    "SessionLogTooLargeError",
    "SessionNotFoundError",
    "SessionNotHeldError",
    "SessionNotLiveError",
    "SessionOpenTurnError",
    "SessionPersistenceCorruptionError",
    "SessionReentrancyError",
    "SessionSealError",
    "SessionSeqError",
    "SessionStoreEntryError",
]


class SessionError(Exception):
    """Root of every error this library raises on purpose."""


class JsonValueError(SessionError, TypeError):
    """A value is not lossless JSON.

    ``path`` is where the offending value sits (``data.message.content[2]``) and ``reason``
    says what it is. Raised by :func:`session.json.lossless.snapshot`; callers that know the event
    type wrap it in :class:`SessionDataError`.
    """

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"{path} {reason}")
        self.path = path
        self.reason = reason


class SessionDataError(SessionError, TypeError):
    """Event data, surface metadata or a header is not lossless JSON; nothing was stored."""


class SessionEventError(SessionError, ValueError):
    """An event breaks an envelope, surface or seed rule; nothing was stored."""


class SessionHeaderError(SessionError, ValueError):
    """A session header breaks a header rule."""


class SessionReentrancyError(SessionError, RuntimeError):
    """An append was attempted while another append on the same session was publishing."""


class SessionNotFoundError(SessionError, LookupError):
    """No session with that id exists (live in the store, or stored in the backend)."""


class SessionNotLiveError(SessionError):
    """The session object is not the live instance of its id in this store."""


class SessionCollisionError(SessionError):
    """A session with that id already exists (live, stored, or owned by another writer)."""


class SessionBusyError(SessionCollisionError):
    """A live writer elsewhere (another process, or another backend) holds the session now:
    nothing was done with it; try again once that writer stopped."""


class SessionForkError(SessionError):
    """A fork was refused. ``code`` is one of ``SESSION_ALREADY_EXISTS``, ``SESSION_NOT_FOUND``,
    ``SESSION_NOT_LIVE``, ``INVALID_BOUNDARY`` or ``OPEN_TURN``, as in the reference."""

    def __init__(self, message: str, code: str) -> None:
        super().__init__(message)
        self.code = code


class SessionReplayError(SessionError):
    """A replay cannot go on from its log. ``code`` is ``NOTHING_TO_REPLAY`` (the session has
    no turn) or ``REPLAY_DIVERGED`` (the replayed run asked the model more than the log
    answered)."""

    def __init__(self, message: str, code: str) -> None:
        super().__init__(message)
        self.code = code


class SessionPersistenceCorruptionError(SessionError):
    """A stored log is damaged in its committed region; the message names the file and line."""


class SessionStoreEntryError(SessionPersistenceCorruptionError):
    """An entry of a store is not what its layout says: a symbolic link, FIFO, device or
    directory where a regular file or a directory belongs. It is refused without being
    followed, opened for writing or read, and only that session is affected."""


class SessionFormatUnsupportedError(SessionError):
    """A stored log uses a format this build does not read (newer or older); nothing is
    damaged, and the message names the direction."""


class SessionLogTooLargeError(SessionFormatUnsupportedError):
    """A stored log is larger than the backend is configured to read into memory
    (``max_log_bytes``); nothing is damaged, and nothing was read."""


class SessionDurabilityError(SessionError):
    """A write could not be made durable and could not be rolled back; the session refuses
    further appends until it is reopened. ``errors`` holds the underlying failures (the
    write's, then the rollback's)."""

    def __init__(self, message: str, errors: tuple[BaseException, ...] = ()) -> None:
        super().__init__(message)
        self.errors = errors


class SessionSeqError(SessionError, ValueError):
    """A batch does not continue the stored log: an event's seq is not the next one."""


class SessionOpenTurnError(SessionError):
    """A cold read of a session whose live turn is open (use the live ``Session``)."""


class SessionChangedError(SessionError):
    """A stored log kept changing (growing, shrinking, being replaced) while it was read or
    repaired; nothing was written. Retry once the other writer is done."""


class SessionBackendStateError(SessionError):
    """A persistence backend was used in a state that cannot serve the call: installed in
    another runtime, not installed in any, none installed, or closed."""


class SessionNotHeldError(SessionError):
    """A write to a stored log this instance does not hold the writer lock of (acquire it,
    or load or resume the session, first); nothing was written."""


class SessionCopyError(SessionError):
    """A copied session would not read back byte-identical in the target; the copy was
    removed from the target."""


class ApprovalError(SessionError):
    """A decision on a parked tool call cannot be made or carried out; nothing was written."""


class ApprovalNotPendingError(ApprovalError, LookupError):
    """No parked call with that id waits for a decision in the session (never asked,
    already decided, or already carried out); the message says which."""


class ApprovalExpiredError(ApprovalError):
    """The parked call's deadline passed: it was decided ``cancelled``, not as asked."""


class ApprovalMismatchError(ApprovalError):
    """A decision names other arguments than the call's recorded ones (a digest that does
    not match, or an approval of a call whose ask saw other arguments): nothing is
    decided."""


class ApprovalPendingError(ApprovalError):
    """A new turn on a session whose turn is parked for an approval: decide the parked
    call, then resume the agent."""


class BudgetError(SessionError, ValueError):
    """A spend budget cannot be set or raised as asked (a limit that is not a number ≥ 0, a
    cost limit without prices); nothing was written."""


class BudgetExceededError(SessionError):
    """A model call would breach the session's budget: it was not made, and the turn is
    parked (durably) until the budget is raised."""


class BudgetPendingError(SessionError):
    """A new turn on a session whose turn is parked over its budget: raise the budget
    (``agent-session budget raise``, ``set_stored_budget(..., raising=True)``), then call
    ``agent.resume()``."""


class SessionHeldError(SessionError):
    """A delete (``rm``, ``purge``, ``copy --move``, an archive's drop, a framework's own
    delete) of a session under a legal hold; nothing was deleted. The message names the
    hold: release it first (``agent-session release``)."""


class SessionSealError(SessionPersistenceCorruptionError):
    """A sealed (encrypted) session cannot be read as it should: a row that should be
    sealed is not (it fails closed), a sealed row does not authenticate, or no keyring
    that holds its key was given."""


class SessionErasedError(SessionError, LookupError):
    """The session's content was erased: its key is deleted, so no copy of it can be read
    again. Its seqs, sizes and chain still verify."""
