"""Access to the conformance corpus written by the TypeScript reference stack.

``tests/data/upstream-v0.jsonl.gz`` is ``conformance/upstream-v0.jsonl`` and
``tests/data/upstream-v0-zstd.jsonl.gz`` is ``conformance/upstream-v0-zstd.jsonl`` (the same
runs with the reference's default compression; see ``tests/data/upstream-v0.README.md``),
gzipped; each line is one case.
"""

from __future__ import annotations

import base64
import functools
import gzip
import json
from pathlib import Path
from typing import Any

DATA = Path(__file__).parent / "data"


@functools.cache
def cases(corpus: str = "upstream-v0") -> tuple[dict[str, Any], ...]:
    """Every case of a corpus (``upstream-v0``, ``upstream-v0-zstd``), in file order."""
    with gzip.open(DATA / f"{corpus}.jsonl.gz", "rt", encoding="utf-8") as f:
        return tuple(json.loads(line) for line in f)


def case_bytes(case: dict[str, Any], field: str = "input_b64") -> bytes:
    """The decoded bytes of one base64 field of a case."""
    return base64.b64decode(case[field])


def case_id(case: dict[str, Any]) -> str:
    return f"{case['scenario']}/{case['case']}"


def complete_lines(case: dict[str, Any], field: str = "input_b64") -> list[bytes]:
    """The newline-terminated lines of a case's log (a torn final fragment is left out)."""
    lines = case_bytes(case, field).split(b"\n")
    return lines[:-1]


PACKED_ROW_TYPES = frozenset({"text-chunks", "reasoning-chunks", "tool-call-chunks"})
