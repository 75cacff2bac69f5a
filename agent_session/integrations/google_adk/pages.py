"""Paging ``list_sessions``: sessions ordered as ADK orders them (oldest update first, then
user and id), a page at a time, resumed from an opaque token that names the last session
given (so a session created or touched between two pages is neither given twice nor lost
from the pages after it, unless its update moved it behind the token)."""

from __future__ import annotations

import base64
import json
from collections.abc import Sequence

from agent_session.integrations.google_adk.catalog import Row

__all__ = ["page_of"]


def _key(row: Row) -> tuple[float, str, str]:
    return (row.updated, row.user, row.id)


def page_of(
    rows: Sequence[Row], size: int | None, token: str | None
) -> tuple[list[Row], str | None]:
    """The rows of the page after ``token`` (from the first when ``None``), at most ``size``
    (all when ``None``), and the token of the next page (``None`` after the last).

    Raises:
        ValueError: ``size`` is not positive, or ``token`` is not one this function made.
    """
    if size is not None and (type(size) is not int or size < 1):
        raise ValueError(f"page_size must be a positive integer, got {size!r}")
    ordered = sorted(rows, key=_key)
    if token is not None:
        try:
            updated, user, id = json.loads(base64.urlsafe_b64decode(token.encode("ascii")))
            after = (float(updated), str(user), str(id))
        except (ValueError, TypeError, UnicodeError) as e:
            raise ValueError(f"page_token {token!r} is not a token list_sessions gave") from e
        ordered = [row for row in ordered if _key(row) > after]
    if size is None or len(ordered) <= size:
        return ordered, None
    page = ordered[:size]
    last = _key(page[-1])
    return page, base64.urlsafe_b64encode(json.dumps(list(last)).encode()).decode("ascii")
