"""The outside world of the settlement children: a file of ``<tool> <call id>`` lines, one per
effect, that their tools append to and their probes read."""

from __future__ import annotations

__all__ = ["effects", "record"]


def effects(path: str) -> list[str]:
    """Every effect so far, in order."""
    try:
        with open(path) as outbox:
            return outbox.read().splitlines()
    except FileNotFoundError:
        return []


def record(path: str, line: str) -> None:
    """One more effect."""
    with open(path, "a") as outbox:
        outbox.write(line + "\n")
