"""The exit codes of every ``agent-session`` command, and the errors that choose them.

| code | meaning |
|---|---|
| 0 | done; every session named or found is healthy |
| 1 | a session needs recovery (interrupted, or a torn tail to cut) |
| 2 | a session is corrupt, unsupported, or invalid for a provider; or a writer holds it |
| 3 | not found: no such session, or no such store root |
| 4 | usage error: a bad option, argument or environment setting |
| 5 | I/O or permission error from the operating system; an entry it cannot read |
| 70 | a defect of this tool: its traceback is printed (without any password) |
| 130 | interrupted (Ctrl-C) |
| 141 | stdout was closed early (``| head``): ended quietly, as a command killed by SIGPIPE |

When a command judges several sessions, it exits with the highest code among them.
"""

from __future__ import annotations

from typing import Final

__all__ = [
    "CORRUPT",
    "INTERRUPTED",
    "IO_ERROR",
    "NEEDS_RECOVERY",
    "NOT_FOUND",
    "OK",
    "STATUS_CODES",
    "STDOUT_CLOSED",
    "UNEXPECTED",
    "USAGE",
    "NotFound",
    "UserError",
]

OK: Final = 0
NEEDS_RECOVERY: Final = 1
CORRUPT: Final = 2
NOT_FOUND: Final = 3
USAGE: Final = 4
IO_ERROR: Final = 5
UNEXPECTED: Final = 70
INTERRUPTED: Final = 130
STDOUT_CLOSED: Final = 141

STATUS_CODES: Final = {
    "balanced": OK,
    "open": OK,
    "awaiting-approval": OK,
    "awaiting-budget": OK,
    "interrupted": NEEDS_RECOVERY,
    "torn tail": NEEDS_RECOVERY,
    "not found": NOT_FOUND,
    "unreadable": IO_ERROR,
}
"""The code of a session's status; every other status (corrupt, unsupported, invalid) is
:data:`CORRUPT`."""


class UserError(Exception):
    """A problem the user can fix: printed as one line; exits with ``code`` (by default
    :data:`USAGE`)."""

    code: int = USAGE

    def __init__(self, message: str, *, code: int | None = None) -> None:
        super().__init__(message)
        if code is not None:
            self.code = code


class NotFound(UserError):
    """A session or store root that does not exist: exits :data:`NOT_FOUND`."""

    code = NOT_FOUND
