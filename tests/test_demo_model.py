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

from tests.fake_provider import ANSWER, serving

pytestmark = pytest.mark.process


def demo(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "ANTHROPIC_"))}
    return subprocess.run(
        [sys.executable, "-m", "agent_session", "demo", *args],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env={**clean, **(env or {})},
    )


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
    shown = subprocess.run(
        [sys.executable, "-m", "agent_session", "show", str(tmp_path / "s"), report["sessionId"]],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert shown.count(ANSWER) == 2  # turn 1, and the resumed turn


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
