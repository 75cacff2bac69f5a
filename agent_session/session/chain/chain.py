"""The hash chain over a log's stored lines: its one definition, shared by the writer that
anchors it (:mod:`.anchoring`) and every verifier (:mod:`.integrity`, :mod:`.export`).

A log's **stored lines** are what its store keeps, as ``read_raw`` renders them: the lines
of a JSONL file (decompressed for ``.zstd``), the line of each PostgreSQL row, each SQLite
row with its JSON columns inserted verbatim. No value is parsed and written again to get
them, so a verifier cannot disagree with the writer over an encoding.

The chain (``sha256-v1``):

- each stored line ``L`` after the header has the digest ``d = SHA-256(L)``;
- an ``audit/anchor`` event covers the lines from the one after the previous anchor's
  coverage (``from``; 0 for the first) through a seq before it (``through``), and records
  ``hash = SHA-256(previous anchor's hash ‖ d_from ‖ … ‖ d_through)`` (the first anchor's
  "previous" is ``SHA-256("agent-session chain v1")``), the first 16 hex digits of each
  covered line's digest (``lines``, so a verifier names the exact seq that changed) and the
  digest of the header line (``header``). Anchor lines are stored lines too: each is covered
  by a later anchor, so every anchor's hash depends on every line before it. One anchor
  covers at most :data:`MAX_LINES` lines; more are covered by several anchors in a row.

What it proves: a line changed, inserted or removed before the last anchor breaks the chain
at a named seq. What it cannot: whoever can write the store can rewrite a line *and* every
anchor after it consistently. Only a signature by a key that party does not hold
(:mod:`.signing`) answers that.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

__all__ = [
    "CHAIN",
    "GENESIS",
    "MAX_LINES",
    "SHORT",
    "Chain",
    "Folded",
    "header_digest",
    "line_digest",
    "segment_hash",
]

CHAIN: Final = "sha256-v1"
"""The name of this chain's definition, recorded in every anchor."""
GENESIS: Final = hashlib.sha256(b"agent-session chain v1").digest()
"""The running hash before the first line."""
SHORT: Final = 16
"""Hex digits of a line's digest an anchor lists."""
_SHORT_BYTES: Final = SHORT // 2
_sha256 = hashlib.sha256
MAX_LINES: Final = 1000
"""The most lines one anchor covers, so no anchor line grows past ~20 kB."""


def line_digest(line: bytes) -> bytes:
    """``SHA-256`` of a stored line (without its newline)."""
    return hashlib.sha256(line).digest()


def header_digest(header_line: bytes) -> str:
    """``sha256:<hex>`` of a log's stored header line."""
    return "sha256:" + hashlib.sha256(header_line).hexdigest()


Folded = tuple[int, bytes, bool]
"""One stored line folded into a chain: the last seq it holds, its digest, whether it is an
anchor's line."""


def segment_hash(previous: bytes, digests: list[bytes]) -> bytes:
    """The hash an anchor records: the previous anchor's and its covered lines' digests."""
    return _sha256(previous + b"".join(digests)).digest()


@dataclass(slots=True)
class Chain:
    """The running state of one log's chain (the writer's side): the last anchor's hash,
    and the lines no anchor covers yet."""

    hash: bytes = GENESIS
    """The last anchor's hash (:data:`GENESIS` before the first)."""
    through: int = -1
    """The last seq folded in (``-1``: none)."""
    anchored: int = -1
    """The last seq an anchor covers (``-1``: none)."""
    pending: list[Folded] = field(default_factory=list)
    """The lines after :attr:`anchored`, in order."""
    closed: bool = False
    """Whether a line that asks for an anchor (a turn's end) waits for one."""

    def add(
        self, seq: int, count: int, line: bytes, anchor: Mapping[str, Any] | None = None
    ) -> None:
        """Fold in the stored line holding seqs ``seq .. seq + count - 1``; ``anchor``: the
        data of the anchor it is, when it is one written before (a resumed log's, a fork's
        seed): the lines it covers are then covered, and its hash is computed again from
        them (never taken from the line)."""
        self.through = last = seq + count - 1
        if anchor is not None:
            through = anchor.get("through")
            if type(through) is int and self.anchored < through < seq:
                covered = [f for f in self.pending if f[0] <= through]
                self.hash = segment_hash(self.hash, [f[1] for f in covered])
                self.anchored = through
                self.pending = self.pending[len(covered) :]
        self.pending.append((last, _sha256(line).digest(), anchor is not None))

    @property
    def unanchored(self) -> bool:
        """Whether a line other than an anchor's own waits for an anchor."""
        return any(not folded[2] for folded in self.pending)

    def take_anchor(self, header: str) -> dict[str, Any]:
        """The data of an anchor covering the next (at most :data:`MAX_LINES`) pending
        lines, which are then no longer pending. Call while :attr:`pending` is not empty."""
        covered, self.pending = self.pending[:MAX_LINES], self.pending[MAX_LINES:]
        digests = [folded[1] for folded in covered]
        self.hash = segment_hash(self.hash, digests)
        data = {
            "chain": CHAIN,
            "from": self.anchored + 1,
            "through": covered[-1][0],
            "hash": self.hash.hex(),
            "lines": [digest[:_SHORT_BYTES].hex() for digest in digests],
            "header": header,
        }
        self.anchored = covered[-1][0]
        return data
