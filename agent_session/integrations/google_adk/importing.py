"""Importing a session from a database ADK's own services wrote (``SqliteSessionService``, or
``DatabaseSessionService`` on SQLite with its current schema): both keep each event as its
JSON (``events.event_data``) and the state in ``sessions``, ``app_states`` and
``user_states``. Its oldest schema (pickled event actions) is refused: ADK's own migration
(``adk migrate session``) converts it.

Guarantees: the database is opened read-only; every event is validated before anything is
written; the session is written through :class:`EventLogSessionService`, so it holds what
that service would have written had it served the runs, and gives back the same events and
state.
"""

from __future__ import annotations

import contextlib
import json
import os
import pathlib
import sqlite3
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from agent_session.integrations.google_adk.service import EventLogSessionService
from agent_session.integrations.google_adk.state import split_state

if TYPE_CHECKING:
    from agent_session.stores import StoreSpec

__all__ = ["Imported", "import_adk_session", "import_command"]


@dataclass(frozen=True)
class Imported:
    """What an import wrote."""

    app: str
    user: str
    session: str
    events: int


def _read(
    database: str, session_id: str
) -> tuple[str, str, dict[str, Any], list[Any], dict[str, Any]]:
    """``(app, user, state, events, shared)`` of the session ``session_id`` of ``database``."""
    if not os.path.isfile(database):
        raise FileNotFoundError(f'no ADK session database at "{database}"')
    uri = pathlib.Path(database).resolve().as_uri() + "?mode=ro"
    try:
        with contextlib.closing(sqlite3.connect(uri, uri=True)) as db:
            return _session(db, database, session_id)
    except sqlite3.DatabaseError as e:
        raise ValueError(f'"{database}" cannot be read as an ADK session database: {e}') from e


def _session(
    db: sqlite3.Connection, database: str, session_id: str
) -> tuple[str, str, dict[str, Any], list[Any], dict[str, Any]]:
    tables = {name for (name,) in db.execute("SELECT name FROM sqlite_master")}
    if not {"sessions", "events"} <= tables:
        raise ValueError(
            f'"{database}" is not an ADK session database (it has no sessions and events tables)'
        )
    if "event_data" not in {row[1] for row in db.execute("PRAGMA table_info(events)")}:
        raise ValueError(
            f'"{database}" has ADK\'s oldest schema (pickled event actions), which this build '
            "does not read: convert it with ADK's `adk migrate session` first"
        )
    found = db.execute(
        "SELECT app_name, user_id, state FROM sessions WHERE id = ?", (session_id,)
    ).fetchall()
    if not found:
        raise LookupError(f'"{database}" has no ADK session {session_id!r}')
    if len(found) > 1:
        owners = ", ".join(f"app {a!r} user {u!r}" for a, u, _ in found)
        raise ValueError(
            f'"{database}" has several ADK sessions {session_id!r} ({owners}); this import '
            "takes an id that names one"
        )
    app, user, state = found[0]
    events = [
        json.loads(data)
        for (data,) in db.execute(
            "SELECT event_data FROM events WHERE app_name = ? AND user_id = ? AND "
            "session_id = ? ORDER BY timestamp, rowid",
            (app, user, session_id),
        )
    ]
    shared: dict[str, Any] = {}
    for table, prefix, where, values in (
        ("app_states", "app:", "app_name = ?", (app,)),
        ("user_states", "user:", "app_name = ? AND user_id = ?", (app, user)),
    ):
        if table in tables:
            for (text,) in db.execute(f"SELECT state FROM {table} WHERE {where}", values):
                shared.update({prefix + k: v for k, v in json.loads(text).items()})
    return app, user, json.loads(state) if isinstance(state, str) else dict(state), events, shared


async def import_adk_session(store: str, database: str, session_id: str) -> Imported:
    """Import the ADK session ``session_id`` of ``database`` into ``store``.

    Raises:
        FileNotFoundError, LookupError: No such database or session.
        ValueError: Not an ADK database this build reads, an ambiguous id, or an event ADK
            itself does not accept (nothing is written).
        google.adk.errors.already_exists_error.AlreadyExistsError: The store has it.
    """
    from google.adk.events.event import Event

    app, user, state, rows, shared = _read(database, session_id)
    events = [Event.model_validate(row) for row in rows]  # (all checked before a write)
    changed: set[str] = set()
    for event in events:
        changed.update(split_state(event.actions.state_delta)[2])
    initial = {k: v for k, v in state.items() if k not in changed}  # what creation set
    async with EventLogSessionService(store) as service:
        session = await service.create_session(
            app_name=app, user_id=user, state={**initial, **shared}, session_id=session_id
        )
        for event in events:
            await service.append_event(session, event)
    return Imported(app, user, session_id, len(events))


async def import_command(store: StoreSpec, database: str, session_id: str) -> int:
    """``agent-session import STORE ID DATABASE --format adk``: its exit status."""
    import sys

    from google.adk.errors.already_exists_error import AlreadyExistsError

    from agent_session.cli.exits import CORRUPT, OK, NotFound, UserError
    from agent_session.integrations.google_adk.mapping import log_id

    try:
        done = await import_adk_session(store.url, database, session_id)
    except (FileNotFoundError, LookupError) as e:
        raise NotFound(str(e)) from None
    except AlreadyExistsError:
        print(
            f"agent-session: error: ADK session {session_id} exists in {store.shown}",
            file=sys.stderr,
        )
        return CORRUPT
    except ValueError as e:
        raise UserError(" / ".join(str(e).splitlines()[:3]), code=CORRUPT) from None
    print(
        f"imported {done.events} ADK events of app {done.app!r} user {done.user!r} into "
        f"{log_id(done.app, done.user, done.session)} in {store.shown}"
    )
    return OK
