"""``agent-session serve``'s session list: a page of the store's sessions, sorted by any
column, filtered by state, model, date, crash and what waits for approval, searched by
title or id, 100 to a page; HTML with no script, a strict Content-Security-Policy, and every
piece of content escaped (titles are what users typed).

The query string is the whole state of the page, so a filtered, sorted page is a link:
``state``, ``model``, ``since`` and ``until`` (dates, ``YYYY-MM-DD``, UTC, by last write),
``crash=1``, ``approval=1``, ``q`` (in the title or the id), ``sort`` (a column), ``order``
(``asc`` or ``desc``) and ``page`` (from 1).
"""

from __future__ import annotations

import datetime
import html
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final
from urllib.parse import quote, urlencode

from agent_session.see.catalog import Summary
from agent_session.see.states import LISTED_STATES
from agent_session.see.view import csp_hash

__all__ = ["PAGE", "list_page"]

PAGE: Final = 100
"""Sessions to a page."""

_STATES = (*LISTED_STATES, "corrupt")
_COLUMNS: Final[Mapping[str, tuple[str, Callable[[Summary], Any]]]] = {
    "title": ("session", lambda s: (s.title or s.id).casefold()),
    "state": ("state", lambda s: s.state),
    "model": ("model", lambda s: ", ".join(s.models)),
    "created": ("started", lambda s: s.created_at or 0),
    "updated": ("last write", lambda s: s.updated_at or 0),
    "duration": ("duration", lambda s: s.duration_ms or 0),
    "turns": ("turns", lambda s: s.turns or 0),
    "events": ("events", lambda s: s.events),
    "tokens": ("tokens in / out", lambda s: s.tokens_in + s.tokens_out),
    "cost": ("cost", lambda s: s.cost or 0),
    "crashes": ("crashes", lambda s: s.crashes),
    "errors": ("tool errors", lambda s: s.errors),
}
_STYLE = (
    "body{font:14px/1.5 system-ui,sans-serif;margin:16px;color:#1d2330}"
    "table{border-collapse:collapse;width:100%}td,th{padding:4px 8px;border-bottom:1px solid "
    "#e3e6ee;text-align:left;vertical-align:top}th a{color:inherit}td.n{text-align:right;"
    "font-variant-numeric:tabular-nums}.interrupted,.awaiting-approval,.awaiting-budget,.corrupt,.crashed{"
    "color:#c62828;font-weight:600}.id{color:#6b7385;font-size:12px}form{margin:8px 0}"
    "form *{margin-right:6px}.pending{background:#fff6dc;padding:4px 8px}nav a{margin:0 6px}"
)


def _when(ms: int | None) -> str:
    if ms is None:
        return "-"
    moment = datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC)
    return moment.strftime("%b %-d, %Y %H:%M UTC")


def _duration(ms: int | None) -> str:
    if ms is None:
        return "-"
    if ms < 1000:
        return f"{ms} ms"
    if ms < 60_000:
        return f"{ms / 1000:.1f} s"
    if ms < 3_600_000:
        return f"{ms // 60_000} min {ms % 60_000 // 1000} s"
    return f"{ms // 3_600_000} h {ms % 3_600_000 // 60_000} min"


def _day(text: str, end: bool) -> int | None:
    try:
        day = datetime.date.fromisoformat(text)
    except ValueError:
        return None
    moment = datetime.datetime(day.year, day.month, day.day, tzinfo=datetime.UTC)
    return int(moment.timestamp() * 1000) + (86_400_000 if end else 0)


def _chosen(found: Sequence[Summary], query: Mapping[str, str]) -> list[Summary]:
    """The sessions the query's filters let through."""
    state, model, words = query.get("state"), query.get("model"), query.get("q", "").casefold()
    since, until = _day(query.get("since", ""), False), _day(query.get("until", ""), True)
    out = []
    for s in found:
        if state and s.state != state:
            continue
        if model and model not in s.models:
            continue
        if since is not None and (s.updated_at or 0) < since:
            continue
        if until is not None and (s.updated_at or 0) >= until:
            continue
        if query.get("crash") == "1" and not s.crashes:
            continue
        if query.get("approval") == "1" and s.state != "awaiting-approval":
            continue
        if words and words not in s.title.casefold() and words not in s.id.casefold():
            continue
        out.append(s)
    return out


