"""``import --format claude-code`` and ``export --format claude-code``: Claude Code transcripts
into sessions of a store and back (:mod:`agent_session.interchange.claude_code`)."""

from __future__ import annotations

import argparse
import os
import sys

from agent_session.cli.exits import CORRUPT, OK, UserError

__all__ = ["export_claude_code", "import_claude_code"]


def _transcripts(path: str, id: str) -> list[tuple[str, str]]:
    """``(session id, file)`` of each transcript ``path`` names: itself, or each
    ``<session>.jsonl`` of a project directory (as ``<id>-<session>``)."""
    if path == "-" or not os.path.isdir(path):
        return [(id, path)]
    names = sorted(n for n in os.listdir(path) if n.endswith(".jsonl"))
    if not names:
        raise UserError(f"{path} holds no Claude Code transcript (*.jsonl)")
    return [(f"{id}-{name[: -len('.jsonl')]}", os.path.join(path, name)) for name in names]


async def import_claude_code(args: argparse.Namespace) -> int:
    """Create a session per transcript (an id that exists is refused, nothing written for
    it) and print what was salvaged, line by line."""
    from agent_session.cli.commands import open_backend
    from agent_session.interchange.claude_code import append_transcript, read_transcript
    from agent_session.session import Runtime, SessionNotFoundError

    worst = OK
    store = open_backend(args.store)  # created if missing, like copy's DST
    async with Runtime() as runtime:
        runtime.install(store)
        for id, path in _transcripts(args.file, args.id):
            try:
                await store.inspect(id)
            except SessionNotFoundError:
                pass
            else:
                print(f"{id}: exists in {args.store.shown}: not imported", file=sys.stderr)
                worst = CORRUPT
                continue
            if path == "-":
                data = sys.stdin.buffer.read()
            else:
                with open(path, "rb") as file:
                    data = file.read()
            salvaged = read_transcript(data)
            session = runtime.sessions.create(id)
            report = append_transcript(session, salvaged)
            await runtime.sessions.flush(session)
            await runtime.sessions.dispose(session)
            for line in report:
                print(f"{id}: {line}")
            print(
                f"imported {len(salvaged.entries)} entries of {path} into {id} "
                f"({session.seq} events, {len(report)} repaired or dropped) in "
                f"{args.store.shown}"
            )
    return worst


def export_claude_code(id: str, events: object) -> None:
    """Write the session's transcript to stdout."""
    from agent_session.interchange.claude_code import export_transcript

    sys.stdout.flush()
    sys.stdout.buffer.write(export_transcript(id, events))  # type: ignore[arg-type]
    sys.stdout.buffer.flush()
