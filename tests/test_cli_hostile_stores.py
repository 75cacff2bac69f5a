"""The command line on stores with planted or huge entries (the adversary's D4 and D5): every
session directory is reported, whatever sits where its log belongs; no command reads a
whole huge file into memory; one bad entry never hides or aborts the others."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent_session.persistence_jsonl.reader import DEFAULT_MAX_LOG_BYTES
from tests.stores import TURN, plant

pytestmark = pytest.mark.process


MEASURE = """
import resource, subprocess, sys
code = subprocess.run(sys.argv[1:]).returncode
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss // 1024, file=sys.stderr)
sys.exit(code)
"""


def run(*args: str) -> tuple[int, str, str, int]:
    """Run the CLI in a child of a measuring child (whose only child it is): its exit code,
    stdout, stderr and peak resident set in MiB."""
    script = shutil.which("agent-session", path=os.path.dirname(sys.executable))
    command = [script] if script else [sys.executable, "-m", "agent_session"]
    done = subprocess.run(
        [sys.executable, "-c", MEASURE, *command, *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    *err, rss = done.stderr.splitlines()
    return done.returncode, done.stdout, "\n".join(err), int(rss)


def session(root: Path, id: str, body: bytes = TURN) -> Path:
    return plant(root, id, body)


def test_verify_and_ls_report_every_planted_entry_and_exit_2(tmp_path: Path) -> None:
    root = tmp_path / "root"
    session(root, "good")
    fifo = root / "_no-cwd" / "fifo"
    fifo.mkdir()
    os.mkfifo(fifo / "session.jsonl")
    (root / "_no-cwd" / "dir" / "session.jsonl").mkdir(parents=True)
    (root / "_no-cwd" / "link").symlink_to(tmp_path)
    code, out, err, _ = run("verify", str(root))
    assert code == 2, (out, err)
    lines = dict(line.split(": ", 1) for line in out.splitlines()[:-1])
    assert lines["good"].startswith("balanced"), out
    for name, kind in (("fifo", "FIFO"), ("dir", "a directory"), ("link", "symbolic link")):
        assert lines[name].startswith("corrupt"), out
        assert kind in lines[name], out
    assert out.splitlines()[-1] == "verified 4 session(s): 1 balanced, 3 corrupt", out
    code, out, err, _ = run("ls", str(root), "--json")
    assert code == 2, err  # problem entries listed, and the exit says so
    listed = {json.loads(line)["id"]: json.loads(line)["flags"] for line in out.splitlines()}
    assert listed == {"good": [], "fifo": ["corrupt"], "dir": ["corrupt"], "link": ["corrupt"]}


def sparse(path: Path, size: int) -> None:
    with open(path, "r+b") as f:
        f.truncate(size)


def test_a_huge_sparse_log_is_refused_without_reading_it(tmp_path: Path) -> None:
    """A 2 GiB and a 40 GiB sparse log (a header and an open turn, then NULs): ls, verify and
    verify ID refuse them in bounded memory and report the healthy session beside them."""
    root = tmp_path / "root"
    session(root, "good")
    for name, size in (("two", 2 << 30), ("forty", 40 << 30)):
        directory = session(
            root, name, b'{"type":"turn/start","seq":0,"time":1,"data":{"turn":1}}\n'
        )
        sparse(directory / "session.jsonl", size)
    code, out, err, rss = run("verify", str(root))
    assert code == 2, (out, err)
    assert "good: balanced" in out, out
    for name in ("two", "forty"):
        assert f"{name}: unsupported" in out, out
        assert "max_log_bytes" in out, out
    assert rss < 300, f"verify peaked at {rss} MiB"
    code, out, err, rss = run("verify", str(root), "two")
    assert code == 2, (out, err)
    assert "more than max_log_bytes" in out, out
    code, out, err, rss = run("ls", str(root))
    assert code == 2, err
    assert "good" in out, out
    assert rss < 300, f"ls peaked at {rss} MiB"


def test_a_long_log_under_the_limit_is_listed_in_bounded_memory(tmp_path: Path) -> None:
    """ls streams a log: a 300 MB log of small events is summarised with memory far below
    its size."""
    root = tmp_path / "root"
    line = b'{"type":"turn/start","seq":%d,"time":1,"data":{"turn":%d}}\n'
    end = b'{"type":"turn/end","seq":%d,"time":1,"data":{"turn":%d,"reason":{"kind":"completed"},"pad":"%s"}}\n'
    pad = b"x" * 3000
    body = bytearray()
    seq = 0
    while len(body) < 300 * 1024 * 1024:
        turn = seq // 2 + 1
        body += line % (seq, turn) + end % (seq + 1, turn, pad)
        seq += 2
    session(root, "long", bytes(body))
    assert len(body) < DEFAULT_MAX_LOG_BYTES
    code, out, err, rss = run("ls", str(root), "--json")
    assert code == 0, err
    row = json.loads(out)
    assert row["events"] == seq
    assert row["state"] == "balanced"
    assert rss < 150, f"ls peaked at {rss} MiB for a {len(body) >> 20} MiB log"


def test_verify_names_why_a_foreign_version_is_unsupported(tmp_path: Path) -> None:
    """A newer harness's log with a torn tail: verify calls it unsupported (not torn), and
    says why."""
    root = tmp_path / "root"
    directory = root / "_no-cwd" / "v1"
    directory.mkdir(parents=True)
    header = b'{"type":"session","version":1,"id":"v1","createdAt":1,"delegationDepth":0}\n'
    (directory / "session.jsonl").write_bytes(header + TURN + b'{"torn')
    code, out, err, _ = run("verify", str(root))
    assert code == 2, (out, err)
    assert out.splitlines()[0].startswith("v1: unsupported — "), out
    assert "uses log format v1" in out, out


@contextlib.contextmanager
def live_writer(root: Path, id: str, go: Path) -> Iterator[None]:
    """A writer process that holds ``id`` with its first turn open until the block ends."""
    go.touch()
    holder = subprocess.Popen(
        [sys.executable, "-m", "tests.lock_child", str(root), id, "1", str(go), "--turn", "--hold"],
        cwd=Path(__file__).resolve().parents[1],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline().startswith("acked")
        assert holder.stdout.readline().strip() == "holding"
        yield
    finally:
        holder.kill()
        holder.wait()


def test_recover_skips_a_live_session_and_repairs_the_rest(tmp_path: Path) -> None:
    """The adversary's D14: a live writer holds b (its turn is open); a and c crashed.
    recover repairs a and c, skips b with a line, and ends with its summary."""
    root = tmp_path / "root"
    open_turn = b'{"type":"turn/start","seq":0,"time":1,"data":{"turn":1}}\n'
    for id in ("a", "c"):
        session(root, id, open_turn)
    with live_writer(root, "b", tmp_path / "go"):
        code, out, err, _ = run("recover", str(root))
    assert code == 0, (out, err)
    lines = out.splitlines()
    assert lines[0].startswith("a: repaired (interrupted)"), out
    assert lines[1].startswith("b: skipped (live)"), out
    assert lines[2].startswith("c: repaired (interrupted)"), out
    assert "1 skipped (live)" in lines[3], out


def test_a_session_with_a_live_writer_is_open_for_every_command(tmp_path: Path) -> None:
    """Its last turn is running, not interrupted: verify, show and ls all say open, and none
    tells the user to run recover."""
    root = tmp_path / "root"
    with live_writer(root, "b", tmp_path / "go"):
        verify = run("verify", str(root))
        show = run("show", str(root), "b")
        listing = run("ls", str(root), "--json")
    assert verify[0] == 0, verify
    assert verify[1].startswith("b: open — "), verify
    assert show[0] == 0, show
    assert "is open" in show[1], show
    assert "REPAIRED" not in show[1], show
    assert "recover" not in show[1], show
    assert json.loads(listing[1])["state"] == "open", listing


@pytest.mark.parametrize("command", ["ls", "verify"])
def test_a_fifo_named_as_the_store_is_refused_without_opening_it(
    tmp_path: Path, command: str
) -> None:
    """Telling a JSONL root from a SQLite file that lost its scheme must not open a FIFO
    (the open would wait for a writer forever)."""
    fifo = tmp_path / "store"
    os.mkfifo(fifo)
    done = subprocess.run(
        [sys.executable, "-m", "agent_session", command, str(fifo)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 4, done.stderr
    assert "is not a directory" in done.stderr


HOSTILE = "\x1b[2J\x1b]0;owned\x07\r\u202e\x9b31m"
"""What a terminal would act on: clear the screen, retitle the window, return the cursor,
reverse the line, and a C1 control sequence introducer."""


def test_no_content_of_a_store_reaches_a_terminal_as_a_control(tmp_path: Path) -> None:
    """A session whose id, user message and model answer hold terminal controls: every
    command a person reads (and every error) shows them as escapes; ``--json`` and
    ``export`` keep the exact values."""
    import asyncio

    from agent_session import (
        AgentRuntime,
        ScriptedModel,
        ScriptedStep,
        checkpoint_policy,
        open_store,
    )
    from tests.test_cli import cli

    id = f"evil{HOSTILE}"

    async def write() -> None:
        async with AgentRuntime() as runtime:
            runtime.install(open_store(str(tmp_path)))
            runtime.install(checkpoint_policy)
            runtime.models.register("m", ScriptedModel([ScriptedStep(text=[f"ok{HOSTILE}"])]))
            session = runtime.sessions.create(id)
            await runtime.agent(session, model="m/x").run_turn(f"hi{HOSTILE}")

    asyncio.run(write())
    store = str(tmp_path)
    outputs = [
        cli("ls", store).stdout,
        cli("verify", store).stdout,
        cli("show", store, id).stdout,
        cli("search", store, "ok").stdout,
        cli("stats", store, id).stdout,
        cli("show", store, f"nope{HOSTILE}", check_rc=None).stderr,
    ]
    for out in outputs:
        assert not any(c in out for c in "\x1b\x07\r\u202e\x9b"), out
    assert "evil\\x1b[2J" in outputs[0]
    header, row = outputs[0].splitlines()[:2]  # the columns stay aligned
    assert row.index(" -  ") == header.index("PARENT") - 1
    assert "ok\\x1b[2J\\x1b]0;owned\\x07\\x0d\\u202e\\x9b31m" in outputs[2]
    listed = json.loads(cli("ls", store, "--json").stdout.splitlines()[0])
    assert listed["id"] == id
    exported = json.loads(cli("export", store, id, "--format", "openai").stdout)
    assert exported["messages"][-1]["content"] == f"ok{HOSTILE}"
