"""``EventLogSessionStore``: the Claude Agent SDK's ``SessionStore`` over this library's event
log, on any store (a directory of JSONL logs, ``sqlite:///``, ``postgresql://``).

Each transcript (a main one, or a subagent's under its ``subpath``) is one session of the
store, ``claude:<project>:<session>[:<subpath>]``; each entry one ``claude-code/entry`` event
holding it verbatim, and each append to a main transcript adds one ``claude-code/summary``
event with the SDK's own fold of it (both marked ``ignorable``: the reference skips them and
still loads the log).

Guarantees:

- ``append`` returns once its entries are durable; ``load`` gives back every entry exactly as
  appended (deep-equal), in append order, and nothing else: no repair, no closers (the SDK
  resumes from what it wrote). An entry whose ``uuid`` the transcript holds already is not
  stored again (the SDK retries a batch that may have landed).
- An entry no JSON value can hold (``NaN``, an integer beyond 2**53, a non-string key) is
  refused with the whole batch, naming it; nothing of the batch is stored.
- One writer per transcript, as every integration of this library: one this store wrote is
  its own until :meth:`release`, :meth:`aclose` or ``max_open`` others were written after
  it; another process's append of it is refused with
  :class:`~agent_session.SessionCollisionError` (the SDK reports a failed mirror batch as a
  ``MirrorErrorMessage``; its own local file keeps the entries).
- ``list_sessions`` and ``list_session_summaries`` read one event per session (the log's
  last), so their cost grows with the number of sessions, not with their length; ``mtime``
  is the store's time of that event, in epoch milliseconds, for both.
- ``delete`` of a main transcript deletes its subagents' too.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Coroutine, Mapping
from typing import Any, Final, TypeVar

from claude_agent_sdk import (
    SessionKey,
    SessionListSubkeysKey,
    SessionStore,
    SessionStoreEntry,
    SessionStoreListEntry,
    SessionSummaryEntry,
    fold_session_summary,
)

from agent_session.integrations.held_logs import HeldLogs
from agent_session.integrations.home_loop import HomeLoop
from agent_session.integrations.log_ids import joined, split
from agent_session.session.errors import JsonValueError, SessionDataError, SessionNotFoundError
from agent_session.session.events.types import CLAUDE_ENTRY, CLAUDE_SUMMARY
from agent_session.session.json.lossless import snapshot, thaw

__all__ = ["LOG_PREFIX", "EventLogSessionStore", "key_of", "log_id"]

T = TypeVar("T")

LOG_PREFIX: Final = "claude:"
"""What the id of a transcript's log starts with."""


def log_id(key: Mapping[str, Any]) -> str:
    """The id of the log of the transcript ``key`` names."""
    parts = [key["project_key"], key["session_id"]]
    if key.get("subpath") is not None:
        parts.append(key["subpath"])
    for part in parts:
        if not isinstance(part, str) or not part:
            raise ValueError(f"a session key's parts are non-empty strings, got {key!r}")
    return joined(LOG_PREFIX, parts)


def key_of(id: str) -> SessionKey | None:
    """The key of a log :func:`log_id` named; ``None`` for another id."""
    parts = split(LOG_PREFIX, id) or []
    if len(parts) == 2:
        return {"project_key": parts[0], "session_id": parts[1]}
    if len(parts) == 3:
        return {"project_key": parts[0], "session_id": parts[1], "subpath": parts[2]}
    return None


def _named(id: str) -> str:
    return f"Claude transcript {key_of(id)!r}"


