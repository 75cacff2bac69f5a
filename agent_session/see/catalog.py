"""What ``agent-session serve``'s list knows of each session: a summary (title, models,
times, turns, tokens, cost, crashes, errors, state) kept in memory and brought up to date by
one background pass at a time, so a page of a 10,000-session store is sorted, filtered and
drawn from memory instead of reading the store again for every request.

A pass surveys the store (what ``ls`` reads; each session is listed as soon as it is found)
and reads again only the sessions whose listing changed (last write, event count, size) since
they were summarized. A list request starts a pass when none is running and waits for it a
short while (:data:`FRESH_WAIT`) unless the last pass took longer: a small store is then shown
as it is now; a large one as the last pass left it, with what the running pass has reached
already updated. Until every session has been read once, the list says it is still reading.

Guarantees: nothing is written; a session that cannot be read keeps its listing row with its
problem as its state; a session removed from the store leaves the list at the end of the pass
that no longer finds it.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from agent_session.see.inventory import SessionRow
    from agent_session.see.prices import PriceTable
    from agent_session.stores import StoreSpec

__all__ = ["FRESH_WAIT", "Catalog", "Summary", "summarize"]

FRESH_WAIT: Final = 0.5
"""Seconds a list request waits for the pass it started before it shows what is known."""


@dataclass
class Summary:
    """One session as the list shows it."""

    id: str
    state: str
    created_at: int | None
    updated_at: int | None
    events: int
    title: str = ""
    """The first user message's text (its first line, at most 120 characters)."""
    models: tuple[str, ...] = ()
    duration_ms: int | None = None
    """From the first event to the last."""
    turns: int | None = None
    tokens_in: int = 0
    tokens_out: int = 0
    cost: float | None = None
    crashes: int = 0
    errors: int = 0
    """Tool results that are errors (repairs' answers included)."""
    read: bool = False
    """Whether the events were read (else only the listing is known)."""
    problem: str | None = None
    key: tuple[Any, ...] = field(default=(), repr=False)


def summarize(row: SessionRow, events: Sequence[Any], prices: PriceTable | None) -> Summary:
    """The summary of a listed session from its events (one pass, and the crash points)."""
    from agent_session.see.stats import crashes
    from agent_session.session.events.types import (
        ASSISTANT_MESSAGE,
        REQUEST_HEADER,
        TOOL_RESULT,
        TURN_START,
        USER_MESSAGE,
    )

    found = _listed(row)
    models: dict[str, None] = {}
    cost: float | None = None
    turns = 0
    for event in events:
        kind, data = event.type, event.data if isinstance(event.data, Mapping) else {}
        if kind == USER_MESSAGE and not found.title:
            found.title = _title(data.get("content"))
        elif kind == TURN_START:
            turns += 1
        elif kind == REQUEST_HEADER:
            config = _mapping(_mapping(data.get("header")).get("config"))
            if isinstance(config.get("model"), str) and config["model"]:
                models.setdefault(config["model"])
        elif kind == ASSISTANT_MESSAGE:
            source = _mapping(_mapping(data.get("message")).get("source"))
            model = source.get("model") if isinstance(source.get("model"), str) else None
            if model:
                models.setdefault(model)
            usage = _mapping(data.get("usage"))
            found.tokens_in += _count(usage.get("inputTokens"))
            found.tokens_out += _count(usage.get("outputTokens"))
            priced = prices.cost(model, usage) if prices else None
            if priced is not None:
                cost = (cost or 0) + priced
        elif kind == TOOL_RESULT:
            blocks = _mapping(data.get("message")).get("content") or ()
            if any(isinstance(b, Mapping) and b.get("isError") for b in blocks):
                found.errors += 1
    found.models, found.turns, found.cost, found.read = tuple(models), turns, cost, True
    found.duration_ms = events[-1].time - events[0].time if len(events) else None
    found.crashes = len(crashes(events))
    return found


def _listed(row: SessionRow) -> Summary:
    """(Its key is set once it is read.)"""
    return Summary(row.id, row.state, row.created_at, row.updated_at, row.events, turns=row.turns)


def _key(row: SessionRow) -> tuple[Any, ...]:
    """What tells that a session changed since it was summarized (its listing, as surveyed)."""
    return (row.updated_at, row.events, row.size, row.state)


def _title(content: Any) -> str:
    blocks = content if isinstance(content, list | tuple) else ()
    text = " ".join(str(b.get("text", "")) for b in blocks if isinstance(b, Mapping)).strip()
    first = text.splitlines()[0] if text else ""
    return first if len(first) <= 120 else first[:119] + "…"


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


class Catalog:
    """The summaries of one store's sessions, kept up to date by passes in a thread of its
    own (see the module docstring)."""

    def __init__(self, store: StoreSpec, prices: PriceTable | None = None) -> None:
        self.store, self.prices = store, prices
        self._summaries: dict[str, Summary] = {}
        self._lock = threading.Lock()
        self._done = threading.Event()
        self._running = False
        self._took: float | None = None
        self.passes = 0
        """How many passes have ended."""

    def current(self, wait: float = FRESH_WAIT) -> tuple[list[Summary], bool]:
        """(every session's summary, whether each was read): starts a pass unless one is
        running, and waits up to ``wait`` seconds for it to end unless the last pass took
        longer than that (a large store's page is then drawn at once from the last pass,
        while the next one runs)."""
        with self._lock:
            if not self._running:
                self._running = True
                self._done.clear()
                threading.Thread(target=self._pass, name="catalog", daemon=True).start()
            slow = self._took is not None and self._took > wait
        if not slow:
            self._done.wait(wait)
        with self._lock:
            found = list(self._summaries.values())
            complete = self.passes > 0 or self._done.is_set()
        return found, complete and all(s.read or s.problem for s in found)

    def _pass(self) -> None:
        start = time.monotonic()
        try:
            asyncio.run(self._read())
        finally:
            with self._lock:
                self._running = False
                self.passes += 1
                self._took = time.monotonic() - start
            self._done.set()

    async def _read(self) -> None:
        from agent_session.cli.commands import max_log_bytes, open_backend
        from agent_session.see.inventory import refine, rows
        from agent_session.session import SessionError

        reader = open_backend(self.store, read_only=True)
        try:
            listed = []
            known = self._summaries
            for row in rows(self.store, max_log_bytes()):  # (each on the page as it is found)
                listed.append(row)
                with self._lock:
                    summary = known.get(row.id)
                    if summary is None:
                        known[row.id] = _listed(row)
                        known[row.id].problem = row.problem
                    elif summary.key != _key(row):  # (shown as it was until read again)
                        summary.state, summary.events = row.state, row.events
                        summary.updated_at, summary.problem = row.updated_at, row.problem
            with self._lock:
                for gone in set(known) - {row.id for row in listed}:
                    del known[gone]
            for row in listed:
                key = _key(row)
                with self._lock:
                    if row.problem or self._summaries[row.id].key == key:
                        continue
                await refine(reader, row)
                try:
                    events = (await reader.inspect(row.id)).events
                except (SessionError, OSError) as e:
                    summary = _listed(row)
                    summary.problem = str(e)
                else:
                    summary = summarize(row, events, self.prices)
                summary.key = key
                with self._lock:
                    self._summaries[row.id] = summary
        finally:
            await reader.aclose()
