"""Spend across sessions per window (``agent-session budget spend``): the usage every
response of the store's sessions recorded, per hour or day, for the sessions with a label
(``tenant=acme``), plus the reservations no response answered (requests a crash cut, at
their bound).

On SQLite and PostgreSQL this is **one aggregate query**: it reads every ``assistant/message``
and ``budget/reserved`` row of the store in the window (no index narrows them by label: the
label is a JSON field of another row), so it costs a scan of those rows; ``docs/governance.md``
gives the measured figure. On a JSONL store each log in the window is read and folded.

The same rules as one session's spend (:mod:`agent_session.session.events.budget`): a
response counts once, in the window of its own time; a fork's copy of its parent's responses
(before its ``seedLength``) is not counted again; a session counts under the label value its
last ``label/set`` of that key gave.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any, Final

from agent_session.session.events.prices import PriceTable

__all__ = ["spend_windows"]

_WIDTH: Final = {"hour": 3_600_000, "day": 86_400_000}

_SQLITE: Final = """
WITH labelled AS (
  SELECT s.id, coalesce(s.seed_length, 0) AS seed FROM sessions s
  WHERE :key IS NULL OR (
    SELECT json_extract(l.data, '$.labels."' || :key || '"') FROM events l
    WHERE l.session_id = s.id AND l.type = 'label/set'
      AND json_type(l.data, '$.labels."' || :key || '"') IS NOT NULL
    ORDER BY l.seq DESC LIMIT 1) = :value
),
spent AS (
  SELECT e.session_id, e.time, json_extract(e.data, '$.message.source.model') AS model,
         1 AS answered,
         coalesce(json_extract(e.data, '$.usage.inputTokens'), 0) AS input,
         coalesce(json_extract(e.data, '$.usage.outputTokens'), 0) AS output
  FROM events e JOIN labelled ON labelled.id = e.session_id
  WHERE e.type = 'assistant/message' AND e.seq >= labelled.seed AND e.time >= :since
  UNION ALL
  SELECT r.session_id, r.time, json_extract(r.data, '$.model'), 0,
         coalesce(json_extract(r.data, '$.inputTokens'), 0),
         coalesce(json_extract(r.data, '$.outputTokens'), 0)
  FROM events r JOIN labelled ON labelled.id = r.session_id
  WHERE r.type = 'budget/reserved' AND r.seq >= labelled.seed AND r.time >= :since
    AND NOT EXISTS (
      SELECT 1 FROM events m WHERE m.session_id = r.session_id
        AND m.type = 'assistant/message' AND m.seq > r.seq
        AND json_extract(m.data, '$.turn') = json_extract(r.data, '$.turn')
        AND json_extract(m.data, '$.step') = json_extract(r.data, '$.step'))
)
SELECT (time / :width) * :width, model, session_id, sum(answered), sum(1 - answered),
       sum(input), sum(output)
FROM spent GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
"""

_POSTGRES: Final = """
WITH labelled AS (
  SELECT s.id, coalesce((s.header::jsonb ->> 'seedLength')::bigint, 0) AS seed
  FROM agent_session s
  WHERE %(key)s::text IS NULL OR (
    SELECT l.line::jsonb -> 'data' -> 'labels' ->> %(key)s::text FROM agent_session_event l
    WHERE l.session_id = s.id AND l.type = 'label/set'
      AND l.line::jsonb -> 'data' -> 'labels' -> %(key)s::text IS NOT NULL
      AND jsonb_typeof(l.line::jsonb -> 'data' -> 'labels' -> %(key)s::text) <> 'null'
    ORDER BY l.seq DESC LIMIT 1) = %(value)s
),
rows AS (
  SELECT e.session_id, e.seq, e.type, e.line::jsonb AS j
  FROM agent_session_event e JOIN labelled ON labelled.id = e.session_id
  WHERE e.type IN ('assistant/message', 'budget/reserved') AND e.seq >= labelled.seed
),
spent AS (
  SELECT session_id, (j ->> 'time')::bigint AS time,
         j -> 'data' -> 'message' -> 'source' ->> 'model' AS model, 1 AS answered,
         coalesce((j -> 'data' -> 'usage' ->> 'inputTokens')::bigint, 0) AS input,
         coalesce((j -> 'data' -> 'usage' ->> 'outputTokens')::bigint, 0) AS output
  FROM rows WHERE type = 'assistant/message'
  UNION ALL
  SELECT r.session_id, (r.j ->> 'time')::bigint, r.j -> 'data' ->> 'model', 0,
         coalesce((r.j -> 'data' ->> 'inputTokens')::bigint, 0),
         coalesce((r.j -> 'data' ->> 'outputTokens')::bigint, 0)
  FROM rows r WHERE r.type = 'budget/reserved' AND NOT EXISTS (
    SELECT 1 FROM rows m WHERE m.session_id = r.session_id AND m.type = 'assistant/message'
      AND m.seq > r.seq AND m.j -> 'data' -> 'turn' = r.j -> 'data' -> 'turn'
      AND m.j -> 'data' -> 'step' = r.j -> 'data' -> 'step')
)
SELECT (time / %(width)s) * %(width)s, model, session_id, sum(answered), sum(1 - answered),
       sum(input), sum(output)
