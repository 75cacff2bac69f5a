"""A private event loop on a thread of its own, for an integration's runtime that its callers
use from any thread and any event loop (a framework's test fixture on one loop and the tests
on another; several threads, each with its own loop, sharing one session).

Guarantees: every coroutine given to :meth:`HomeLoop.run` runs on the home loop, one event
loop for the runtime's whole life, so nothing it creates is ever bound to a loop that is
not running; the caller awaits it from its own loop (or blocks, from a thread without one);
cancelling the caller cancels the work; :meth:`HomeLoop.wait` is the same for a caller that
blocks; :meth:`HomeLoop.close` ends the thread.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

__all__ = ["HomeLoop"]

T = TypeVar("T")


class HomeLoop:
    """An event loop running on a daemon thread until :meth:`close`."""

    def __init__(self, name: str) -> None:
        self.loop = asyncio.new_event_loop()
        ready = threading.Event()

        def serve() -> None:
            asyncio.set_event_loop(self.loop)
            self.loop.call_soon(ready.set)
            self.loop.run_forever()

        self._thread = threading.Thread(target=serve, name=name, daemon=True)
        self._thread.start()
        ready.wait()

    async def run(self, work: Coroutine[Any, Any, T]) -> T:
        """``work``'s result, run on the home loop (directly when called from it)."""
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:  # pragma: no cover - (a coroutine always has one)
            running = None
        if running is self.loop:
            return await work
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(work, self.loop))

    def wait(self, work: Coroutine[Any, Any, T]) -> T:
        """``work``'s result, run on the home loop, for a caller that blocks (a thread of
        its own, or one with a loop of its own that it may block).

        Raises:
            RuntimeError: Called from the home loop itself (it would wait for itself).
        """
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is self.loop:
            work.close()
            raise RuntimeError("a blocking wait on the home loop from the home loop itself")
        return asyncio.run_coroutine_threadsafe(work, self.loop).result()

    def close(self) -> None:
        """Stop the loop and end its thread (from any thread but the home one)."""
        if self.loop.is_closed():
            return
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join()
        self.loop.close()
