"""Checking a log's chain offline (``agent-session verify --integrity``): from its stored
lines as ``read_raw`` gives them, or from an audit export (:mod:`.export`), with no writer
and no key.

Guarantees: the first line whose bytes do not match what an anchor recorded is named by its
seq (a changed line, a line inserted, a removed one: the seq found where another was due);
an anchor whose own record was rewritten is named; lines after the last anchor are counted
as *not covered yet* (written after the last checkpoint, or a cut tail: the chain cannot
tell a removed tail from one never written, which is what a signed anchor is for); a torn
last line (a crash mid-write, cut by the next load) is reported, never a mismatch.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson

from agent_session.session.chain.chain import (
    CHAIN,
    GENESIS,
    SHORT,
    header_digest,
    line_digest,
    segment_hash,
)
from agent_session.session.events.types import AUDIT_ANCHOR

__all__ = ["IntegrityReport", "Unit", "check_chain", "stored_units", "unit_of"]


@dataclass(frozen=True, slots=True)
class Unit:
    """One stored line after the header."""

    number: int
    """Its line number in the artifact (the header is line 1)."""
    seq: int | None
    """Its (first) seq; ``None`` when it has none (not an event line)."""
    count: int
    """How many events it holds (more than one for a packed run of deltas)."""
    type: str | None
    time: int | None
    digest: bytes
    line: bytes | None
    """The line's bytes; ``None`` when redacted (an audit export keeps only the digest)."""
    anchor: Mapping[str, Any] | None = None
    """An anchor line's data."""
    torn: bool = False
    """The last line, without its newline: a write a crash cut."""


def stored_units(content: bytes) -> tuple[bytes, list[Unit]]:
    """The header line and the stored lines of a log's JSONL text (``read_raw``)."""
    pieces = content.split(b"\n")
    head, rest = pieces[0], pieces[1:]
    torn_last = bool(rest) and rest[-1] != b""
    if rest and rest[-1] == b"":
        rest.pop()
    units = []
    for index, line in enumerate(rest):
        torn = torn_last and index == len(rest) - 1
        units.append(unit_of(index + 2, line, torn=torn))
    return head, units


def unit_of(number: int, line: bytes, *, torn: bool = False) -> Unit:
    """The :class:`Unit` of one stored line."""
    digest = line_digest(line)
    try:
        value = orjson.loads(line)
    except orjson.JSONDecodeError:
        return Unit(number, None, 1, None, None, digest, line, torn=torn)
    if not isinstance(value, dict):
        return Unit(number, None, 1, None, None, digest, line, torn=torn)
    seq, count = value.get("seq"), 1
    if seq is None and "seq0" in value:  # a packed run of deltas
        seq = value.get("seq0")
        data = value.get("data")
        members = data.get("texts", data.get("args")) if isinstance(data, dict) else None
        count = len(members) if isinstance(members, list) and members else 1
    kind, time = value.get("type"), value.get("time", value.get("time0"))
    data = value.get("data")
    anchor = data if kind == AUDIT_ANCHOR and isinstance(data, dict) else None
    return Unit(
        number,
        seq if type(seq) is int else None,
        count,
        kind if isinstance(kind, str) else None,
        time if type(time) is int else None,
        digest,
        line,
        anchor,
        torn,
    )


@dataclass(slots=True)
class IntegrityReport:
    """What a check of one log's chain found."""

    id: str
    events: int = 0
    """Seqs stored (complete lines)."""
    anchors: dict[int, str] = field(default_factory=dict)
    """Each anchor's seq and the hash it records, in order."""
    covered: int = -1
    """The last seq an anchor covers (``-1``: none)."""
    uncovered: int = 0
    """Events after :attr:`covered`, the last anchor's own line not counted."""
    torn: bool = False
    bad_seq: int | None = None
    problem: str | None = None
    """The first mismatch, in words; ``None`` when the chain holds."""

    @property
    def ok(self) -> bool:
        """Whether every anchored line matches its chain."""
        return self.problem is None

    def text(self) -> str:
        """One line for a person."""
        if self.problem is not None:
            return f"chain broken: {self.problem}"
        if not self.anchors:
            return f"not chained: no audit/anchor in {self.events} event(s)"
        said = (
            f"chain intact: {len(self.anchors)} anchor(s) cover seqs 0..{self.covered} "
            f"of {self.events}"
        )
        if self.uncovered:
            said += f"; {self.uncovered} event(s) after seq {self.covered} not covered yet"
        if self.torn:
            said += "; a torn last line (a cut write) follows"
        return said

    def to_json(self) -> dict[str, Any]:
        """The report as ``verify --integrity --json`` prints it."""
        return {
            "id": self.id,
            "ok": self.ok,
            "events": self.events,
            "anchors": len(self.anchors),
            "coveredThrough": self.covered,
            "uncovered": self.uncovered,
            "torn": self.torn,
            "badSeq": self.bad_seq,
            "problem": self.problem,
        }


