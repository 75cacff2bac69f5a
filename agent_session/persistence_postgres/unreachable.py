"""What a caller sees when the PostgreSQL server cannot be reached, refuses us, goes away or
refuses writes: an ``OSError`` naming the server (never its password) and the server's own
reason in one line, so the batch is kept and can be retried, as after a failed write to a
disk.

Guarantees: no driver exception leaves :func:`translated`; the error's ``errno`` says what
happened (``EACCES``: authentication refused; ``ENOENT``: no such database or role;
``ECONNREFUSED``: nothing listens; ``ETIMEDOUT``: no answer or no free connection in time;
``EROFS``: the server refuses writes, a standby or ``default_transaction_read_only``;
``ECONNRESET``: the connection broke; ``EIO``: any other refusal of the server); its text
holds no secret of the connection string (:func:`session.persistence.redaction.scrub`).
"""

from __future__ import annotations

import contextlib
import errno
from collections.abc import Iterator
from typing import Final

import psycopg

from agent_session.session.persistence.kit import scrub

__all__ = ["CONNECT_TIMEOUT_S", "classify", "translated", "unreachable"]

CONNECT_TIMEOUT_S: Final = 5
"""The longest a connection attempt, or a wait for a pooled connection, may take before it
fails with ``ETIMEDOUT``."""

_FINAL: Final = (
    ("password authentication failed", errno.EACCES),
    ("no password supplied", errno.EACCES),
    ("authentication failed", errno.EACCES),
    ("pg_hba.conf", errno.EACCES),
    ("permission denied", errno.EACCES),
    ("does not exist", errno.ENOENT),
    ("connection refused", errno.ECONNREFUSED),
    ("timeout expired", errno.ETIMEDOUT),
    ("could not translate host name", errno.ENOENT),
    ("failed to resolve host", errno.ENOENT),
)
"""Phrases of libpq's connection failures and the ``errno`` each means."""


def classify(error: BaseException) -> int:
    """The ``errno`` of a driver error (see the module docstring)."""
    if isinstance(error, psycopg.errors.ReadOnlySqlTransaction):
        return errno.EROFS
    if isinstance(error, TimeoutError | psycopg.errors.QueryCanceled):
        return errno.ETIMEDOUT
    text = str(error).lower()
    for phrase, code in _FINAL:
        if phrase in text:
            return code
    if isinstance(error, psycopg.OperationalError):
        return errno.ECONNRESET
    return errno.EIO


def unreachable(shown: str, error: BaseException | str, what: str = "") -> OSError:
    """The error for the server ``shown`` (already masked) that failed with ``error``
    (``what``, if given, says what it means for the caller's data)."""
    code = errno.ECONNRESET if isinstance(error, str) else classify(error)
    why = " ".join(scrub(str(error)).split())  # one line
    if code == errno.EROFS:
        why = f"the server refuses writes (a standby, or default_transaction_read_only): {why}"
    if "unsupported startup parameter" in why or "prepared statement" in why:
        why += (
            " (a connection pooler in transaction mode, such as PgBouncer, is between here "
            "and the server: pass transaction_pooler=True, or connect in session mode)"
        )
    return OSError(code, f"PostgreSQL at {shown}: {what + ': ' if what else ''}{why}")


@contextlib.contextmanager
def translated(shown: str) -> Iterator[None]:
    """The driver's failures as ``OSError`` (:func:`unreachable`): the caller keeps its batch
    and can retry."""
    try:
        yield
    except (psycopg.Error, TimeoutError) as e:  # (the pool's wait for a connection)
        raise unreachable(shown, e) from None
