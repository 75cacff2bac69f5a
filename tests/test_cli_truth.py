"""What the command line prints can be relied on by scripts and people (the newcomer's
findings 5, 6, 8, 9 and 10): JSON with the wire format's keys on every command, the header as
stored, quiet ends of pipes, flags anywhere, any terminal encoding, progress only on a
terminal, and a demo that says what really happened. Every command runs as a subprocess."""

from __future__ import annotations

import json
import os
import pty
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.forkserver import run_cli
from tests.stores import OPEN_TURN, plant
from tests.test_one_bad_entry import DROP_CAPS

pytestmark = pytest.mark.process

COMMAND = [sys.executable, "-m", "agent_session"]


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return run_cli(*args, env={**os.environ, **(env or {})})


def store(root: Path, ids: dict[str, bytes]) -> Path:
    for id, body in ids.items():
        plant(root, id, body)
    return root


def test_verify_recover_and_export_speak_json_with_camel_case_keys(tmp_path: Path) -> None:
    root = tmp_path / "s"
    done = run("demo", "--root", str(root), "--session-id", "d", "--no-recover")
    assert done.returncode == 0, done.stderr
    verify = run("verify", str(root), "--json")
    assert verify.returncode == 1
    assert [json.loads(line) for line in verify.stdout.splitlines()] == [
        {
            "id": "d",
            "state": "interrupted",
            "detail": "72 events; the last turn is open (3 closers needed)"
            "; settleable when the agent resumes: 1 of unknown outcome (settled by their tools' classes)",
        }
    ]
    recover = run("recover", str(root), "--json")
    assert recover.returncode == 0, recover.stderr
    (line,) = map(json.loads, recover.stdout.splitlines())
    assert line == {
        "id": "d",
        "action": "repaired",
        "state": "interrupted",
        "detail": "3 closer(s) appended",
    }
    again = json.loads(run("recover", str(root), "--json").stdout)
    assert (again["action"], again["state"]) == ("intact", "balanced")
    export = run("export", str(root), "d", "--format", "anthropic", "--json")
    assert export.returncode == 0, export.stderr
    assert len(export.stdout.splitlines()) == 1
    assert set(json.loads(export.stdout)) == {"system", "messages"}
    listed = json.loads(run("ls", str(root), "--json").stdout)
    assert "createdAt" in listed
    assert "created_at" not in listed


def test_show_json_prints_the_header_line_exactly_as_stored(tmp_path: Path) -> None:
    root = store(tmp_path, {"h": OPEN_TURN})
    log = root / "_no-cwd" / "h" / "session.jsonl"
    shown = run("show", str(root), "h", "--json")
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.splitlines()[0].encode() + b"\n" == log.read_bytes().splitlines(True)[0]


