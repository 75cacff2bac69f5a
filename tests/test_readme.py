"""Every ``python`` block of the README and of ``docs/`` runs as written, in a fresh
interpreter and an empty directory, and prints what its comments say: the examples cannot
rot; and every link between the pages leads to a page that exists."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.process

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
PAGES = [
    README,
    *(
        ROOT / "docs" / name
        for name in (
            "architecture.md",
            "event-log.md",
            "stores.md",
            "agents.md",
            "integrations.md",
            "reliability.md",
            "cli.md",
            "performance.md",
            "development.md",
        )
    ),
]
"""The front page, then the pages of ``docs/`` in the order it lists them."""


def blocks() -> dict[str, str]:
    """Each python block, by the heading of the section it is in."""
    found: dict[str, str] = {}
    heading = ""
    text = "\n".join(page.read_text(encoding="utf-8") for page in PAGES)
    for part in re.split(r"(?m)^(#+ .*)$", text):
        if part.startswith("#"):
            heading = part.lstrip("# ").strip()
            continue
        for number, block in enumerate(re.findall(r"```python\n(.*?)```", part, re.S)):
            found[f"{heading} #{number + 1}"] = block
    return found


def run(block: str, cwd: Path) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-c", block],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""  # no warning either (an unflushed append would be named)
    return done.stdout.splitlines()


def test_the_readme_has_the_blocks_these_tests_know() -> None:
    assert list(blocks()) == [
        "The event log #1",
        "Persistence #1",
        "The JSONL backend #1",
        "The SQLite backend #1",
        "Agents: the model and tool seams, the loop, the checkpoint policy #1",
        "Use it from the OpenAI Agents SDK #1",
    ]


def test_the_event_log_example(tmp_path: Path) -> None:
    first, second = run(blocks()["The event log #1"], tmp_path)
    assert first.startswith('{"type":"user/message","seq":1,')
    assert "'id': 'm1'" in second


def test_the_persistence_example(tmp_path: Path) -> None:
    assert run(blocks()["Persistence #1"], tmp_path) == [
        "['turn/start', 'user/message', 'turn/end', 'session/end-seed']"
    ]


def test_the_jsonl_example_creates_then_resumes(tmp_path: Path) -> None:
    block = blocks()["The JSONL backend #1"]
    assert run(block, tmp_path) == ["chat-3 has 3 events"]
    assert run(block, tmp_path) == ["chat-3 has 7 events"]  # 3 stored, end-seed, 3 new
    assert (tmp_path / "agent-sessions" / "_no-cwd" / "chat-3" / "session.jsonl").is_file()


def test_the_sqlite_example_creates_then_resumes(tmp_path: Path) -> None:
    block = blocks()["The SQLite backend #1"]
    assert run(block, tmp_path) == ["chat-4 has 3 events"]
    assert run(block, tmp_path) == ["chat-4 has 7 events"]
    assert (tmp_path / "sessions.db").read_bytes().startswith(b"SQLite format 3\0")


def test_the_agent_example(tmp_path: Path) -> None:
    (line,) = run(
        blocks()["Agents: the model and tool seams, the loop, the checkpoint policy #1"], tmp_path
    )
    assert line == (
        "{'kind': 'completed'} [{'to': 'ada@example.com', 'subject': 'Your invoice', "
        "'idempotency_key': 'call-1'}]"
    )


def test_the_openai_agents_example_runs_and_resumes(tmp_path: Path) -> None:
    block = blocks()["Use it from the OpenAI Agents SDK #1"]
    assert run(block, tmp_path) == ["Sent. 4"]
    assert run(block, tmp_path) == ["Sent. 8"]  # the same session, one more run
    log = tmp_path / "agent-sessions" / "_no-cwd" / "support-1" / "session.jsonl"
    assert log.read_text().count('"type":"tool/call"') == 2


def test_every_page_is_listed_and_every_link_between_pages_resolves() -> None:
    assert sorted((ROOT / "docs").glob("*.md")) == sorted(PAGES[1:])
    for page in PAGES:
        for target in re.findall(r"\]\(([^)#:]+\.md)(?:#[^)]*)?\)", page.read_text()):
            assert (page.parent / target).is_file(), f"{page.name} links to {target}"
