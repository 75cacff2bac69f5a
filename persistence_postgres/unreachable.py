"""What a caller sees when the PostgreSQL server cannot be reached or goes away: an
``OSError`` naming the server (never its password), so the batch is kept and can be retried,
as after a failed write to a disk."""

from __future__ import annotations

import contextlib
import errno
from collections.abc import Iterator

import psycopg

__all__ = ["redacted", "translated", "unreachable"]


@contextlib.contextmanager
def translated(shown: str) -> Iterator[None]:
    """The driver's connection failures as ``OSError`` (the server is unreachable, or went
    away): the caller keeps its batch and can retry."""
    try:
        yield
    except psycopg.OperationalError as e:
        raise unreachable(shown, str(e)) from e
    except TimeoutError as e:  # the pool found no connection in time
        raise OSError(errno.ETIMEDOUT, f"PostgreSQL at {shown}: {e}") from e


def unreachable(shown: str, why: str) -> OSError:
    """The error for the server ``shown`` (see :func:`redacted`), failed for ``why``."""
    return OSError(errno.ECONNREFUSED, f"PostgreSQL at {shown}: {why}")


def redacted(dsn: str) -> str:
    """The connection string without a password."""
    try:
        info = psycopg.conninfo.conninfo_to_dict(dsn)
    except psycopg.ProgrammingError:
        return "(the configured server)"
    info.pop("password", None)
    return psycopg.conninfo.make_conninfo(**{k: str(v) for k, v in info.items()})
