"""The command line speaks one vocabulary and helps where it can: every ``--help`` has an
example, ``ls`` filters, sorts and limits, a forgotten id is called one, and messages give
command-line advice."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from agent_session.cli.arguments import EXAMPLES
from tests.test_cli import cli, crashed_store

pytestmark = pytest.mark.process

COMMANDS = [
    "demo",
    "ls",
    "stats",
    "search",
    "view",
    "serve",
    "export-otel",
    "show",
    "verify",
    "recover",
    "approvals",
    "approve",
    "reject",
    "convert",
    "export",
    "import",
    "rm",
    "copy",
    "fork",
    "rewind",
    "replay",
    "diff",
    "archive",
    "budget",
    "label",
    "sign",
    "audit-key",
    "purge",
    "hold",
    "release",
    "erase",
]


def test_every_command_has_an_example_in_its_help() -> None:
    assert sorted(EXAMPLES) == sorted(COMMANDS)
    listed = cli("--help").stdout.split("  COMMAND\n")[1].split("\n\n")[0]
    assert [line.split()[0] for line in listed.splitlines()] == COMMANDS
    for command in COMMANDS:
        shown = cli(command, "--help").stdout
        assert f"Example:\n  {EXAMPLES[command]}\n" in shown, command
        assert EXAMPLES[command].split()[1] == command


def test_no_help_says_a_default_twice_and_copy_names_every_kind() -> None:
    demo = " ".join(cli("demo", "--help").stdout.split())
    assert demo.count("(default: $AGENT_SESSION_STORE") == 1
    assert "(default: $AGENT_SESSION_STORE, else ./agent-sessions)" in demo
    copy = " ".join(cli("copy", "--help").stdout.split())
    assert "a JSONL directory, a SQLite or a PostgreSQL database" in copy


def test_a_forgotten_id_is_called_a_missing_id(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = crashed_store(tmp_path / "store")
    monkeypatch.delenv("AGENT_SESSION_STORE", raising=False)
    done = cli("show", str(root), check_rc=4)
    assert f"missing session id: agent-session show {root} ID" in done.stderr
    assert "a store is required" not in done.stderr
    assert "a store is required" in cli("show", "nosuch", check_rc=4).stderr


def test_ls_filters_sorts_and_limits(tmp_path: Path) -> None:
    root = tmp_path / "store"
    crashed_store(root, "none", "b-done")
    crashed_store(root, "tool", "a-crashed")
    later = time.time() + 60  # a later write, as a fact on disk rather than a wait
    log = root / "_no-cwd" / "b-done" / "session.jsonl"
    os.utime(log, (later, later))
    rows = [
        json.loads(line)
        for line in cli("ls", str(root), "--json", "--sort", "updated").stdout.splitlines()
    ]
    assert [row["id"] for row in rows] == ["b-done", "a-crashed"]
    assert rows[0]["updatedAt"] == int(later * 1000)
    by_id = cli("ls", str(root), "--json", "--sort", "id", "--limit", "1").stdout.splitlines()
    assert [json.loads(line)["id"] for line in by_id] == ["a-crashed"]
    crashed = cli("ls", str(root), "--state", "interrupted").stdout.splitlines()
    assert crashed[0].split()[:9] == [
        "ID",
        "PARENT",
        "CWD",
        "CREATED",
        "(UTC)",
        "UPDATED",
        "(UTC)",
        "EVENTS",
        "STATE",
    ]
    assert [line.split()[0] for line in crashed[1:]] == ["a-crashed"]
    assert crashed[1].split()[8:10] == ["interrupted", "jsonl"]
    assert cli("ls", str(root), "--state", "open").stdout == "no sessions\n"
    assert "must be at least 1" in cli("ls", str(root), "--limit", "0", check_rc=4).stderr


def test_copy_onto_an_existing_id_gives_command_line_words(tmp_path: Path) -> None:
    source = crashed_store(tmp_path / "a", "none", "s")
    target = f"sqlite:///{tmp_path}/b.db"
    cli("copy", str(source), target)
    again = cli("copy", str(source), target, "--json", check_rc=2)
    (line,) = [json.loads(x) for x in again.stdout.splitlines()]
    assert line == {
        "id": "s",
        "action": "exists",
        "detail": f"already in {target}; left alone there",
    }
    assert "load/resume" not in again.stdout + again.stderr


def test_ls_and_verify_say_what_resuming_could_settle(tmp_path: Path) -> None:
    root = tmp_path / "store"
    crashed_store(root, "tool", "in-tool")  # a recorded call, outcome unknown
    crashed_store(root, "midstream", "mid")  # no call: nothing to settle
    rows = {
        row["id"]: row
        for row in map(json.loads, cli("ls", str(root), "--json").stdout.splitlines())
    }
    assert rows["in-tool"]["flags"] == ["settleable"]
    assert rows["mid"]["flags"] == []
    verified = cli("verify", str(root), check_rc=1).stdout
    assert (
        "in-tool: interrupted — 72 events; the last turn is open (3 closers needed); settleable "
        "when the agent resumes: 1 of unknown outcome (settled by their tools' classes)"
    ) in verified
    assert "settleable" not in verified.split("mid: ")[1].splitlines()[0]
    assert "runs no tools" in " ".join(cli("recover", "--help").stdout.split())
