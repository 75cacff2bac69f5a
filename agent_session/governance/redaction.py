"""Redaction at the sinks (``export``, ``export-otel``, ``view``, ``serve``): what leaves
the store for a reader is rewritten by a rule set; the log itself is never changed.

The rules (``--redact RULE``, repeatable; :func:`redaction`):

- ``secrets``: credentials inside any text: API keys (``sk-…``, ``sk-ant-…``, ``AKIA…``,
  ``ghp_…``, ``xox?-…``), ``Bearer`` tokens, PEM private keys, ``password=…`` /
  ``api_key: …`` style assignments and the password of a URL, each replaced by
  ``[redacted secret]``;
- ``emails``: e-mail addresses, replaced by ``[redacted email]``;
- ``pattern:REGEX``: what the regular expression matches, replaced by ``[redacted]``;
- ``content``: every text the conversation holds (message text, tool arguments and
  results, the system prompt), replaced by ``[redacted: N chars]``; what gives the
  conversation its shape stays (roles, ids, tool names, models, types, numbers), so an
  export is still a valid provider request.

Guarantees: rules apply to every string of an event's data (nested objects and lists
included; keys are never changed): the patterns in the order given, then ``content``; a
redacted event keeps its envelope; the same rules give the same output.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from agent_session.session.events.event import SessionEvent, with_data
from agent_session.session.json.lossless import snapshot

__all__ = ["RULES", "Redaction", "redaction"]

RULES: Final = ("secrets", "emails", "content", "pattern:REGEX")
"""The rule names, as ``--redact`` takes them."""

_SECRETS: Final = re.compile(
    r"-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?-----END [A-Z ]*PRIVATE KEY-----"
    r"|\bsk-(?:ant-)?[A-Za-z0-9_-]{16,}"
    r"|\bAKIA[0-9A-Z]{16}\b"
    r"|\bgh[pousr]_[A-Za-z0-9]{30,}"
    r"|\bxox[abprs]-[A-Za-z0-9-]{10,}"
    r"|\bBearer\s+[A-Za-z0-9._~+/-]{16,}=*"
    r"|(?<=://)[^\s/:@]+:[^\s/@]+(?=@)"
    r"|(?i:\b(?:password|passwd|pwd|secret|token|api[_-]?key)\b\s*[:=]\s*)[^\s,;\"']+"
)
_ASSIGNMENT: Final = re.compile(r"(?i)(?:password|passwd|pwd|secret|token|api[_-]?key)\s*[:=]\s*")
_EMAIL: Final = re.compile(r"[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}")
_SHAPE_KEYS: Final = frozenset(
    {
        "type",
        "role",
        "id",
        "callId",
        "toolCallId",
        "toolUseId",
        "name",
        "toolName",
        "model",
        "provider",
        "api",
        "kind",
        "stopReason",
        "reason",
        "status",
        "mimeType",
        "format",
    }
)
"""Keys whose string values give a conversation its shape: ``content`` keeps them."""


@dataclass(frozen=True, slots=True)
class Redaction:
    """A rule set (see the module docstring)."""

    rules: tuple[str, ...]
    patterns: tuple[tuple[re.Pattern[str], str], ...]
    content: bool

    def text(self, value: str) -> str:
        """``value`` with the rules' patterns (and ``content``) applied."""
        for pattern, mask in self.patterns:
            value = pattern.sub(_masker(pattern, mask), value)
        if self.content and value:
            return f"[redacted: {len(value)} chars]"
        return value

    def value(self, value: Any, key: str | None = None) -> Any:
        """A JSON value with every string redacted (``content`` keeps the shape keys')."""
        if isinstance(value, str):
            if self.content and key in _SHAPE_KEYS:
                return _patterns_only(self, value)
            return self.text(value)
        if isinstance(value, Mapping):
            return {k: self.value(v, k) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [self.value(v, key) for v in value]
        return value

    def events(self, events: Iterable[SessionEvent]) -> list[SessionEvent]:
        """``events`` with their data redacted (their envelopes kept)."""
        return [with_data(event, snapshot(self.value(event.data), "data")) for event in events]


def _patterns_only(rules: Redaction, value: str) -> str:
    for pattern, mask in rules.patterns:
        value = pattern.sub(_masker(pattern, mask), value)
    return value


def _masker(pattern: re.Pattern[str], mask: str) -> Any:
    if pattern is not _SECRETS:
        return mask

    def keep_the_name(match: re.Match[str]) -> str:
        text = match.group(0)
        assignment = re.match(
            r"(?i)(?:password|passwd|pwd|secret|token|api[_-]?key)\s*[:=]\s*", text
        )
        return (assignment.group(0) if assignment else "") + mask

    return keep_the_name


def redaction(rules: Sequence[str] | None) -> Redaction | None:
    """The rule set ``rules`` name (``None`` for none).

    Raises:
        ValueError: An unknown rule, or a pattern that is not a regular expression.
    """
    if not rules:
        return None
    patterns: list[tuple[re.Pattern[str], str]] = []
    content = False
    for rule in rules:
        if rule == "secrets":
            patterns.append((_SECRETS, "[redacted secret]"))
        elif rule == "emails":
            patterns.append((_EMAIL, "[redacted email]"))
        elif rule == "content":
            content = True
        elif rule.startswith("pattern:") and len(rule) > len("pattern:"):
            try:
                patterns.append((re.compile(rule[len("pattern:") :]), "[redacted]"))
            except re.error as e:
                raise ValueError(f"--redact {rule}: not a regular expression ({e})") from None
        else:
            raise ValueError(f"--redact {rule!r}: not a rule (rules: {', '.join(RULES)})")
    return Redaction(tuple(rules), tuple(patterns), content)
