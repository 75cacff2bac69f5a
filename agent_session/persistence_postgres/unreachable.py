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
A pooled connection that does not come at once is not waited for blindly (:func:`pooled`):
a server that went away fails within :data:`PROBE_AFTER_S`, with its own reason.
"""

from __future__ import annotations

import contextlib
import errno
from collections.abc import Callable, Iterator
from typing import Any, Final

import psycopg
from psycopg_pool import ConnectionPool, PoolTimeout

from agent_session.session.persistence.kit import scrub

__all__ = ["CONNECT_TIMEOUT_S", "PROBE_AFTER_S", "classify", "pooled", "translated", "unreachable"]

CONNECT_TIMEOUT_S: Final = 5
"""The longest a connection attempt, or a wait for a pooled connection, may take before it
fails with ``ETIMEDOUT``."""
PROBE_AFTER_S: Final = 0.5
"""How long a wait for a pooled connection goes on before a connection of our own checks the
server (a stopped or refusing server then fails at once, with its reason)."""

_FINAL: Final = (
    ("password authentication failed", errno.EACCES),
    ("no password supplied", errno.EACCES),
    ("authentication failed", errno.EACCES),
    ("pg_hba.conf", errno.EACCES),
    ("permission denied", errno.EACCES),
    ("does not exist", errno.ENOENT),
    ("connection refused", errno.ECONNREFUSED),
    ("timeout expired", errno.ETIMEDOUT),
    ("couldn't get a connection", errno.ETIMEDOUT),  # (the pool's)
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


@contextlib.contextmanager
def pooled(
    pool: ConnectionPool[Any], probe: Callable[[], psycopg.Connection[Any]]
) -> Iterator[Any]:
    """A connection of ``pool``, as ``pool.connection()`` lends it. When none is free within
    :data:`PROBE_AFTER_S` (a connection being replaced, or a server that went away), a
    connection of our own, made by ``probe`` and closed at once, checks the server: its
    failure is raised (the server's reason, in a few milliseconds when nothing listens, at
    most :data:`CONNECT_TIMEOUT_S` when nothing answers); else the wait for a pooled one goes
    on for the rest of :data:`CONNECT_TIMEOUT_S`."""
    try:
        connection = pool.getconn(timeout=PROBE_AFTER_S)
    except PoolTimeout:
        probe().close()
        connection = pool.getconn(timeout=CONNECT_TIMEOUT_S - PROBE_AFTER_S)
    try:
        with connection:
            yield connection
    finally:
        pool.putconn(connection)
