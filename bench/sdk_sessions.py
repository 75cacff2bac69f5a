"""The OpenAI Agents SDK session protocol at scale: ``add_items`` of one item and
``get_items(limit=10)`` on a history of 10,000 and 100,000 items, and a new session object's
first ``get_items(limit=10)`` (a process reopening the history), ``EventLogSession`` (JSONL,
durable on return) against the SDK's own ``SQLiteSession`` (a database file) in the same run.
Both histories are filled the same way first (batches of 1,000 items: runs of a user message
and the assistant's answer, so a turn each)."""

from __future__ import annotations

import os
import statistics
import time
from typing import Any

from agents import SQLiteSession

from agent_session.integrations.openai_agents import EventLogSession

SIZES = (10_000, 100_000)
"""The history lengths measured."""
_BATCH = 1_000
_ROUNDS = 15


def _item(n: int) -> dict[str, Any]:
    if n % 2 == 0:
        return {"role": "user", "content": f"question {n}"}
    return {
        "type": "message",
        "role": "assistant",
        "id": f"msg_{n}",
        "status": "completed",
        "content": [{"type": "output_text", "text": f"answer {n}", "annotations": []}],
    }


async def _fill(session: Any, size: int) -> None:
    for start in range(0, size, _BATCH):
        await session.add_items([_item(n) for n in range(start, start + _BATCH)])


async def _median_ms(action: Any) -> float:
    times = []
    for _ in range(_ROUNDS):
        began = time.perf_counter()
        await action()
        times.append(time.perf_counter() - began)
    return statistics.median(times) * 1000


async def _one_size(root: str, size: int) -> tuple[float, ...]:
    """(ours, theirs) median ms of one ``add_items``, of ``get_items(limit=10)``, then the ms
    of a new session object's first ``get_items(limit=10)``."""
    label = f"{size // 1000}k"
    # add_items as the SDK calls it at a run's end (no hooks: what is measured is add_items)
    ours = await EventLogSession.open(
        os.path.join(root, f"ours-{label}"), "s", warn_without_hooks=False
    )
    theirs: Any = SQLiteSession("s", db_path=os.path.join(root, f"theirs-{label}.db"))
    try:
        await _fill(ours, size)
        await _fill(theirs, size)
        one = [_item(size)]
        add_ours = await _median_ms(lambda: ours.add_items(one))
        add_theirs = await _median_ms(lambda: theirs.add_items(one))
        get_ours = await _median_ms(lambda: ours.get_items(limit=10))
        get_theirs = await _median_ms(lambda: theirs.get_items(limit=10))
        assert await ours.get_items(limit=10) == await theirs.get_items(limit=10)
    finally:
        await ours.aclose()
        theirs.close()
    # a new process's session object, made as the SDK's quickstarts make theirs
    reopened = await _first_get(EventLogSession("s", os.path.join(root, f"ours-{label}")), 10)
    db = os.path.join(root, f"theirs-{label}.db")
    again = await _first_get(SQLiteSession("s", db_path=db), 10)
    return add_ours, add_theirs, get_ours, get_theirs, reopened, again


async def reopen_whole_figures(root: str, size: int = SIZES[0]) -> dict[str, float]:
    """The ms of a new session object's first ``get_items()`` (every item) of a history of
    ``size`` items, ours and over ``SQLiteSession``'s."""
    ours = EventLogSession("s", os.path.join(root, "whole-ours"), warn_without_hooks=False)
    theirs: Any = SQLiteSession("s", db_path=os.path.join(root, "whole-theirs.db"))
    for session in (ours, theirs):
        await _fill(session, size)
    await ours.aclose()
    theirs.close()
    ms = await _first_get(EventLogSession("s", os.path.join(root, "whole-ours")), None)
    base = await _first_get(SQLiteSession("s", db_path=os.path.join(root, "whole-theirs.db")), None)
    label = f"{size // 1000}k"
    return {
        f"sdk_reopen_get_items_all_ms_{label}": ms,
        f"sdk_reopen_get_items_all_vs_sqlite_session_{label}": ms / base,
    }


async def _first_get(session: Any, limit: int | None) -> float:
    try:
        began = time.perf_counter()
        assert len(await session.get_items(limit=limit)) > 0
        return (time.perf_counter() - began) * 1000
    finally:
        close = getattr(session, "aclose", None)
        await close() if close is not None else session.close()


async def sdk_session_figures(root: str, sizes: tuple[int, ...] = SIZES) -> dict[str, float]:
    """Per size: the median ms of one ``add_items`` and of ``get_items(limit=10)`` for both
    sessions, and ours over theirs."""
    figures: dict[str, float] = {}
    for size in sizes:
        label = f"{size // 1000}k"
        add_ours, add_theirs, get_ours, get_theirs, reopened, again = await _one_size(root, size)
        figures[f"sdk_add_items_ms_{label}"] = add_ours
        figures[f"sdk_add_items_vs_sqlite_session_{label}"] = add_ours / add_theirs
        figures[f"sdk_get_items_10_ms_{label}"] = get_ours
        figures[f"sdk_get_items_10_vs_sqlite_session_{label}"] = get_ours / get_theirs
        figures[f"sdk_reopen_get_items_10_ms_{label}"] = reopened
        figures[f"sdk_reopen_get_items_10_vs_sqlite_session_{label}"] = reopened / again
    figures.update(await reopen_whole_figures(root, sizes[0]))
    return figures