def list_page(
    found: Sequence[Summary],
    complete: bool,
    query: Mapping[str, str],
    shown: str,
    currency: str | None,
) -> str:
    """The HTML of one page of the list (see the module docstring)."""
    e = html.escape
    sort = query.get("sort", "updated")
    sort = sort if sort in _COLUMNS else "updated"
    descending = query.get("order", "asc" if sort in ("title", "state", "model") else "desc")
    chosen = sorted(_chosen(found, query), key=_COLUMNS[sort][1], reverse=descending == "desc")
    pages = max(1, -(-len(chosen) // PAGE))
    try:
        number = min(pages, max(1, int(query.get("page", "1"))))
    except ValueError:
        number = 1
    kept = {k: v for k, v in query.items() if k not in ("page", "sort", "order") and v}

    def link(**changes: str) -> str:
        return "?" + urlencode({**kept, "sort": sort, "order": descending, **changes})

    heads = "".join(
        f'<th><a href="{e(link(sort=name, order="asc" if descending == "desc" else "desc"))}"'
        f">{e(label)}{(' ▼' if descending == 'desc' else ' ▲') if name == sort else ''}</a></th>"
        for name, (label, _) in _COLUMNS.items()
    )
    body = (
        "".join(_row(s, currency) for s in chosen[(number - 1) * PAGE : number * PAGE])
        or f'<tr><td colspan="{len(_COLUMNS)}">no session matches</td></tr>'
    )
    models = sorted({m for s in found for m in s.models})
    nav = " ".join(
        f'<a href="{e(link(page=str(n)))}">{"newer" if n < number else "older"}</a>'
        if sort == "updated" and descending == "desc"
        else f'<a href="{e(link(page=str(n)))}">{"previous" if n < number else "next"}</a>'
        for n in (number - 1, number + 1)
        if 1 <= n <= pages
    )
    pending = (
        ""
        if complete
        else '<p class="pending" id="pending">still reading the store: some sessions show only '
        "their listing; this page reloads until it is all read</p>"
    )
    refresh = "" if complete else '<meta http-equiv="refresh" content="2">'
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; '
        f"style-src '{csp_hash(_STYLE)}'; base-uri 'none'; form-action 'self'\">{refresh}"
        f"<title>sessions of {e(shown)}</title><style>{_STYLE}</style></head><body>"
        f"<h1>Sessions of {e(shown)}</h1>{pending}"
        f"{_form(query, models)}<p>{len(chosen):,} of {len(found):,} sessions · page {number} of "
        f"{pages} <nav>{nav}</nav></p><table><thead><tr>{heads}</tr></thead>"
        f'<tbody id="sessions">{body}</tbody></table></body></html>'
    )


def _row(s: Summary, currency: str | None) -> str:
    e = html.escape
    title = s.title or ("(reading…)" if not s.read and not s.problem else "(no user message)")
    cost = "-" if s.cost is None else f"{s.cost:.4f} {currency}"
    numbers = [s.turns if s.turns is not None else "-", f"{s.events:,}"]
    cells = [
        f'<td><a href="/session/{quote(s.id, safe="")}">{e(title)}</a><div class="id">'
        f"{e(s.id)}</div></td>",
        f'<td class="{e(s.state.replace(" ", "-"))}" title="{e(s.problem or "")}">'
        f"{e(s.state)}</td>",
        f"<td>{e(', '.join(s.models) or '-')}</td>",
        f"<td>{e(_when(s.created_at))}</td><td>{e(_when(s.updated_at))}</td>",
        f'<td class="n">{e(_duration(s.duration_ms))}</td>',
        *(f'<td class="n">{e(str(n))}</td>' for n in numbers),
        f'<td class="n">{s.tokens_in:,} / {s.tokens_out:,}</td><td class="n">{e(cost)}</td>',
        f'<td class="n{" crashed" if s.crashes else ""}">{s.crashes}</td>',
        f'<td class="n">{s.errors}</td>',
    ]
    return f'<tr data-id="{e(s.id)}">{"".join(cells)}</tr>'


def _form(query: Mapping[str, str], models: Sequence[str]) -> str:
    e = html.escape

    def options(name: str, values: Sequence[str], label: str) -> str:
        chosen = query.get(name, "")
        listed = "".join(
            f'<option value="{e(v)}"{" selected" if v == chosen else ""}>{e(v)}</option>'
            for v in values
        )
        return (
            f'<label>{label} <select name="{name}"><option value="">any</option>{listed}'
            "</select></label>"
        )

    def box(name: str, label: str) -> str:
        on = " checked" if query.get(name) == "1" else ""
        return f'<label><input type="checkbox" name="{name}" value="1"{on}> {label}</label>'

    def day(name: str, label: str) -> str:
        return (
            f'<label>{label} <input type="date" name="{name}" '
            f'value="{e(query.get(name, ""))}"></label>'
        )

    keep = "".join(
        f'<input type="hidden" name="{k}" value="{e(query[k])}">'
        for k in ("sort", "order")
        if query.get(k)
    )
    return (
        f'<form method="get" action="/">{options("state", _STATES, "state")}'
        f"{options('model', models, 'model')}{day('since', 'since')}{day('until', 'until')}"
        f"{box('crash', 'crashed')}{box('approval', 'awaiting approval')}"
        f'<label>find <input type="search" name="q" value="{e(query.get("q", ""))}"></label>'
        f'{keep}<button type="submit">show</button> <a href="/">clear</a></form>'
    )
