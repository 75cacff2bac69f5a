"""README blocks run as written: the event-log example is extracted and executed in a fresh
interpreter, so it cannot rot."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def test_the_event_log_example_runs_as_written(tmp_path: Path) -> None:
    text = README.read_text(encoding="utf-8")
    section = text.split("## The event log", 1)[1]
    block = re.search(r"```python\n(.*?)```", section, re.S)
    assert block is not None
    done = subprocess.run(
        [sys.executable, "-c", block.group(1)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    first, second = done.stdout.splitlines()
    assert first.startswith('{"type":"user/message","seq":1,')
    assert "'id': 'm1'" in second
