"""Hand-made stores for tests that plant logs directly on disk (no writer involved)."""

from __future__ import annotations

from pathlib import Path

HEADER = b'{"type":"session","version":0,"id":"%s","createdAt":1,"delegationDepth":0}\n'
"""A header line, with ``%s`` for the session id."""
OPEN_TURN = b'{"type":"turn/start","seq":0,"time":1,"data":{"turn":1}}\n'
"""A turn that was started and never ended (an interrupted session)."""
TURN = (
    OPEN_TURN
    + b'{"type":"turn/end","seq":1,"time":1,"data":{"turn":1,"reason":{"kind":"completed"}}}\n'
)
"""One complete turn."""


def plant(root: Path, id: str, body: bytes = b"") -> Path:
    """Write ``<root>/_no-cwd/<id>/session.jsonl`` (a header, then ``body``) and return its
    session directory. ``id`` must be a plain directory name."""
    directory = root / "_no-cwd" / id
    directory.mkdir(parents=True)
    (directory / "session.jsonl").write_bytes(HEADER % id.encode() + body)
    return directory
