"""Branches of a conversation: forks at any step, rewinds that delete nothing, replays served
from the log, and the comparison of two sessions by what their agents did."""

from agent_session.lineage.current import branches_for
from agent_session.lineage.diff import Compared, Difference, compare
from agent_session.lineage.fork import Forked, fork_live, fork_session
from agent_session.lineage.replay import Replayed, replay_session
from agent_session.lineage.rewind import current_branch, rewind_session

__all__ = [
    "Compared",
    "Difference",
    "Forked",
    "Replayed",
    "branches_for",
    "compare",
    "current_branch",
    "fork_live",
    "fork_session",
    "replay_session",
    "rewind_session",
]
