"""The grammar of the commands that branch and re-run sessions: ``fork``, ``rewind``,
``replay`` and ``diff`` (the rest of the command line is in
:mod:`agent_session.cli.arguments`)."""

from __future__ import annotations

from agent_session.cli.arguments_looking import Command, number, whole

__all__ = ["BRANCHING", "BRANCHING_EXAMPLES", "add_branching"]

BRANCHING = ("fork", "rewind", "replay", "diff")
"""The commands of this module, each on one store."""
BRANCHING_EXAMPLES = {
    "fork": "agent-session fork ./agent-sessions chat-1 --turn 2 --new-id chat-1-alt",
    "rewind": "agent-session rewind ./agent-sessions chat-1 --turn 2",
    "replay": "agent-session replay ./agent-sessions chat-1 --to chat-1-replay",
    "diff": "agent-session diff ./agent-sessions chat-1 chat-1-replay",
}


def add_branching(command: Command) -> None:
    """Add the commands through ``command(name, help, description)``."""
    fork = command(
        "fork",
        "branch a session at a step, leaving it as it is",
        "A new session seeded with the session's events up to a boundary: a seq (--at), the "
        "end of a turn (--turn), or just before a turn (--before-turn); the whole log when "
        "none is given. Its header names the parent and the seed length in the reference's "
        "format; the parent is only read. A boundary inside an open turn is refused "
        "(OPEN_TURN); a session a crash cut is forked as a load would repair it.",
    )
    fork.add_argument("id", help="the session to fork")
    where = fork.add_mutually_exclusive_group()
    where.add_argument("--at", type=whole, metavar="SEQ", help="keep the events up to this seq")
    where.add_argument("--turn", type=number, metavar="N", help="keep turns up to turn N")
    where.add_argument(
        "--before-turn", type=number, metavar="N", help="keep what came before turn N"
    )
    fork.add_argument("--new-id", help="the fork's id (default: ID.fork-<8 hex digits>)")
    fork.add_argument("--json", action="store_true", help="one JSON object")

    rewind = command(
        "rewind",
        "take a conversation back to a turn, deleting nothing",
        "Fork the conversation's current branch after turn N and make the fork its current "
        "branch: an application that opens current_branch(store, ID) continues from there. "
        "The branch it leaves stays in the store as it was.",
    )
    rewind.add_argument("id", help="the conversation (the id its first session has)")
    rewind.add_argument(
        "--turn", type=number, metavar="N", required=True, help="back to after turn N"
    )
    rewind.add_argument("--new-id", help="the new branch's id (default: ID.fork-<8 hex digits>)")
    rewind.add_argument("--json", action="store_true", help="one JSON object")

    replay = command(
        "replay",
        "run a recorded session again, offline, from its log",
        "Run the session again through the agent loop into a new session, with the model's "
        "answers and the tools' results served from its log: no model is called and no tool "
        "body runs. A turn a crash cut is cut at the same event and repaired as it was. "
        "Compare the two with diff.",
    )
    replay.add_argument("id", help="the recorded session")
    replay.add_argument("--to", metavar="NEW", help="the replay's id (default: ID.replay-<hex>)")
    replay.add_argument("--json", action="store_true", help="one JSON object")

    diff = command(
        "diff",
        "where two sessions' agents first did something else",
        "The first divergence in the tool calls (name and arguments, in order), else in the "
        "tool results, else the first difference in the model's text; prose alone is not a "
        "divergence of behaviour. Exit 0 when the behaviour is the same, 1 when it diverges.",
    )
    diff.add_argument("a", metavar="A", help="a session")
    diff.add_argument("b", metavar="B", help="another session (its replay, a fork...)")
    diff.add_argument("--json", action="store_true", help="one JSON object")
