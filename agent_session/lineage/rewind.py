"""Rewind: take a conversation back to the end of one of its turns without deleting
anything. A rewind forks the conversation's current branch after that turn and makes the
fork the current branch (:mod:`agent_session.lineage.current`); the branch it leaves stays
in the store as it was, in ``ls``, ``show``, ``view`` and the traces.

An application that lets its users rewind opens ``current_branch(store, id)`` rather than
``id``. A rewind killed at any instant leaves the current branch as it was, or the fork
complete and current: the fork is written whole first, then the pointer moves."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from agent_session.lineage.current import branches_for
from agent_session.lineage.fork import Forked, default_id, fork_session
from agent_session.session.persistence.kit import failpoint

if TYPE_CHECKING:
    from agent_session.stores import StoreSpec

__all__ = ["current_branch", "rewind_session"]


def _spec(store: str | os.PathLike[str] | StoreSpec) -> StoreSpec:
    from agent_session.stores import StoreSpec, parse_store

    return store if isinstance(store, StoreSpec) else parse_store(os.fspath(store))


def current_branch(store: str | os.PathLike[str] | StoreSpec, conversation: str) -> str:
    """The session an application opens for ``conversation`` in the store ``store`` names:
    the fork the last rewind made current, or ``conversation`` itself."""
    branches = branches_for(_spec(store))
    try:
        return branches.current(conversation) or conversation
    finally:
        branches.close()


async def rewind_session(
    store: str | os.PathLike[str] | StoreSpec,
    conversation: str,
    *,
    turn: int,
    new_id: str | None = None,
) -> Forked:
    """Fork ``conversation``'s current branch after its turn ``turn`` (under ``new_id``, or
    ``<conversation>.fork-<8 hex digits>``) and make the fork the current branch. Raises what
    :func:`~agent_session.lineage.fork.fork_session` raises (nothing is written then)."""
    spec = _spec(store)
    branches = branches_for(spec)
    try:
        source = branches.current(conversation) or conversation
        named = new_id if new_id is not None else default_id(conversation)
        forked = await fork_session(spec.url, source, turn=turn, new_id=named)
        failpoint("rewind:before-point")  # (the crash tests' instant between the two writes)
        branches.point(conversation, forked.id)
        return forked
    finally:
        branches.close()