def check_chain(id: str, header: bytes, units: Iterable[Unit]) -> IntegrityReport:
    """Check the chain of the log ``id`` whose header line is ``header``."""
    report = IntegrityReport(id)
    seed = _seed_length(header)
    previous = GENESIS
    since: list[tuple[int, bytes]] = []  # (the last seq a line holds, its digest)
    expected = 0
    for unit in units:
        if unit.torn:
            report.torn = True
            break
        if unit.seq is None:
            return _broken(report, expected, f"line {unit.number} is not an event line")
        if unit.seq != expected:
            if unit.seq > expected:
                gone = f"seq {expected}" + (f"..{unit.seq - 1}" if unit.seq - 1 > expected else "")
                why = f"{gone} missing: line {unit.number} holds seq {unit.seq}"
                return _broken(report, expected, why)
            why = f"line {unit.number} holds seq {unit.seq} again, where seq {expected} was due"
            return _broken(report, expected, why)
        if unit.anchor is not None:
            problem = _anchor_problem(unit, report.covered, previous, since, header, seed)
            if problem is not None:
                return _broken(report, *problem)
            through = unit.anchor["through"]
            previous = bytes.fromhex(unit.anchor["hash"])
            report.anchors[unit.seq] = unit.anchor["hash"]
            report.covered = through
            since = [entry for entry in since if entry[0] > through]
        expected = unit.seq + unit.count
        since.append((expected - 1, unit.digest))
    report.events = expected
    own = 1 if report.anchors and max(report.anchors) == expected - 1 else 0
    report.uncovered = max(0, expected - 1 - report.covered - own)
    return report


def _anchor_problem(
    unit: Unit,
    covered: int,
    previous: bytes,
    since: list[tuple[int, bytes]],
    header: bytes,
    seed: int,
) -> tuple[int, str] | None:
    """``(seq, why)`` when the anchor ``unit`` does not hold for the lines before it."""
    data, seq = unit.anchor or {}, unit.seq or 0
    start, through = data.get("from"), data.get("through")
    recorded, shorts = data.get("hash"), data.get("lines")
    shape = (
        data.get("chain") == CHAIN
        and type(start) is int
        and type(through) is int
        and covered < start <= through + 1
        and through < seq
        and isinstance(recorded, str)
        and isinstance(shorts, list)
    )
    if not shape:
        return seq, f"the anchor at seq {seq} is not a {CHAIN} anchor continuing seq {covered}"
    assert isinstance(start, int)
    assert isinstance(through, int)
    assert isinstance(shorts, list)
    lines = [entry for entry in since if start <= entry[0] <= through]
    if not lines or lines[-1][0] != through:
        return seq, f"the anchor at seq {seq} covers through seq {through}, which no line ends"
    given = [digest[: SHORT // 2].hex() for _, digest in lines]
    holds = start == covered + 1 and segment_hash(previous, [d for _, d in lines]).hex() == recorded
    if holds:
        if given != shorts:  # the lines hold: its record of them does not
            return seq, f"the anchor at seq {seq} was rewritten (its line digests)"
    else:
        # (a gap before ``start``: an anchor that no longer reads as one; its line is here)
        for index, short in enumerate(given):
            anchored = shorts[index] if index < len(shorts) else "none"
            if anchored != short:
                first = lines[index - 1][0] + 1 if index else start
                return first, (
                    f"the stored bytes of seq {first} do not match the anchor at seq {seq} "
                    f"(line digest {short}, anchored {anchored})"
                )
        return seq, (
            f"the anchor at seq {seq} was rewritten: its hash {str(recorded)[:SHORT]}… is not "
            f"the chain's through seq {through}"
        )
    if seq >= seed and data.get("header") != header_digest(header):
        return seq, f"the header line does not match the one the anchor at seq {seq} recorded"
    return None


def _broken(report: IntegrityReport, seq: int, why: str) -> IntegrityReport:
    report.bad_seq, report.problem = seq, why
    report.events = max(report.events, seq)
    return report


def _seed_length(header: bytes) -> int:
    """The header's ``seedLength`` (anchors before it were copied from the parent)."""
    try:
        value = orjson.loads(header)
    except orjson.JSONDecodeError:
        return 0
    seed = value.get("seedLength") if isinstance(value, dict) else None
    return seed if type(seed) is int else 0