def test_a_closed_pipe_ends_the_command_quietly(tmp_path: Path) -> None:
    ids = {f"s{n:03}": b"" for n in range(300)}
    root = store(tmp_path, ids)
    reader = subprocess.Popen(
        [*COMMAND, "verify", str(root)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert reader.stdout is not None
    assert reader.stderr is not None
    assert reader.stdout.readline().startswith("s000: balanced")
    reader.stdout.close()  # what `| head -1` does
    assert reader.wait(timeout=120) == 141
    assert reader.stderr.read() == ""


def test_global_flags_work_after_the_subcommand(tmp_path: Path) -> None:
    missing = str(tmp_path / "nowhere")
    after = run("ls", missing, "--debug")
    assert after.returncode == 3  # --debug adds the traceback; the code is still the table's
    assert "Traceback" in after.stderr
    assert "NotFound" in after.stderr
    assert "Traceback" not in run("ls", missing).stderr


def test_a_latin1_terminal_gets_escapes_not_a_crash(tmp_path: Path) -> None:
    root = store(tmp_path, {"ok": b""})
    done = run("verify", str(root), env={"PYTHONIOENCODING": "latin-1"})
    assert done.returncode == 0, done.stderr
    assert "ok: balanced \\u2014 0 events" in done.stdout


def with_terminal_stderr(*args: str) -> tuple[int, str]:
    """Run a command whose stderr is a terminal (a pty); its exit code and what it drew."""
    controller, terminal = pty.openpty()
    child = subprocess.Popen(
        [*COMMAND, *args], stdout=subprocess.DEVNULL, stderr=terminal, stdin=subprocess.DEVNULL
    )
    os.close(terminal)
    drawn = b""
    while True:
        try:
            chunk = os.read(controller, 4096)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        drawn += chunk
    os.close(controller)
    return child.wait(timeout=120), drawn.decode()


def test_progress_is_drawn_on_a_terminal_and_nothing_extra_when_piped(tmp_path: Path) -> None:
    root = store(tmp_path, {f"s{n:02}": OPEN_TURN for n in range(40)})
    code, drawn = with_terminal_stderr("verify", str(root))
    assert code == 1
    assert "/40 verified" in drawn
    assert "[#" in drawn
    piped = run("verify", str(root))
    assert piped.stderr == ""
    code, drawn = with_terminal_stderr("recover", str(root))
    assert code == 0
    assert "40/40 recovered" in drawn
    assert run("recover", str(root)).stderr == ""


def test_demo_refuses_absurd_turns_and_an_empty_id(tmp_path: Path) -> None:
    for turns in ("0", "1001", "1000000000", "abc"):
        done = run("demo", "--root", str(tmp_path), "--turns", turns)
        assert done.returncode == 4, done.stderr
        assert "--turns" in done.stderr
    empty = run("demo", "--root", str(tmp_path), "--session-id", "")
    assert empty.returncode == 4
    assert "--session-id: must not be empty" in empty.stderr
    assert not (tmp_path / "_no-cwd").exists()
    a_file = tmp_path / "file"
    a_file.write_text("")
    not_a_root = run("demo", "--root", str(a_file))
    assert not_a_root.returncode == 4  # as for every other command
    assert not_a_root.stderr == (
        f'agent-session: error: store root "{a_file}" is not a directory\n'
    )


def test_demo_without_a_crash_claims_no_repair(tmp_path: Path) -> None:
    done = run("demo", "--root", str(tmp_path), "--crash", "none", "--session-id", "n")
    assert done.returncode == 0, done.stderr
    assert "Nothing to recover" in done.stdout
    assert "appended those closers" not in done.stdout
    assert "retry blindly" not in done.stdout
    assert 'read_file({"path":"notes-1-1.txt"})' in done.stdout  # a read has no content


def test_demo_prints_the_childs_real_error_in_one_line(tmp_path: Path) -> None:
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o555)
    command = [*COMMAND, "demo", "--root", str(locked / "store"), "--crash", "tool"]
    if os.geteuid() == 0:
        command = DROP_CAPS + command
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 5, done.stderr
    assert done.stderr.splitlines() == [
        "agent-session: error: the agent child failed (exit 1): PermissionError: [Errno 13] "
        f"Permission denied: '{locked / 'store'}'"
    ]


def test_ctrl_c_stops_the_demo_with_one_line(tmp_path: Path) -> None:
    controller, terminal = pty.openpty()
    demo = subprocess.Popen(
        [*COMMAND, "demo", "--root", str(tmp_path), "--session-id", "c", "--turns", "1000"],
        stdout=subprocess.PIPE,
        stderr=terminal,
        start_new_session=True,
    )
    os.close(terminal)
    drawn = b""
    # The progress line says the agent child is running and has completed (flushed) turns.
    while not any(int(n) >= 3 for n in re.findall(rb"(\d+)/1000 turns run", drawn)):
        try:
            chunk = os.read(controller, 4096)
        except OSError:  # EIO: the demo closed the terminal
            chunk = b""
        assert chunk, f"the demo ended without drawing its progress: {drawn!r}"
        drawn += chunk
    os.killpg(demo.pid, signal.SIGINT)  # what a terminal's Ctrl-C sends
    assert demo.wait(timeout=120) == 130
    with_rest = drawn
    while True:
        try:
            chunk = os.read(controller, 4096)
        except OSError:
            break
        if not chunk:
            break
        with_rest += chunk
    os.close(controller)
    text = with_rest.decode().replace("\x1b[K", "").replace("\r", "\n")
    said = [line for line in text.splitlines() if line and "turns run" not in line]
    assert said == [
        "agent-session: interrupted; the agent child was stopped and session 'c' is left as "
        f"it was (check it with: agent-session verify {tmp_path})"
    ]
    assert "Traceback" not in with_rest.decode()
    verify = run("verify", str(tmp_path), "c")
    assert verify.returncode in (0, 1), verify.stdout  # loadable: nothing acknowledged lost
    assert int(verify.stdout.split(" — ")[1].split()[0]) > 60  # three turns at least
