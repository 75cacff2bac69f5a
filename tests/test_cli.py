"""The ``agent-session`` command line, run as real subprocesses against stores made by the
real stack (including real crashes)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import pytest
from pydantic import BaseModel, ConfigDict

from agent_session.session import __version__
from tests.forkserver import run_cli

pytestmark = pytest.mark.process

COMMANDS = ["demo", "ls", "show", "verify", "recover", "export", "convert", "rm", "copy"]


def cli(
    *args: str, check_rc: int | None = 0, env: Mapping[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``agent-session *args``, a real process forked from an interpreter that imported the
    library already (the console script itself is run by the tests of the script and of the
    wheel); ``env``: variables set for it."""
    result = run_cli(*args, env=env)
    if check_rc is not None:
        assert result.returncode == check_rc, (result.stdout, result.stderr)
    return result


def crashed_store(root: Path, mode: str = "tool", session: str = "s1") -> Path:
    cli("demo", "--root", str(root), "--crash", mode, "--session-id", session, "--no-recover")
    return root


def snapshot_files(root: Path) -> dict[str, tuple[bytes, int]]:
    out = {}
    for directory, _, files in os.walk(root):
        for name in files:
            path = Path(directory, name)
            out[str(path)] = (path.read_bytes(), path.stat().st_mtime_ns)
    return out


