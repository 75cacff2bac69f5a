"""One helper for the loop's futures that the write path hands on from one to another.

Internal to ``session.persistence``: a backend imports what it needs of this module from
:mod:`session.persistence.kit`, whose names stay.
"""

from __future__ import annotations

import asyncio

__all__ = ["follow"]


def follow(target: asyncio.Future[None], source: asyncio.Future[None]) -> None:
    """Give ``target`` the outcome of ``source`` (a done future): its result, its exception,
    or (cancelled) a ``CancelledError`` as its exception. A ``target`` already done (a waiter
    cancelled it) is left as it is."""
    if target.done():
        return
    error = asyncio.CancelledError() if source.cancelled() else source.exception()
    if error is None:
        target.set_result(None)
    else:
        target.set_exception(error)
