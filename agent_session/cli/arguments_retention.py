"""The grammar of the retention commands: ``purge``, ``hold``, ``release`` and ``erase`` (the
rest of the command line is in :mod:`agent_session.cli.arguments`)."""

from __future__ import annotations

from agent_session.cli.arguments_governance import label_pair
from agent_session.cli.arguments_looking import Command, age

__all__ = ["RETENTION", "RETENTION_EXAMPLES", "add_retention", "add_rm"]

RETENTION = ("purge", "hold", "release", "erase")
"""The commands of this module, each on one store."""
RETENTION_EXAMPLES = {
    "purge": "agent-session purge ./agent-sessions --older-than 30d --label tenant=acme",
    "hold": "agent-session hold ./agent-sessions --label user=ana --reason 'matter 2026-114'",
    "release": "agent-session release ./agent-sessions chat-1 --reason 'matter closed'",
    "erase": "agent-session erase ./agent-sessions chat-1",
}


def add_rm(command: Command) -> None:
    """Add ``rm`` through ``command(name, help, description)``."""
    rm = command(
        "rm",
        "delete a session",
        "Delete a stopped session durably, with every event. A session a live writer holds "
        "(JSONL: another process holds its writer lock) or under legal hold is refused, and so "
        "is one whose child agents' sessions are stored, unless --with-subagents.",
    )
    rm.add_argument("id", help="the session id")
    rm.add_argument(
        "--force",
        action="store_true",
        help="delete it although forks of it are stored (each keeps its own copy of what it "
        "was seeded with)",
    )
    rm.add_argument(
        "--with-subagents",
        action="store_true",
        help="delete its child agents' sessions too (theirs first, then it: a failure never "
        "leaves a child without its parent)",
    )


def add_retention(command: Command) -> None:
    """Add the commands through ``command(name, help, description)``."""
    purge = command(
        "purge",
        "delete sessions past their retention, with receipts",
        "Delete every session last written more than --older-than ago (and carrying each "
        "--label), each whole or not at all, with a receipt per session: its id, the rule, "
        "the time, and the count, size and SHA-256 of the stored lines removed (never their "
        "content). Receipts go to .agent-session-receipts.jsonl in a JSONL store's directory, "
        "or the table agent_session_receipt of a database. A session under legal hold, held "
        "by a live writer, or a conversation's current branch is kept and named. A purge a "
        "crash interrupted is settled by the next one: its receipt then says purged or "
        "intact, as the store is.",
    )
    purge.add_argument(
        "--older-than", required=True, type=age, metavar="AGE", help="30d, 12h, 90m; 0s: all"
    )
    purge.add_argument(
        "--label",
        type=label_pair,
        action="append",
        default=[],
        metavar="K=V",
        help="only sessions labelled so (repeat: every one)",
    )
    purge.add_argument("--dry-run", action="store_true", help="list what it would delete")
    purge.add_argument("--json", action="store_true", help="one JSON object per session")

    hold = command(
        "hold",
        "place a legal hold: every delete refuses the session",
        "Place a legal hold on the sessions named, or on every session labelled --label: "
        "while it stands, rm, purge, erase, copy --move, archive and each framework's own "
        "delete refuse them, naming the hold. Kept as an event of each log. A session a live "
        "writer holds is refused: hold it in that process (agent_session.hold_live).",
    )
    release = command(
        "release",
        "release a legal hold (kept in the log)",
        "Release the holds standing on the sessions named, or on every session labelled "
        "--label (--hold SEQ: only the hold placed at that seq). The release is kept in the "
        "log beside the hold.",
    )
    for parser in (hold, release):
        parser.add_argument("ids", nargs="*", metavar="ID", help="the sessions")
        parser.add_argument("--label", type=label_pair, metavar="K=V", help="every session so")
        parser.add_argument("--reason", required=True, help="why (kept in the log)")
        parser.add_argument("--by", help="who (default: user@host)")
        parser.add_argument("--json", action="store_true", help="one JSON object per session")
    release.add_argument("--hold", type=int, action="append", metavar="SEQ", help="only it")

    erase = command(
        "erase",
        "erase a sealed session: delete its key",
        "Delete the keys a sealed session's content is encrypted with, from the keyring "
        "AGENT_SESSION_KEYRING names: its content is unreadable from then on, in the store "
        "and in every copy, archive and backup, while its seqs, sizes and chain still "
        "verify. Refused under a legal hold, while a live writer holds it, or for a session "
        "stored in clear (rm deletes that). A receipt is kept where purge keeps them.",
    )
    erase.add_argument("ids", nargs="+", metavar="ID", help="the sessions")
    erase.add_argument("--json", action="store_true", help="one JSON object per session")
