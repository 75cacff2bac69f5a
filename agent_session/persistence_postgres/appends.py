"""The write of one batch: its statements (:mod:`persistence_postgres.statements`), the check
that the session row moved as this writer expected, and what happens when the connection fails
during it. The same steps run on a worker thread's connection (:func:`append_batch`) or, for a
checkpoint of one statement, on a connection of the event loop (:func:`send_on_loop`).

Guarantees: the batch is stored whole or not at all (one statement, or one transaction of
several); a writer whose expected ``next_seq`` is stale gets :class:`SessionCollisionError`
with nothing stored; after a failure of the connection, :func:`settle_lost` decides on a new
connection whether the batch is stored, exactly (then the append succeeded), or not (an
``OSError``: the caller keeps the batch and may retry, which the compare-and-set makes safe).
"""

from __future__ import annotations

import asyncio
import errno
import uuid
from collections.abc import Awaitable, Callable

import psycopg

from agent_session.persistence_postgres.lines import Line
from agent_session.persistence_postgres.locks import Connection
from agent_session.persistence_postgres.loop_connections import Link, LoopConnections
from agent_session.persistence_postgres.statements import (
    ROWS_PER_STATEMENT,
    append_statement,
    append_values,
    rows_statement,
)
from agent_session.session import SessionCollisionError, SessionHeader
from agent_session.session.events.header import header_line
from agent_session.session.persistence.kit import failpoint, follow

__all__ = ["append_batch", "moved", "send_on_loop", "settle_lost", "unsent_part"]

Settle = Callable[[str, list[Line], Exception], None]
"""Called when the connection failed during an append: :func:`settle_lost` on a new one."""


def append_batch(
    db: Connection, header: SessionHeader, lines: list[Line], materialized: bool, settle: Settle
) -> None:
    """Append ``lines`` to session ``header.id`` (a stored one when ``materialized``, else its
    first batch, which creates the session row)."""
    first = lines[:ROWS_PER_STATEMENT]
    values = append_values(header.id, first)
    values["end"] = lines[-1].seq + lines[-1].n
    if not materialized:
        values |= {
            "header": header_line(header).decode(),
            "created": header.created_at,
            "incarnation": uuid.uuid4(),
        }
    try:
        statement = append_statement(materialized, len(first))
        if len(lines) == len(first):  # one statement, so one round trip and transaction
            failpoint("postgres:append:before-commit")
            inserted = db.execute(statement, values).rowcount
        else:
            with db.transaction():
                inserted = db.execute(statement, values).rowcount
                if inserted != len(first):
                    raise moved(header.id, materialized)
                for at in range(len(first), len(lines), ROWS_PER_STATEMENT):
                    more = lines[at : at + ROWS_PER_STATEMENT]
                    db.execute(rows_statement(len(more)), append_values(header.id, more))
                    inserted += len(more)
                failpoint("postgres:append:before-commit")
    except psycopg.OperationalError as e:  # the acknowledgement may be what was lost
        settle(header.id, lines, e)
        return
    failpoint("postgres:append:after-commit")
    if inserted != len(lines):
        raise moved(header.id, materialized)


def send_on_loop(
    connections: LoopConnections,
    link: Link,
    id: str,
    lines: list[Line],
    statement: tuple[bytes, list[bytes]],
    settle: Callable[[str, list[Line], Exception], Awaitable[None]],
) -> asyncio.Future[None]:
    """:func:`append_batch` of a stored session's batch of at most
    :data:`ROWS_PER_STATEMENT` lines, sent now on ``link`` (a connection of the event loop on
    which ``statement``, the batch's :func:`protocol_append`, is prepared); the future is done
    when the batch is stored, with no task unless the connection fails (then ``settle``
    decides)."""
    failpoint("postgres:append:before-commit")
    stored = asyncio.get_running_loop().create_future()

    def answered(done: asyncio.Future[int]) -> None:
        error = done.exception()
        if isinstance(error, psycopg.OperationalError):
            settled = asyncio.ensure_future(settle(id, lines, error))
            settled.add_done_callback(lambda after: follow(stored, after))
        elif error is not None:
            stored.set_exception(error)
        else:
            failpoint("postgres:append:after-commit")
            if done.result() != len(lines):
                stored.set_exception(moved(id, True))
            else:
                stored.set_result(None)

    connections.send(link, *statement).add_done_callback(answered)
    return stored


def settle_lost(db: Connection, id: str, lines: list[Line], error: Exception) -> None:
    """After the connection failed during the append of ``lines``, on a new connection
    ``db``: return when the batch is stored exactly (the commit's acknowledgement was what was
    lost); raise ``OSError`` when it is not stored, :class:`SessionCollisionError` when the
    log moved in another way."""
    start, end = lines[0].seq, lines[-1].seq + lines[-1].n
    found = db.execute("SELECT next_seq FROM agent_session WHERE id = %s", (id,)).fetchone()
    if found is None or found[0] == start:
        raise OSError(
            errno.ECONNRESET,
            f'the connection to PostgreSQL failed during the append to "{id}", '
            f"and the batch is not stored: {error}",
        ) from error
    stored = db.execute(
        "SELECT line FROM agent_session_event WHERE session_id = %s AND seq >= %s "
        "AND seq < %s ORDER BY seq",
        (id, start, end),
    ).fetchall()
    if found[0] != end or [row[0] for row in stored] != [line.text for line in lines]:
        raise moved(id, True)


def unsent_part(db: Connection, id: str, lines: list[Line]) -> tuple[list[Line], bool] | None:
    """For a batch that starts with lines a failed append of this writer may have stored
    (its outcome could not be settled then: the server was gone): the part of ``lines`` not
    stored yet and whether the session row exists, read on ``db``; ``None`` when the stored
    log holds none of them (the append goes on as planned).

    Raises:
        SessionCollisionError: The log moved in another way (another writer).
    """
    start, end = lines[0].seq, lines[-1].seq + lines[-1].n
    found = db.execute("SELECT next_seq FROM agent_session WHERE id = %s", (id,)).fetchone()
    if found is None or found[0] == start:
        return None
    next_seq = int(found[0])
    stored = db.execute(
        "SELECT line FROM agent_session_event WHERE session_id = %s AND seq >= %s "
        "AND seq < %s ORDER BY seq",
        (id, start, next_seq),
    ).fetchall()
    done = [line for line in lines if line.seq < next_seq]
    if not start < next_seq <= end or [row[0] for row in stored] != [x.text for x in done]:
        raise moved(id, True)
    if done[-1].seq + done[-1].n != next_seq:
        raise moved(id, True)  # (a line cut across: not a batch of ours)
    return lines[len(done) :], True


def moved(id: str, materialized: bool) -> SessionCollisionError:
    """The refusal of a batch whose session row did not move as this writer expected."""
    if not materialized:
        return SessionCollisionError(
            f'refusing to materialize "{id}": a log already exists in the database '
            "(load/resume it instead)"
        )
    return SessionCollisionError(
        f'session "{id}" was changed by another writer since it was read here; load or resume '
        "it again"
    )
