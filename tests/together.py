"""Child processes let go at the same instant: each prints ``ready`` once it is about to do
what the test races (it waits for a line on stdin), and all are told ``go`` together."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from tests.forkserver import Child, start_module

__all__ = ["let_go_together", "started"]

ROOT = Path(__file__).resolve().parent.parent


def started(module: str, *args: str) -> Child:
    """``python -m module args...`` in the project's root, with stdin, stdout and stderr
    pipes (forked from the fork server)."""
    return start_module(module, *args)


def let_go_together(module: str, *args: str, count: int = 2) -> list[dict[str, Any]]:
    """Start ``count`` children, wait until every one said ``ready``, let them go at once,
    and return each one's last line as JSON (each must exit 0)."""
    children = [started(module, *args) for _ in range(count)]
    for child in children:
        assert child.stdout is not None
        assert child.stdout.readline() == "ready\n"
    for child in children:
        assert child.stdin is not None
        child.stdin.write("go\n")
        child.stdin.flush()
    answers = []
    for child in children:
        out, err = child.communicate(timeout=120)
        assert child.returncode == 0, err
        answers.append(json.loads(out.strip().splitlines()[-1]))
    return answers


def wait_for_go() -> None:
    """In a child started with ``--barrier``: say ``ready`` and wait to be let go."""
    if "--barrier" in sys.argv:
        print("ready", flush=True)
        sys.stdin.readline()
