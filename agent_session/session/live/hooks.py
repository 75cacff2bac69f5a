"""The hook bus: named observers, awaited parallel listeners and ordered middleware chains.

Registration order is composition order everywhere: observers and listeners run in the order
they were registered, and the first registered middleware is the outermost. Every
registration returns a :class:`Disposer` that removes exactly that registration.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any, Final, TypeVar

__all__ = [
    "SESSION_CREATED",
    "SESSION_DISPOSED",
    "SESSION_EVENT",
    "SESSION_FLUSH",
    "SESSION_VALIDATE",
    "CallerFuture",
    "Disposer",
    "HookBus",
    "Middleware",
    "takes_runs",
]

log = logging.getLogger("session.hooks")

SESSION_CREATED: Final = "session/created"
"""Observer ``(session)``: a session was published. Raising vetoes the creation."""
SESSION_EVENT: Final = "session/event"
"""Observer ``(session, event)``: after each committed append; failures are contained. An
observer marked :func:`takes_runs` gets, for streamed deltas (``Session.append_delta``), the
:class:`~session.events.livelog.OpenRun` once, when a run starts, instead of each event."""
SESSION_VALIDATE: Final = "session/validate"
"""Validator ``(session, candidate)``: before the commit; raising rejects the append."""
SESSION_FLUSH: Final = "session/flush"
"""Listener ``(session)``: make everything appended so far durable. Awaited in parallel."""
SESSION_DISPOSED: Final = "session/disposed"
"""Observer ``(session)``: a published session left the store; failures are contained."""

Middleware = Callable[..., Any]
"""``middleware(value, next)``: return ``next(value)`` (possibly changed) or a result."""


_F = TypeVar("_F", bound=Callable[..., Any])


class CallerFuture(asyncio.Future[Any]):
    """A future a listener hands to its one caller alone: cancelling it ends that caller's
    wait and nothing else (the work it stands for goes on to its end). :meth:`HookBus.gather`
    awaits such a future of a lone listener directly, without a waiter of its own: one future
    and one loop round trip fewer per call."""


def takes_runs(observer: _F) -> _F:
    """Mark a ``session/event`` observer as one that takes runs of streamed deltas (see
    :data:`SESSION_EVENT`). While every observer of a store is marked, a delta that continues a
    run costs no call; one unmarked observer makes every delta an event built and handed to
    each observer."""
    observer.takes_runs = True  # type: ignore[attr-defined]
    return observer


class Disposer:
    """Removes one registration (or, for a plugin, all of them). Calling it twice is harmless."""

    __slots__ = ("_callbacks", "_done")

    def __init__(self, *callbacks: Callable[[], None]) -> None:
        self._callbacks = list(callbacks)
        self._done = False

    def add(self, callback: Callable[[], None]) -> None:
        """Run ``callback`` on disposal too (immediately if already disposed)."""
        if self._done:
            callback()
        else:
            self._callbacks.append(callback)

    @property
    def disposed(self) -> bool:
        """Whether the disposer has run."""
        return self._done

    def __call__(self) -> None:
        if self._done:
            return
        self._done = True
        # Undo in reverse registration order, like a context-manager stack.
        for callback in reversed(self._callbacks):
            try:
                callback()
            except Exception:
                log.exception("hook disposal failed")
        self._callbacks.clear()


class HookBus:
    """Named hooks of three kinds. Each name is used with one kind by convention."""

    def __init__(self) -> None:
        self._observers: dict[str, tuple[Callable[..., Any], ...]] = {}
        self._listeners: dict[str, tuple[Callable[..., Any], ...]] = {}
        self._middleware: dict[str, tuple[Middleware, ...]] = {}
        self.version = 0
        """Changes whenever a registration is added or removed (for callers that cache)."""

    # Registrations are kept in tuples replaced on change, so a snapshot taken by a caller
    # (for example the observers of one append) never changes under it.
    def _add(self, table: dict[str, tuple[Any, ...]], name: str, fn: Any) -> Disposer:
        table[name] = (*table.get(name, ()), fn)
        self.version += 1

        def remove() -> None:
            current = table.get(name, ())
            if fn in current:
                items = list(current)
                items.remove(fn)
                table[name] = tuple(items)
                self.version += 1

        return Disposer(remove)

    def observe(self, name: str, fn: Callable[..., Any]) -> Disposer:
        """Register an observer: called synchronously, in registration order."""
        return self._add(self._observers, name, fn)

    def listen(self, name: str, fn: Callable[..., Awaitable[Any] | None]) -> Disposer:
        """Register a parallel listener: all are started, then all are awaited."""
        return self._add(self._listeners, name, fn)

    def wrap(self, name: str, middleware: Middleware) -> Disposer:
        """Register a middleware; earlier registrations wrap later ones."""
        return self._add(self._middleware, name, middleware)

    def observers(self, name: str) -> tuple[Callable[..., Any], ...]:
        """The current observers of ``name`` (an immutable snapshot)."""
        return self._observers.get(name, ())

    def listeners(self, name: str) -> tuple[Callable[..., Any], ...]:
        """The current listeners of ``name`` (an immutable snapshot)."""
        return self._listeners.get(name, ())

    def middleware(self, name: str) -> tuple[Middleware, ...]:
        """The current middleware of ``name``, outermost first."""
        return self._middleware.get(name, ())

    def emit(self, name: str, *args: Any) -> None:
        """Call every observer of ``name``; log and contain each failure."""
        for fn in self.observers(name):
            try:
                fn(*args)
            except Exception as e:
                log.warning("%s listener threw: %s", name, e)

    async def gather(self, name: str, *args: Any) -> bool:
        """Start every listener of ``name`` before awaiting any, wait for all to settle, then
        raise the failure of the first failing listener in registration order.

        Returns whether any listener existed. Never cancels a listener: if the caller is
        cancelled, the listeners keep running to completion.
        """
        listeners = self.listeners(name)
        if not listeners:
            return False
        outcomes: list[BaseException | asyncio.Future[Any] | None] = []
        for fn in listeners:
            try:
                result = fn(*args)
            except Exception as e:  # a synchronous raise counts as a rejection
                outcomes.append(e)
                continue
            if type(result) is CallerFuture and len(listeners) == 1:
                await result  # (this caller's own: cancelling it cancels no listener)
                return True
            outcomes.append(asyncio.ensure_future(result) if inspect.isawaitable(result) else None)
        for outcome in outcomes:
            if isinstance(outcome, asyncio.Future) and not outcome.done():
                await _settled(outcome)
        for outcome in outcomes:
            if isinstance(outcome, BaseException):
                raise outcome
            if isinstance(outcome, asyncio.Future) and not outcome.cancelled():
                error = outcome.exception()
                if error is not None:
                    raise error
        return True

    def chain(self, name: str, terminal: Callable[[Any], Any]) -> Callable[[Any], Any]:
        """Compose the middleware of ``name`` around ``terminal`` (snapshot taken now).

        Each middleware is called as ``middleware(value, next)``. The chain is agnostic of
        sync/async: with an async terminal, middleware return awaitables and ``await next(v)``.
        """
        call = terminal
        for middleware in reversed(self.middleware(name)):
            call = _link(middleware, call)
        return call


async def _settled(future: asyncio.Future[Any]) -> None:
    """Wait until ``future`` is done without cancelling it if the caller is cancelled: what
    ``asyncio.wait([future])`` does, with about 4 µs of overhead where that adds 10 (beyond the
    loop's round trip; a flush with work pays it)."""
    waiter = future.get_loop().create_future()
    future.add_done_callback(partial(_wake, waiter))
    await waiter


def _wake(waiter: asyncio.Future[None], _: object) -> None:
    if not waiter.done():  # (a cancelled caller cancelled its waiter)
        waiter.set_result(None)


def _link(middleware: Middleware, downstream: Callable[[Any], Any]) -> Callable[[Any], Any]:
    def step(value: Any) -> Any:
        return middleware(value, downstream)

    return step
