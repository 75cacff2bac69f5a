"""Failpoints for crash tests: named places where a backend's process SIGKILLs itself when
the environment asks, so a test can kill a real writer exactly between two steps of a write
(after a write and before its fsync, before a transaction's commit ...). Unset in
production, where :func:`failpoint` is one string comparison.

Internal to ``session.persistence``: a backend imports what it needs of this module from
:mod:`session.persistence.kit`, whose names stay.
"""

from __future__ import annotations

import os
import signal

__all__ = ["FAILPOINT_ENV", "armed", "failpoint"]

FAILPOINT_ENV = "AGENT_SESSION_FAILPOINT"
"""Environment variable naming a failpoint (``name`` or ``name@N`` for its N-th hit) at which
the process SIGKILLs itself. For crash tests only; unset in production."""
_failpoint = os.environ.get(FAILPOINT_ENV, "")
_failpoint_name, _, _failpoint_hit = _failpoint.partition("@")
_failpoint_hits = 0


def failpoint(name: str) -> None:
    """Die here (SIGKILL, no cleanup) if the environment names this failpoint."""
    global _failpoint_hits
    if name != _failpoint_name:
        return
    _failpoint_hits += 1
    if _failpoint_hits >= int(_failpoint_hit or 1):
        os.kill(os.getpid(), signal.SIGKILL)


def armed(name: str) -> bool:
    """Whether the environment names this failpoint: a path that has no instant for it (one
    call that writes and syncs) takes the one that has (two calls) instead."""
    return name == _failpoint_name
