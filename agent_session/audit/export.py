"""The audit export (``agent-session export --format audit``): one log's chain as JSON Lines
that an auditor checks with nothing else (:func:`verify_export`), with content redacted on
request.

Lines: first ``{"format": "agent-session-audit/1", "session", "chain", "header"}`` (the
stored header line as text); then one object per stored line, ``{seq, n, type, time,
sha256, line}``, where ``line`` is the stored line as text, left out when content is
redacted (``redact=True``) but for anchors, which are always whole; then, when signatures
are given, one ``{"signature": {...}}`` per signed anchor, as :mod:`.signing` keeps them.

Guarantees: a redacted line keeps its digest, so the chain and the signatures check the same
with or without content; a kept line's bytes are checked against its digest; what the export
does not hold (a line, an anchor) cannot be made up by it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Final

from agent_session.audit.signing import SigningError
from agent_session.session.chain import (
    CHAIN,
    IntegrityReport,
    Unit,
    check_chain,
    stored_units,
    unit_of,
)
from agent_session.session.events.types import AUDIT_ANCHOR

__all__ = ["FORMAT", "audit_lines", "read_export", "verify_export"]

FORMAT: Final = "agent-session-audit/1"
"""The first line's ``format``."""


def audit_lines(
    id: str,
    content: bytes,
    *,
    redact: bool = False,
    signatures: Sequence[Mapping[str, Any]] = (),
) -> Iterator[str]:
    """The export's lines (without newlines) of the log ``id`` whose stored text
    (``read_raw``) is ``content``."""
    header, units = stored_units(content)
    head = {"format": FORMAT, "session": id, "chain": CHAIN, "header": header.decode("utf-8")}
    yield json.dumps(head, ensure_ascii=False)
    for unit in units:
        if unit.torn:
            break
        entry: dict[str, Any] = {
            "seq": unit.seq,
            "n": unit.count,
            "type": unit.type,
            "time": unit.time,
            "sha256": unit.digest.hex(),
        }
        if unit.line is not None and (not redact or unit.type == AUDIT_ANCHOR):
            entry["line"] = unit.line.decode("utf-8", "surrogateescape")
        yield json.dumps(entry, ensure_ascii=False)
    for signature in signatures:
        yield json.dumps({"signature": dict(signature)})


def read_export(path: str | Path) -> tuple[str, bytes, list[Unit], list[Mapping[str, Any]]]:
    """``(session id, header line, units, signatures)`` of an audit export.

    Raises:
        SigningError: The file is not an audit export, or a line is damaged (naming it).
    """
    lines = Path(path).read_bytes().splitlines()
    try:
        head = json.loads(lines[0]) if lines else None
    except ValueError:
        head = None
    if not isinstance(head, dict) or head.get("format") != FORMAT:
        raise SigningError(f"{path}: not an audit export (its first line names no {FORMAT})")
    units: list[Unit] = []
    signatures: list[Mapping[str, Any]] = []
    for number, raw in enumerate(lines[1:], start=2):
        try:
            entry = json.loads(raw)
            if "signature" in entry:
                signatures.append(entry["signature"])
                continue
            units.append(_unit(number, entry))
        except (ValueError, TypeError, KeyError, AttributeError):
            raise SigningError(f"{path}: line {number} is not an audit entry") from None
    return str(head.get("session")), str(head.get("header")).encode(), units, signatures


def _unit(number: int, entry: Mapping[str, Any]) -> Unit:
    """A line kept in the export is the truth (its own digest is used, so a line changed in
    the export breaks the chain at its seq); a redacted one is its recorded digest."""
    text = entry.get("line")
    if isinstance(text, str):
        return unit_of(number, text.encode("utf-8", "surrogateescape"))
    if entry.get("type") == AUDIT_ANCHOR:
        raise ValueError("an anchor without its line")
    seq, count, time = entry["seq"], entry["n"], entry.get("time")
    if type(seq) is not int or type(count) is not int or count < 1:
        raise ValueError("no seq")
    digest = bytes.fromhex(entry["sha256"])
    return Unit(number, seq, count, str(entry["type"]), time, digest, None)


def verify_export(path: str | Path) -> tuple[IntegrityReport, list[Mapping[str, Any]]]:
    """Check an audit export's chain by itself; return the report and the signatures it
    carries (:func:`agent_session.audit.signing.check_signatures` checks them).

    Raises:
        SigningError: The file is not an audit export, or a line is damaged.
    """
    id, header, units, signatures = read_export(path)
    return check_chain(id, header, units), signatures