@pytest.mark.parametrize("how", ["console-script", "python-dash-m"])
def test_a_cold_interpreter_runs_the_command_line(how: str) -> None:
    """The installed ``agent-session`` script and ``python -m agent_session``, each in an
    interpreter of its own (the other tests fork theirs from one that imported the library)."""
    script = shutil.which("agent-session", path=os.path.dirname(sys.executable))
    assert script is not None, "the console script is not installed beside this interpreter"
    command = [script] if how == "console-script" else [sys.executable, "-m", "agent_session"]
    done = subprocess.run(
        [*command, "ls", "--help"], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage: agent-session ls ")


def test_version_and_help_on_every_command() -> None:
    assert cli("--version").stdout.strip() == f"agent-session {__version__}"
    top = cli("--help").stdout
    for command in COMMANDS:
        assert command in top
        assert "usage: agent-session " + command in cli(command, "--help").stdout


def test_demo_crash_verify_recover_verify(tmp_path: Path) -> None:
    root = crashed_store(tmp_path / "store")
    before = snapshot_files(root)
    verify = cli("verify", str(root), check_rc=1)
    assert "s1: interrupted" in verify.stdout
    assert snapshot_files(root) == before  # verify never writes (bytes and mtimes)
    recover = cli("recover", str(root))
    assert "s1: repaired (interrupted): 3 closer(s) appended" in recover.stdout
    again = cli("recover", str(root))
    assert again.stdout.strip() == (
        "0 repaired, 1 healthy, 0 skipped (live), 0 not repaired (left untouched)"
    )
    assert "s1: balanced" in cli("verify", str(root)).stdout


@pytest.mark.parametrize("mode", ["none", "request", "tool", "parallel-tool", "midstream"])
def test_demo_tells_the_story_and_resumes(tmp_path: Path, mode: str) -> None:
    result = cli(
        "demo", "--root", str(tmp_path / "store"), "--crash", mode, "--session-id", "d", "--json"
    )
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["killed"] is (mode != "none")
    assert report["resumedReason"] == {"kind": "completed"}
    assert {"sessionId", "durableEvents", "storedEvents", "tornTail"} <= report.keys()
    if mode in ("tool", "parallel-tool"):
        codes = [
            c["data"]["error"]["code"] for c in report["closers"] if c["type"] == "tool/result"
        ]
        assert codes == ["TOOL_OUTCOME_UNKNOWN"]
    text = cli("demo", "--root", str(tmp_path / "other"), "--crash", mode).stdout
    assert "Transcript:" in text
    if mode != "none":
        assert "killed with SIGKILL" in text
    if mode in ("tool", "parallel-tool"):
        assert "[REPAIRED: TOOL_OUTCOME_UNKNOWN]" in text
    assert cli("verify", str(tmp_path / "store")).returncode == 0


def test_ls_rows_flags_and_json(tmp_path: Path) -> None:
    root = crashed_store(tmp_path / "store")
    crashed_store(root, "none", "clean")
    (root / "_no-cwd" / "junk").mkdir()
    (root / "_no-cwd" / "junk" / "session.jsonl").write_text("not a header\n")
    future = root / "_no-cwd" / "future"
    future.mkdir()
    future.joinpath("session.jsonl").write_text(
        '{"type":"session","version":9,"id":"future","createdAt":1,"delegationDepth":0}\n'
    )
    log = root / "_no-cwd" / "clean" / "session.jsonl"
    with open(log, "ab") as f:
        f.write(b'{"type":"turn/sta')  # a torn tail
    # Problem entries are listed after the table with their reason, and exit 2.
    listing, problems = cli("ls", str(root), check_rc=2).stdout.split("\n\n")
    table = listing.splitlines()
    assert problems.splitlines()[0] == "2 problem entries:"
    assert "junk: corrupt — corrupt session log" in problems
    assert "future: unsupported — " in problems
    assert table[0].split()[:3] == ["ID", "PARENT", "CWD"]
    rows = {line.split()[0]: line for line in table[1:]}
    assert "interrupted" in rows["s1"]
    assert rows["clean"].split()[8:10] == ["torn", "tail"]  # the state, as verify words it
    assert "corrupt" in rows["junk"]
    assert "unsupported" in rows["future"]
    lines = [json.loads(x) for x in cli("ls", str(root), "--json", check_rc=2).stdout.splitlines()]
    by_id = {row["id"]: row for row in lines}
    assert set(by_id["s1"]) == {
        "id",
        "cwd",
        "createdAt",
        "updatedAt",
        "events",
        "state",
        "size",
        "path",
        "flags",
        "problem",
        "backend",
        "compression",
        "turns",
        "parentSession",
        "seedLength",
        "origin",
        "delegationDepth",
    }  # camelCase, as the wire format
    assert (by_id["s1"]["origin"], by_id["s1"]["delegationDepth"]) == (None, 0)
    assert by_id["s1"]["state"] == "interrupted"
    assert by_id["s1"]["turns"] == 2  # the demo's two turns, the second killed
    assert (by_id["s1"]["backend"], by_id["s1"]["compression"]) == ("jsonl", "none")
    assert by_id["junk"]["state"] == "corrupt"
    assert by_id["clean"]["state"] == "torn tail"
    assert by_id["s1"]["updatedAt"] >= by_id["s1"]["createdAt"]
    assert by_id["clean"]["flags"] == ["torn tail"]
    assert by_id["s1"]["events"] > 20
    verify = cli("verify", str(root), check_rc=2)
    assert "junk: corrupt" in verify.stdout
    assert "future: unsupported" in verify.stdout
    assert "clean: torn tail" in verify.stdout


def test_show_transcript_events_and_json(tmp_path: Path) -> None:
    root = crashed_store(tmp_path / "store")
    text = cli("show", str(root), "s1").stdout
    assert "[REPAIRED, in memory only: TOOL_OUTCOME_UNKNOWN]" in text
    assert "write_file(" in text
    assert "is interrupted: the closers above are not on disk yet" in text
    cli("recover", str(root))
    assert "[REPAIRED: TOOL_OUTCOME_UNKNOWN]" in cli("show", str(root), "s1").stdout
    events = [json.loads(x) for x in cli("show", str(root), "s1", "--events").stdout.splitlines()]
    assert [e["seq"] for e in events] == list(range(len(events)))
    lines = cli("show", str(root), "s1", "--json").stdout.splitlines()
    assert json.loads(lines[0])["id"] == "s1"
    assert [json.loads(x) for x in lines[1:]] == events


def test_user_errors_are_one_line_without_traceback(tmp_path: Path) -> None:
    missing = cli("ls", str(tmp_path / "nope"), check_rc=3)
    assert (
        missing.stderr.strip() == f'agent-session: error: store root "{tmp_path / "nope"}" '
        "does not exist"
    )
    root = crashed_store(tmp_path / "store")
    unknown = cli("show", str(root), "ghost", check_rc=3)
    assert unknown.stderr.startswith('agent-session: error: no session "ghost"')
    assert "Traceback" not in unknown.stderr
    log = root / "_no-cwd" / "s1" / "session.jsonl"
    lines = log.read_bytes().splitlines(keepends=True)
    lines[5] = b"{damaged\n"
    lines.append(
        b'{"type":"turn/end","seq":999,"time":1,"data":{"turn":9,"reason":{"kind":"completed"}}}\n'
    )
    log.write_bytes(b"".join(lines))
    corrupt = cli("show", str(root), "s1", check_rc=2)
    # Line numbers count as an editor does, the header being line 1: lines[5] is line 6.
    assert "unparsable committed event at line 6" in corrupt.stderr
    assert "Traceback" not in corrupt.stderr
    assert "Traceback" in cli("--debug", "show", str(root), "s1", check_rc=None).stderr
    assert cli("frobnicate", check_rc=4).stderr.count("invalid choice") == 1


# --- export ------------------------------------------------------------------------------------


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class OpenAIFunction(Strict):
    name: str
    arguments: str


class OpenAIToolCall(Strict):
    id: str
    type: Literal["function"]
    function: OpenAIFunction


class OpenAIMessage(Strict):
    role: Literal["system", "user", "assistant", "tool"]
    content: str | None
    tool_calls: list[OpenAIToolCall] | None = None
    tool_call_id: str | None = None


def check_openai(messages: list[dict[str, Any]]) -> None:
    """The Chat Completions rules: typed messages; every assistant tool call answered by
    exactly one following tool message before any other message."""
    open_calls: set[str] = set()
    for raw in messages:
        message = OpenAIMessage.model_validate(raw)
        if message.role == "tool":
            assert message.tool_call_id in open_calls, raw
            open_calls.discard(message.tool_call_id)
            continue
        assert not open_calls, f"unanswered tool calls {open_calls}"
        assert message.tool_call_id is None
        if message.role == "assistant":
            open_calls = {c.id for c in message.tool_calls or []}
        else:
            assert message.content is not None
    assert not open_calls


class AnthropicBlock(Strict):
    type: Literal["text", "tool_use", "tool_result"]
    text: str | None = None
    id: str | None = None
    name: str | None = None
    input: dict[str, Any] | None = None
    tool_use_id: str | None = None
    content: list[dict[str, str]] | None = None
    is_error: bool | None = None


class AnthropicMessage(Strict):
    role: Literal["user", "assistant"]
    content: list[AnthropicBlock]


class AnthropicRequest(Strict):
    system: str | None = None
    messages: list[AnthropicMessage]


def check_anthropic(raw: dict[str, Any]) -> None:
    """The Messages API rules: alternating roles starting with user; non-empty text; every
    tool_use answered by a tool_result in the next user message, results first."""
    request = AnthropicRequest.model_validate(raw)
    previous_uses: set[str] = set()
    for index, message in enumerate(request.messages):
        assert message.role == ("user" if index % 2 == 0 else "assistant")
        for block in message.content:
            if block.type == "text":
                assert block.text
        if message.role == "user":
            results = [b.tool_use_id for b in message.content if b.type == "tool_result"]
            assert set(results) == previous_uses
            kinds = [b.type for b in message.content]
            assert kinds == sorted(kinds, key=lambda k: k != "tool_result")
            previous_uses = set()
        else:
            previous_uses = {b.id for b in message.content if b.type == "tool_use"}  # type: ignore[misc]
    assert not previous_uses


@pytest.mark.parametrize("mode", ["tool", "parallel-tool", "request"])
def test_export_of_a_crashed_session_is_a_valid_provider_request(tmp_path: Path, mode: str) -> None:
    root = crashed_store(tmp_path / "store", mode)
    openai = cli("export", str(root), "s1", "--format", "openai")
    assert "exporting it with its in-memory repair" in openai.stderr
    check_openai(json.loads(openai.stdout)["messages"])
    cli("recover", str(root))
    anthropic = cli("export", str(root), "s1", "--format", "anthropic")
    assert anthropic.stderr == ""
    exported = json.loads(anthropic.stdout)
    check_anthropic(exported)
    assert exported["system"].startswith("You are an AI agent")


async def test_export_refuses_an_unpaired_history(tmp_path: Path) -> None:
    """A balanced log can still hold an unanswered call (a tool scheduler failure closes the
    turn without inventing results); export refuses it rather than emit a bad request."""
    from agent_session.persistence_jsonl import JsonlPersistence
    from agent_session.session import Session
    from tests.builders import assistant, user

    session = Session.create("s1")
    session.append("turn/start", {"turn": 1})
    session.append("step/start", {"turn": 1, "step": 1})
    session.append("user/message", user(), surface_op="append")
    session.append(
        "assistant/message",
        {"turn": 1, "step": 1, "message": assistant(calls=("call-1-1",))},
        surface_op="append",
        source_event_seqs=[],
    )
    session.append(
        "tool/call",
        {"turn": 1, "step": 1, "callId": "call-1-1", "name": "read_file", "arguments": "{}"},
    )
    session.append("step/end", {"turn": 1, "step": 1})
    session.append(
        "turn/end",
        {
            "turn": 1,
            "reason": {
                "kind": "error",
                "error": {"message": "scheduler exploded", "code": "UNKNOWN"},
            },
        },
    )
    backend = JsonlPersistence(tmp_path)
    await backend.create(session.header)
    await backend.append("s1", session.events)
    await backend.aclose()
    result = cli("export", str(tmp_path), "s1", "--format", "openai", check_rc=2)
    assert "call-1-1 has 0 results" in result.stderr
    assert result.stdout == ""


def test_exit_codes_follow_one_table(tmp_path: Path) -> None:
    """0 healthy, 1 needs recovery, 2 corrupt, 3 not found, 4 usage, 5 I/O (agent_session.cli.exits),
    the same for every command; a mistyped id is not found, never corrupt."""
    root = crashed_store(tmp_path / "store")
    assert cli("verify", str(root), check_rc=1).stdout.startswith("s1: interrupted")
    assert cli("verify", str(root), "ghost", check_rc=3).stdout.startswith("ghost: not found")
    cli("show", str(root), "ghost", check_rc=3)
    cli("export", str(root), "ghost", "--format", "openai", check_rc=3)
    cli("recover", str(root), "ghost", check_rc=3)
    cli("verify", check_rc=4)  # a missing argument
    cli("ls", str(root), "--frobnicate", check_rc=4)
    unreadable = tmp_path / "file-as-root"
    unreadable.write_text("x")
    cli("ls", str(unreadable), check_rc=4)  # a file named as the root: a usage error
    cli("recover", str(root))
    cli("verify", str(root), check_rc=0)
