"""The ``agent-session`` console script, run as a real subprocess."""

from __future__ import annotations

import shutil
import subprocess
import sys

import orjson

from session import SessionEvent, __version__


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    script = shutil.which("agent-session")
    command = [script] if script else [sys.executable, "-m", "agent_session.cli"]
    return subprocess.run(
        [*command, *args], capture_output=True, text=True, timeout=60, check=False
    )


def test_version_and_help() -> None:
    version = _run("--version")
    assert version.returncode == 0
    assert version.stdout.strip() == f"agent-session {__version__}"
    help_text = _run("--help")
    assert help_text.returncode == 0
    assert "demo" in help_text.stdout
    assert _run("demo", "--help").returncode == 0


def test_demo_prints_a_valid_balanced_log() -> None:
    result = _run("demo")
    assert result.returncode == 0, result.stderr
    lines = [line for line in result.stdout.splitlines() if line.startswith("{")]
    events = [SessionEvent.decode(line) for line in lines]
    assert [e.seq for e in events] == list(range(len(events)))
    assert events[0].type == "turn/start"
    assert events[-1].type == "turn/end"
    assert orjson.loads(lines[-1])["data"]["reason"] == {"kind": "completed"}
    assert "roles ['user', 'assistant', 'user']" in result.stdout


def test_unknown_command_is_a_usage_error() -> None:
    result = _run("frobnicate")
    assert result.returncode == 2
    assert "invalid choice" in result.stderr
