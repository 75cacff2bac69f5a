"""A newcomer's agent (``tests/newcomer_agent.py``, written from the README's five steps and
importing only ``agent_session``) is SIGKILLed inside its tool body, then resumed and
continued, on a JSONL directory and on a SQLite file; step 5's commands judge the store."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.test_cli import cli

pytestmark = pytest.mark.process

AGENT = Path(__file__).with_name("newcomer_agent.py")


def agent(store: str, outside: Path, *, die: bool) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "DIE_IN_TOOL"}
    if die:
        env["DIE_IN_TOOL"] = "1"
    return subprocess.run(
        [sys.executable, str(AGENT), store, str(outside)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        check=False,
    )


@pytest.mark.parametrize("kind", ["jsonl", "sqlite"])
def test_the_readme_recipe_survives_a_kill_inside_a_tool_body(tmp_path: Path, kind: str) -> None:
    store = str(tmp_path / "sessions") if kind == "jsonl" else f"sqlite:///{tmp_path}/s.db"
    outside = tmp_path / "outbox.txt"
    killed = agent(store, outside, die=True)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert outside.read_text() == "call-1 ada@example.com\n"  # the effect happened
    checked = cli("verify", store, check_rc=1)
    assert "chat-1: interrupted" in checked.stdout

    resumed = agent(store, outside, die=False)
    assert resumed.returncode == 0, resumed.stderr
    assert resumed.stdout.splitlines() == [
        "interrupted turn 1: unknown ['call-1']",
        "{'kind': 'completed'}",
    ]
    # sent again under the same key, which the outside world deduplicates on
    assert set(outside.read_text().splitlines()) == {"call-1 ada@example.com"}
    assert "chat-1: balanced" in cli("verify", store).stdout
    shown = cli("show", store, "chat-1").stdout
    assert "tool call-1 [REPAIRED: TOOL_OUTCOME_UNKNOWN]" in shown
    assert "tool call-1 [SETTLED: re-run]" in shown
    assert "assistant: Sent.\n── end of turn 2: completed ──" in shown
