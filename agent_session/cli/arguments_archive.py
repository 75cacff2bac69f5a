"""The grammar of ``archive``, which moves a store's stopped sessions to its cold tier (the
rest of the command line is in :mod:`agent_session.cli.arguments`)."""

from __future__ import annotations

from agent_session.cli.arguments_looking import Command, age

__all__ = ["ARCHIVING", "ARCHIVING_EXAMPLES", "add_archiving"]

ARCHIVING = ("archive",)
"""The commands of this module, each on one store."""
ARCHIVING_EXAMPLES = {
    "archive": "agent-session archive ./agent-sessions --older-than 7d --to s3://logs/agents",
}


def add_archiving(command: Command) -> None:
    """Add the commands through ``command(name, help, description)``."""
    archive = command(
        "archive",
        "move stopped sessions to S3-compatible storage",
        "Move the sessions no event was written to for --older-than, and that no live writer "
        "holds, to s3://bucket/prefix (recorded as the store's archive): each as the "
        "reference's session.jsonl.zstd and a manifest, read back and checked before its hot "
        "copy is dropped. The store's commands read archived sessions from there, and "
        "resuming one brings it back. Credentials come from the environment "
        "(AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY) and are never printed.",
    )
    archive.add_argument("ids", nargs="*", metavar="ID", help="only these sessions")
    archive.add_argument("--to", required=True, metavar="URL", help="s3://bucket/prefix")
    archive.add_argument(
        "--older-than", required=True, type=age, metavar="AGE", help="30m, 12h, 7d; 0s: all"
    )
    archive.add_argument(
        "--endpoint-url",
        metavar="URL",
        help="an S3-compatible server (default: AWS_ENDPOINT_URL, else AWS's)",
    )
    archive.add_argument("--json", action="store_true", help="one JSON object per session")
