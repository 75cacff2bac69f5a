"""The one statement of an append, and its parameters.

A compare-and-set of the session row's ``next_seq`` (or, for a session's first batch, the
creation of that row) feeds the insert of the batch's rows in the same statement: one round
trip and one transaction, in which the rows are inserted only if the row moved (see
:mod:`persistence_postgres.storage`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

from agent_session.persistence_postgres.lines import Line

__all__ = [
    "ROWS_PER_STATEMENT",
    "append_statement",
    "append_values",
    "protocol_append",
    "rows_statement",
]

ROWS_PER_STATEMENT = 1_000
"""Most rows one statement inserts (4 parameters each; the protocol allows 65,535). A larger
batch is inserted by several statements in one transaction."""

_MOVE = (
    "WITH moved AS (UPDATE agent_session SET next_seq = %(end)s, revision = revision + 1, "
    "updated_at = now() WHERE id = %(id)s AND next_seq = %(start)s RETURNING id) "
)
_CREATE = (
    "WITH moved AS (INSERT INTO agent_session "
    "(id, header, created_at, next_seq, revision, incarnation) "
    "VALUES (%(id)s, %(header)s, %(created)s, %(end)s, 1, %(incarnation)s) "
    "ON CONFLICT (id) DO NOTHING RETURNING id) "
)
_INSERT = (
    "INSERT INTO agent_session_event (session_id, seq, n, type, line) "
    "SELECT moved.id, v.seq, v.n, v.type, v.line FROM moved, (VALUES {rows}) "
    "AS v(seq, n, type, line)"
)
_ROW = "(%(s{i})s::bigint, %(n{i})s::int, %(t{i})s::text, %(l{i})s::text)"
_MORE = (
    "INSERT INTO agent_session_event (session_id, seq, n, type, line) "
    "SELECT %(id)s, v.seq, v.n, v.type, v.line FROM (VALUES {rows}) AS v(seq, n, type, line)"
)


def _rows(count: int) -> str:
    if not 0 < count <= ROWS_PER_STATEMENT:
        raise ValueError(f"a statement inserts 1 to {ROWS_PER_STATEMENT} rows, not {count}")
    return ", ".join(_ROW.format(i=i) for i in range(count))


@lru_cache(maxsize=32)
def append_statement(materialized: bool, count: int) -> bytes:
    """The statement appending ``count`` rows: to a stored session (``materialized``: the
    compare-and-set of ``next_seq`` from ``%(start)s`` to ``%(end)s``) or as a new one (the
    session row's creation, refused when it exists), the rows as one multi-row ``VALUES`` (a
    third cheaper on the server than unnesting arrays). Its rowcount is the rows inserted:
    ``count``, or 0 when the session row did not move."""
    first = _MOVE if materialized else _CREATE
    return (first + _INSERT.format(rows=_rows(count))).encode()


@lru_cache(maxsize=4)
def rows_statement(count: int) -> bytes:
    """The statement inserting ``count`` more rows of a batch after the first
    :data:`ROWS_PER_STATEMENT` (in the transaction of its :func:`append_statement`, which
    holds the session row), with the parameters of :func:`append_values`."""
    return _MORE.format(rows=_rows(count)).encode()


def append_values(id: str, lines: Sequence[Line]) -> dict[str, Any]:
    """The parameters of :func:`append_statement` for ``lines`` of session ``id`` (a new
    session's row also needs ``header``, ``created`` and ``incarnation``)."""
    values: dict[str, Any] = {
        "id": id,
        "start": lines[0].seq,
        "end": lines[-1].seq + lines[-1].n,
    }
    for i, line in enumerate(lines):
        values[f"s{i}"] = line.seq
        values[f"n{i}"] = line.n
        values[f"t{i}"] = line.type
        values[f"l{i}"] = line.text
    return values


_NAMED = re.compile(rb"%\((\w+)\)s")


@lru_cache(maxsize=32)
def _positional(statement: bytes) -> tuple[bytes, tuple[str, ...]]:
    """``statement`` with the protocol's ``$n`` placeholders, and the names they stand for."""
    names: list[str] = []

    def number(match: re.Match[bytes]) -> bytes:
        name = match.group(1).decode()
        if name not in names:
            names.append(name)
        return b"$%d" % (names.index(name) + 1)

    return _NAMED.sub(number, statement), tuple(names)


def protocol_append(id: str, lines: Sequence[Line]) -> tuple[bytes, list[bytes]]:
    """:func:`append_statement` of a stored session's ``lines`` and its parameters, as libpq
    takes them (``$n`` placeholders, each value as text): for a connection that speaks the
    protocol directly."""
    statement, names = _positional(append_statement(True, len(lines)))
    values = append_values(id, lines)
    return statement, [str(values[name]).encode() for name in names]
