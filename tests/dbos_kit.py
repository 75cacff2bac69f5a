"""What the DBOS kill tests' workers share: the scripted model and the two tools."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any


def send(arguments: Mapping[str, Any], call_id: str) -> str:
    with open(
        os.environ["DBOS_TEST_OUTBOX"], "a"
    ) as file:  # (one line per run of the body, durable)
        file.write(call_id + "\n")
        file.flush()
        os.fsync(file.fileno())
    return f"sent to {arguments['to']}"


def lookup(arguments: Mapping[str, Any], call_id: str) -> str:
    return f"found {arguments['q']}"


def reply_to(asked: bool, turn: int) -> tuple[str, list[tuple[str, str, dict[str, Any]]]]:
    """The scripted model: calls right after the user's message (``asked``) of turn
    ``turn``, an answer after their results."""
    if asked:
        return "", [
            (f"send-{turn}", "send", {"to": f"user{turn}"}),
            (f"look-{turn}", "lookup", {"q": f"q{turn}"}),
        ]
    return f"done {turn}", []
