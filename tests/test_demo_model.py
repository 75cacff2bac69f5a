"""``agent-session demo --model PROVIDER/NAME`` on a real adapter (its SDK pointed at a stand-in
provider on 127.0.0.1: no network): the crash, recovery and resumed turn; and what it says
when a key, an extra or a provider is missing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from agent_session.providers.standin import ANSWER, serving
from tests.forkserver import run_cli

pytestmark = pytest.mark.process


def demo(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "ANTHROPIC_"))}
    return run_cli("demo", *args, env={**clean, **(env or {})})


@pytest.mark.parametrize("model", ["openai/stand-in", "openai-chat/stand-in", "anthropic/stand-in"])
def test_a_real_model_is_killed_at_its_request_recovered_and_resumed(
    tmp_path: Path, model: str
) -> None:
    with serving() as provider:
        done = demo(
            "--store",
            str(tmp_path / "s"),
            "--model",
            model,
            "--crash",
            "request",
            "--json",
            env=provider,
        )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.splitlines()[-1])
    assert report["killed"] is True
    assert report["resumedReason"] == {"kind": "completed"}
    assert [c["type"] for c in report["closers"]] == ["step/end", "turn/end"]
    shown = run_cli("show", str(tmp_path / "s"), report["sessionId"])
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.count(ANSWER) == 2  # turn 1, and the resumed turn


def test_a_failpoint_the_model_never_reaches_is_said(tmp_path: Path) -> None:
    with serving() as provider:
        done = demo(
            "--store",
            str(tmp_path / "s"),
            "--model",
            "openai/stand-in",
            "--crash",
            "tool",
            env=provider,
        )
    assert done.returncode == 4
    assert "never reached the 'tool' failpoint" in done.stderr
    assert "--crash request" in done.stderr


@pytest.mark.parametrize(
    ("model", "said"),
    [
        ("openai/gpt-5-mini", "OPENAI_API_KEY"),
        ("anthropic/claude-sonnet-4-5", "ANTHROPIC_API_KEY"),
        ("gemini/pro", 'unknown provider "gemini"'),
        ("gpt-5", 'must be "provider/name"'),
    ],
)
def test_what_is_missing_is_said_before_anything_runs(
    tmp_path: Path, model: str, said: str
) -> None:
    done = demo("--store", str(tmp_path / "s"), "--model", model)
    assert done.returncode == 4
    assert said in done.stderr
    assert not (tmp_path / "s").exists()


@pytest.mark.parametrize("model", ["openai/stand-in", "openai-chat/stand-in", "anthropic/stand-in"])
def test_the_stand_in_command_serves_a_tool_call_the_demo_is_killed_in_and_resumes(
    tmp_path: Path, model: str
) -> None:
    """What the agents page tells a user to run: the stand-in as a command, its printed
    environment, and the crash demo on a real adapter killed inside ``write_file``."""
    arguments = json.dumps({"path": "notes.txt", "content": "hi"})
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "agent_session.providers.standin",
            "--call",
            "write_file",
            "--arguments",
            arguments,
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stdout is not None
        lines = [server.stdout.readline() for _ in range(5)]
        assert lines[-1] == "# serving; Ctrl-C stops\n"
        env = dict(line.removeprefix("export ").strip().split("=", 1) for line in lines[:4])
        assert sorted(env) == sorted(
            ["OPENAI_BASE_URL", "OPENAI_API_KEY", "ANTHROPIC_BASE_URL", "ANTHROPIC_API_KEY"]
        )
        done = demo("--store", str(tmp_path / "s"), "--model", model, "--crash", "tool", env=env)
    finally:
        server.terminate()
        server.wait(timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "write_file" in done.stdout
    assert "interrupted (closed by crash repair)" in done.stdout
    assert done.stdout.count(ANSWER) >= 1
