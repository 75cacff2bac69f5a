"""The ids of the logs an integration keeps a framework's sessions in: a prefix naming the
framework (``adk:``, ``langgraph:``, ``claude:``), then the framework's own names, each
percent-quoted where a character could not stand in a file name or is the ``:`` between
them. Any string round-trips; the id of one framework never reads as another's."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final
from urllib.parse import quote, unquote

__all__ = ["joined", "split"]

_SAFE: Final = " !$&'()*+,;=@[]^_`{|}~-./"
"""What stays as it is in a part (``:`` does not: it separates the parts)."""


def joined(prefix: str, parts: Sequence[str]) -> str:
    """The log id of ``parts`` under ``prefix``."""
    return prefix + ":".join(quote(part, safe=_SAFE) for part in parts)


def split(prefix: str, id: str) -> list[str] | None:
    """The parts of a log id :func:`joined` made under ``prefix``; ``None`` for another
    id."""
    if not id.startswith(prefix):
        return None
    return [unquote(part) for part in id[len(prefix) :].split(":")]
