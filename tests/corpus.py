"""Access to the conformance corpus written by the TypeScript reference stack.

``tests/data/upstream-v0.jsonl.gz`` is ``conformance/upstream-v0.jsonl`` (see
``tests/data/upstream-v0.README.md``) compressed; each line is one case.
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
def cases() -> tuple[dict[str, Any], ...]:
    """Every corpus case, in file order."""
    with gzip.open(DATA / "upstream-v0.jsonl.gz", "rt", encoding="utf-8") as f:
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