FROM spent WHERE time >= %(since)s GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
"""


async def spend_windows(
    store: Any,
    *,
    label: tuple[str, str] | None = None,
    per: str = "day",
    since_ms: int | None = None,
    prices: PriceTable | None = None,
) -> list[dict[str, Any]]:
    """The store's spend per ``per`` window (``hour`` or ``day``, UTC), oldest first, for
    the sessions labelled ``label`` (``(key, value)``; ``None``: all), in the last
    ``since_ms`` (``None``: all time). Each window: ``{start, sessions, requests,
    unknownRequests, inputTokens, outputTokens, cost}`` (``cost`` with ``prices``, else
    ``None``).

    Raises:
        ValueError: A label key that is not letters, digits, ``_``, ``-`` and ``.``.
    """
    from agent_session.cli.commands import open_backend
    from agent_session.governance.labels import check_labels
    from agent_session.session.events.header import now_ms
    from agent_session.stores import StoreSpec, parse_store

    if label is not None:
        check_labels({label[0]: label[1]})  # (a key a query can name safely)
    spec = store if isinstance(store, StoreSpec) else parse_store(str(store))
    width = _WIDTH[per]
    since = 0 if since_ms is None else now_ms() - since_ms
    key, value = label if label is not None else (None, None)
    backend = open_backend(spec, read_only=True)
    try:
        if spec.kind == "sqlite":
            query = {"key": key, "value": value, "since": since, "width": width}
            rows = await backend.storage.run_read(  # type: ignore[attr-defined]
                lambda db: db.execute(_SQLITE, query).fetchall()
            )
        elif spec.kind == "postgres":
            query = {"key": key, "value": value, "since": since, "width": width}
            rows = await backend.storage.run_read(  # type: ignore[attr-defined]
                lambda db: db.execute(_POSTGRES, query).fetchall()
            )
        else:
            rows = await _folded(backend, label, since, width)
    finally:
        await backend.aclose()
    return _windows(rows, prices)


async def _folded(backend: Any, label: tuple[str, str] | None, since: int, width: int) -> list[Any]:
    """The rows the query gives, from each JSONL log read and folded."""
    from agent_session.governance.labels import labels_of
    from agent_session.session.events.budget import BudgetFold, message_model

    rows: list[Any] = []
    for header in await backend.list_headers():
        events = (await backend.inspect(header.id)).events
        if label is not None and labels_of(events).get(label[0]) != label[1]:
            continue
        seed = header.seed_length or 0
        for event in events[seed:]:
            if event.type != "assistant/message" or event.time < since:
                continue
            usage = event.data.get("usage")
            usage = usage if isinstance(usage, Mapping) else {}
            model = message_model(event.data.get("message"))
            start = (event.time // width) * width
            rows.append((start, model, header.id, 1, 0, *_counts(usage)))
        for reserved in BudgetFold(seed=seed).fold(events).unanswered():
            if reserved["time"] >= since:
                start = (reserved["time"] // width) * width
                rows.append((start, reserved.get("model"), header.id, 0, 1, *_counts(reserved)))
    return rows


def _counts(usage: Mapping[str, Any]) -> tuple[int, int]:
    return _int(usage.get("inputTokens")), _int(usage.get("outputTokens"))


def _int(value: Any) -> int:
    return value if type(value) is int and value > 0 else 0


def _windows(rows: list[Any], prices: PriceTable | None) -> list[dict[str, Any]]:
    windows: dict[int, dict[str, Any]] = {}
    sessions: dict[int, set[Any]] = {}
    for start, model, session, answered, unanswered, input, output in rows:
        day = datetime.datetime.fromtimestamp(int(start) / 1000, tz=datetime.UTC)
        window = windows.setdefault(
            int(start),
            {
                "start": day.strftime("%Y-%m-%dT%H:%MZ"),
                "sessions": 0,
                "requests": 0,
                "unknownRequests": 0,
                "inputTokens": 0,
                "outputTokens": 0,
                "cost": None,
            },
        )
        sessions.setdefault(int(start), set()).add(session)
        window["sessions"] = len(sessions[int(start)])
        window["requests"] += int(answered)
        window["unknownRequests"] += int(unanswered)
        window["inputTokens"] += int(input)
        window["outputTokens"] += int(output)
        if prices is not None:
            cost = prices.cost(model, {"inputTokens": int(input), "outputTokens": int(output)})
            if cost is not None:
                window["cost"] = (window["cost"] or 0.0) + cost
    return [windows[start] for start in sorted(windows)]