class EventLogSessionStore(SessionStore):
    """Claude Agent SDK transcripts kept as crash-safe event logs in ``store`` (what
    :func:`agent_session.open_store` accepts, with ``store_options``). Pass it as
    ``ClaudeAgentOptions(session_store=...)``; close it with :meth:`aclose`. Any thread and
    event loop may call it (the store runs on a private loop)."""

    def __init__(
        self, store: str | os.PathLike[str], *, max_open: int = 256, **store_options: Any
    ) -> None:
        """Raises ``ValueError`` for a store name this build cannot serve or a ``max_open``
        that is not a positive integer; nothing is opened before the first call."""
        from agent_session.stores import parse_store

        self._logs = HeldLogs(parse_store(os.fspath(store)), store_options, max_open, _named)
        self._home: HomeLoop | None = None
        self._home_lock = threading.Lock()

    async def _call(self, work: Coroutine[Any, Any, T]) -> T:
        with self._home_lock:
            if self._home is None:
                self._home = HomeLoop("agent-session claude-agent-sdk")
            home = self._home
        return await home.run(work)

    # --- SessionStore -------------------------------------------------------------------

    async def append(self, key: SessionKey, entries: list[SessionStoreEntry]) -> None:
        """Store ``entries`` at the end of the transcript; returns once they are durable."""
        try:
            checked = snapshot(list(entries), "entries")
        except JsonValueError as e:
            raise SessionDataError(
                f"a Claude transcript entry cannot be stored: {e}; nothing of the batch was stored"
            ) from None
        if checked:
            await self._call(self._append(key, checked))

    async def _append(self, key: SessionKey, entries: Any) -> None:
        id = log_id(key)
        session = await self._logs.take(id)
        seen = self._logs.kept(id, _Uuids).fold(session.events)
        new = []
        for entry in entries:
            uuid = entry.get("uuid")
            if uuid is None or uuid not in seen:
                new.append(entry)
                if uuid is not None:
                    seen.add(uuid)
        if not new:
            return
        events: list[tuple[str, Any]] = [(CLAUDE_ENTRY, {"entry": entry}) for entry in new]
        if key.get("subpath") is None:
            summary = dict(fold_session_summary(_last_summary(session.events), key, thaw(new)))
            summary.pop("mtime", None)  # (stamped when read: the time the store kept it)
            events.append((CLAUDE_SUMMARY, {"summary": summary}))
        await self._logs.append(id, events)

    async def load(self, key: SessionKey) -> list[SessionStoreEntry] | None:
        """Every entry of the transcript exactly as appended; ``None`` when none was."""
        events = await self._call(self._logs.events(log_id(key)))
        if events is None:
            return None
        entries = [thaw(e.data["entry"]) for e in events if e.type == CLAUDE_ENTRY]
        return entries if entries else None

    async def list_sessions(self, project_key: str) -> list[SessionStoreListEntry]:
        """The main transcripts of ``project_key`` with their last write time."""
        return [
            {"session_id": key["session_id"], "mtime": last.time}
            for key, last in await self._call(self._mains(project_key))
        ]

    async def list_session_summaries(self, project_key: str) -> list[SessionSummaryEntry]:
        """The SDK's summary of each main transcript of ``project_key``, as its last append
        left it."""
        out: list[SessionSummaryEntry] = []
        for key, last in await self._call(self._mains(project_key)):
            if last.type == CLAUDE_SUMMARY:  # (else its last append was cut by a crash)
                summary = thaw(last.data["summary"])
            else:
                events = await self._call(self._logs.events(log_id(key))) or []
                entries = [thaw(e.data["entry"]) for e in events if e.type == CLAUDE_ENTRY]
                summary = fold_session_summary(None, key, entries)
            summary["mtime"] = last.time
            out.append(summary)
        return out

    async def _mains(self, project_key: str) -> list[tuple[SessionKey, Any]]:
        """Each main transcript of the project with its log's last event."""
        prefix = log_id({"project_key": project_key, "session_id": "-"})[:-1]
        found = []
        for id in await self._logs.ids(prefix):
            key = key_of(id)
            if key is None or "subpath" in key or key["project_key"] != project_key:
                continue
            try:
                tail = await self._logs.store.read_tail(id, 1)
            except SessionNotFoundError:
                continue
            if tail.events:
                found.append((key, tail.events[-1]))
        return found

    async def delete(self, key: SessionKey) -> None:
        """Delete the transcript (a main one with its subagents')."""
        await self._call(self._delete(key))

    async def _delete(self, key: SessionKey) -> None:
        id = log_id(key)
        if key.get("subpath") is None:
            for sub in await self._logs.ids(id + ":"):
                await self._logs.delete(sub)
        await self._logs.delete(id)

    async def list_subkeys(self, key: SessionListSubkeysKey) -> list[str]:
        """The subpaths stored under the session (its subagents' transcripts)."""
        main = log_id({"project_key": key["project_key"], "session_id": key["session_id"]})
        ids = await self._call(self._logs.ids(main + ":"))
        return [k["subpath"] for k in map(key_of, ids) if k is not None and "subpath" in k]

    # --- held here ----------------------------------------------------------------------

    async def release(self, key: SessionKey) -> None:
        """Stop writing the transcript here, so that another process may."""
        await self._call(self._logs.let_go(log_id(key)))

    async def aclose(self) -> None:
        """Release every transcript and close the store (it opens again if used)."""
        with self._home_lock:
            home, self._home = self._home, None
        if home is None:
            return
        try:
            await home.run(self._logs.close())
        finally:
            await asyncio.to_thread(home.close)


class _Uuids:
    """The entry uuids a transcript held here holds, and how many of its events say so."""

    def __init__(self) -> None:
        self.seen: set[Any] = set()
        self.folded = 0

    def fold(self, events: Any) -> set[Any]:
        """The uuids, with those of the events since the last fold."""
        for event in events[self.folded :]:
            if event.type == CLAUDE_ENTRY and event.data["entry"].get("uuid") is not None:
                self.seen.add(event.data["entry"]["uuid"])
        self.folded = len(events)
        return self.seen


def _last_summary(events: Any) -> SessionSummaryEntry | None:
    """The summary the transcript's last append left (``mtime`` 0: the fold keeps it)."""
    for event in reversed(events):
        if event.type == CLAUDE_SUMMARY:
            kept = thaw(event.data["summary"])
            return {"session_id": kept["session_id"], "data": kept["data"], "mtime": 0}
    return None
