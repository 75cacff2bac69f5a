"""Where a store's stopped sessions may have been moved (a cold tier, such as an archive on
object storage), as :class:`SessionPersistence` sees it: the reads of a session it does not
hold fall back to the cold copy, read-only, and a session opened for writing is brought
back first (:mod:`agent_session.cold` is the one cold tier this build has).

Guarantees: a read never changes the cold copy or the hot store; a hot copy, where one
exists, is always the one read (a cold copy beside it is a leftover of an archiving or a
restoring a kill cut short).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, Protocol, TypeVar, cast

from agent_session.session.errors import SessionNotFoundError
from agent_session.session.persistence.api import Diagnosis

if TYPE_CHECKING:
    from agent_session.session.persistence.service import SessionPersistence

__all__ = ["ColdSource", "falls_back"]

P = ParamSpec("P")
T = TypeVar("T")


class ColdSource(Protocol):
    """A store's cold tier."""

    def reader(self, id: str) -> contextlib.AbstractAsyncContextManager[SessionPersistence | None]:
        """A read-only store holding the cold copy of ``id`` for the block (``None`` when
        there is none)."""
        ...

    def where(self, id: str) -> str:
        """Where the cold copy of ``id`` lives, as messages name it."""
        ...

    async def restore(self, into: SessionPersistence, id: str) -> bool:
        """Bring ``id`` back into ``into``, durably; ``False`` when there is no cold copy."""
        ...

    async def forget(self, id: str) -> bool:
        """Remove the cold copy of ``id``; ``False`` when there was none."""
        ...


def falls_back(
    method: Callable[Concatenate[Any, str, P], Awaitable[T]],
) -> Callable[Concatenate[Any, str, P], Awaitable[T]]:
    """A read of :class:`SessionPersistence` that, for a session the store does not hold
    (:class:`SessionNotFoundError`, or ``None``), reads its cold copy the same way."""

    async def read(self: Any, id: str, /, *args: P.args, **kwargs: P.kwargs) -> T:
        cold: ColdSource | None = self.cold
        missing: SessionNotFoundError | None = None
        try:
            found = await method(self, id, *args, **kwargs)
        except SessionNotFoundError as e:
            if cold is None:
                raise
            missing, found = e, cast(T, None)
        if found is not None or cold is None:
            return found
        async with cold.reader(id) as archived:
            if archived is None:  # (the store's own answer for "none")
                if missing is not None:
                    raise missing
                return found
            answer: T = await getattr(archived, method.__name__)(id, *args, **kwargs)
        if isinstance(answer, Diagnosis):
            return cast(T, dataclasses.replace(answer, location=cold.where(id)))
        return answer

    functools.update_wrapper(read, method)
    return read
