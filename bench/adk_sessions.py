"""Google ADK's session service on a session of 10,000 events (past the 4,800 ADK's users
reported): this project's ``EventLogSessionService`` on a JSONL store and on a SQLite one
(durable on return) against ADK's own ``SqliteSessionService`` in the same run, all filled
the same way (user questions and model answers, one ``append_event`` each). Per service: the
median ms of one ``append_event``, of a new service's first ``get_session`` (the 20 most
recent events, and all), and of a second ``get_session`` of the 20 most recent."""

from __future__ import annotations

import os
import statistics
import time
from typing import Any

from google.adk.events.event import Event
from google.adk.sessions.base_session_service import BaseSessionService, GetSessionConfig
from google.adk.sessions.sqlite_session_service import SqliteSessionService
from google.genai import types

from agent_session.integrations.google_adk import EventLogSessionService

EVENTS = 10_000
"""The session's length."""
_TIMED_APPENDS = 200


def _event(n: int) -> Event:
    if n % 2 == 0:
        return Event(
            author="user", invocation_id=f"i{n}", content=_content("user", f"question {n}")
        )
    return Event(
        author="agent", invocation_id=f"i{n - 1}", content=_content("model", f"answer {n}")
    )


def _content(role: str, text: str) -> types.Content:
    return types.Content(role=role, parts=[types.Part(text=text)])


async def _fill(service: BaseSessionService, events: int) -> list[float]:
    """Append the session's events; the ms of the last ``_TIMED_APPENDS`` appends."""
    session = await service.create_session(app_name="bench", user_id="u", session_id="big")
    times = []
    for n in range(events):
        start = time.perf_counter()
        await service.append_event(session, _event(n))
        times.append((time.perf_counter() - start) * 1000)
    return times[-_TIMED_APPENDS:]


async def _get(service: BaseSessionService, recent: int | None, events: int) -> float:
    config = GetSessionConfig(num_recent_events=recent)
    start = time.perf_counter()
    got = await service.get_session(app_name="bench", user_id="u", session_id="big", config=config)
    assert got is not None
    assert len(got.events) == (recent or events)
    return (time.perf_counter() - start) * 1000


async def _figures(make: Any, events: int) -> dict[str, float]:
    service = make()
    appends = await _fill(service, events)
    await _close(service)
    gets: dict[str, float] = {"append_event_ms": statistics.median(appends)}
    for recent, name in ((20, "first_get_20_ms"), (None, "first_get_all_ms")):
        service = make()
        gets[name] = await _get(service, recent, events)
        if recent:
            gets["again_get_20_ms"] = await _get(service, recent, events)
        await _close(service)
    return gets


async def _close(service: BaseSessionService) -> None:
    close = getattr(service, "aclose", None) or getattr(service, "close", None)
    if close is not None:
        await close()


async def adk_session_figures(root: str, events: int = EVENTS) -> dict[str, float]:
    """Ours on JSONL (``adk_*``) and on SQLite (``adk_sqlite_*``), and each over ADK's
    ``SqliteSessionService`` (``..._vs_sqlite``), for a session of ``events`` events."""
    jsonl = os.path.join(root, "ours")
    sqlite = "sqlite:///" + os.path.join(root, "ours.db")
    theirs = await _figures(lambda: SqliteSessionService(os.path.join(root, "adk.db")), events)
    figures: dict[str, float] = {}
    for prefix, store in (("adk", jsonl), ("adk_sqlite", sqlite)):
        ours = await _figures(lambda store=store: EventLogSessionService(store), events)
        for key, value in ours.items():
            figures[f"{prefix}_{key}"] = value
            figures[f"{prefix}_{key.removesuffix('_ms')}_vs_sqlite"] = value / theirs[key]
    return figures
