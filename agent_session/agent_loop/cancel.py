"""A cancellation signal shared by a turn, its model stream and its tool calls."""

from __future__ import annotations

import asyncio
from typing import Any

__all__ = ["CancelSignal"]


class CancelSignal:
    """Set once, never cleared. ``reason`` is the JSON abort reason (``{"kind": "user"}``)."""

    def __init__(self) -> None:
        self._event = asyncio.Event()
        self.reason: Any = None

    @property
    def cancelled(self) -> bool:
        """Whether cancellation was requested."""
        return self._event.is_set()

    def cancel(self, reason: Any = None) -> None:
        """Request cancellation (the first reason wins)."""
        if not self._event.is_set():
            self.reason = reason if reason is not None else {"kind": "user"}
            self._event.set()

    async def wait(self) -> None:
        """Return once cancellation is requested."""
        await self._event.wait()
