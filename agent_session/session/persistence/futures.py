"""The loop's futures of the write path: how one ended (:func:`outcome`), one settled with an
outcome (:func:`settle`) or handed on to another (:func:`follow`), and the I/O's own
(:class:`Landing`), whose completion runs the bookkeeping of a checkpoint at once
instead of as one loop callback each.

Internal to ``session.persistence``: a backend imports what it needs of this module from
:mod:`session.persistence.kit`, whose names stay.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

__all__ = ["Landing", "follow", "on_landing", "outcome", "settle"]

log = logging.getLogger("session.persistence")

Hook = Callable[[BaseException | None], None]
"""Told how an I/O call ended: ``None`` when it succeeded, else its error."""


class Landing(asyncio.Future[Any]):
    """The future of one I/O call (:class:`~session.persistence.io_threads.IOThreads`). When
    the call ends, the hooks given to :func:`on_landing` run first, in order, on the loop's
    thread, with the call's outcome (even if a waiter cancelled this future: the I/O
    happened); then the future is settled. A checkpoint's ledger and barrier are thus up to
    date in one loop callback, not one per step of a chain of futures."""

    _hooks: list[Hook] | None = None

    def land(self, result: Any, error: BaseException | None) -> None:
        """Run the hooks with ``error``, then settle with ``result`` or ``error``."""
        hooks, self._hooks = self._hooks, None
        for hook in hooks or ():
            try:
                hook(error)
            except Exception:  # a hook's own failure must not strand the others
                log.exception("an I/O completion hook failed")
        if settle(self, error, result) and error is not None and hooks:
            self.exception()  # the hooks were told: not a failure nobody heard of


def on_landing(future: asyncio.Future[Any], hook: Hook) -> None:
    """Run ``hook`` with ``future``'s outcome when it ends: before it settles for a
    :class:`Landing`; else as a done callback (a cancelled future ends with a
    ``CancelledError``)."""
    if type(future) is Landing and not future.done():
        if future._hooks is None:
            future._hooks = []
        future._hooks.append(hook)
        return

    def done(ended: asyncio.Future[Any]) -> None:
        hook(outcome(ended))

    future.add_done_callback(done)


def outcome(future: asyncio.Future[Any]) -> BaseException | None:
    """How a done ``future`` ended: ``None`` for a result, else its exception (a
    ``CancelledError`` when it was cancelled)."""
    return asyncio.CancelledError() if future.cancelled() else future.exception()


def settle(future: asyncio.Future[Any], error: BaseException | None, result: Any = None) -> bool:
    """Give ``future`` ``result``, or ``error`` when there is one; a ``future`` already done
    (a waiter cancelled it) is left as it is. Returns whether it was settled here."""
    if future.done():
        return False
    if error is None:
        future.set_result(result)
    else:
        future.set_exception(error)
    return True


def follow(target: asyncio.Future[None], source: asyncio.Future[None]) -> None:
    """Give ``target`` the outcome of ``source`` (a done future): its result, its exception,
    or (cancelled) a ``CancelledError`` as its exception. A ``target`` already done (a waiter
    cancelled it) is left as it is."""
    settle(target, outcome(source))
