"""One writer per session across processes: a second process that tries to write gets a
clear collision error instead of interleaving lines; readers never block; the OS releases the
lock when the owner dies."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from agent_session.persistence_jsonl import JsonlPersistence
from agent_session.persistence_jsonl.scan import scan_log
from agent_session.session import SessionCollisionError, register_event_type
from tests.forkserver import Child, run_cli, start_module

pytestmark = pytest.mark.process

REPO = Path(__file__).resolve().parents[1]
register_event_type("plugin/write")


def writer(root: str | Path, id: str, count: int, go: Path, *flags: str) -> Child:
    return start_module("tests.lock_child", str(root), id, str(count), str(go), *flags, stdin=None)


@pytest.mark.parametrize("round_", range(3))
def test_two_processes_appending_concurrently_never_splice(tmp_path: Path, round_: int) -> None:
    go = tmp_path / "go"
    first = writer(tmp_path / "root", "shared", 150, go)
    second = writer(tmp_path / "root", "shared", 150, go)
    go.touch()
    outputs = [p.communicate(timeout=120) for p in (first, second)]
    for process, (_, err) in zip((first, second), outputs, strict=True):
        assert process.returncode == 0, err
    acked = [
        int(line.split()[1])
        for out, _ in outputs
        for line in out.splitlines()
        if line.startswith("acked")
    ]
    refused = [
        line for out, _ in outputs for line in out.splitlines() if line.startswith("refused")
    ]
    data = (tmp_path / "root" / "_no-cwd" / "shared" / "session.jsonl").read_bytes()
    scanned = scan_log(data, "shared")
    seqs = [e["seq"] for e in scanned.events]
    assert seqs == list(range(len(seqs)))  # contiguous: nothing spliced or duplicated
    assert not scanned.torn
    assert sorted(acked) == seqs  # every acknowledged event, once
    pids = [e["data"]["pid"] for e in scanned.events]
    runs = [p for i, p in enumerate(pids) if i == 0 or pids[i - 1] != p]
    assert len(runs) == len(set(runs)) <= 2  # never interleaved: one run per writer
    if len(runs) == 2:  # the second writer started only after the first had finished
        assert pids.count(runs[0]) == 150
    assert refused or len(runs) == 2, "a writer that could not write must be told why"
    assert all(
        "another writer" in line or "already has a persisted log" in line or "seq mismatch" in line
        for line in refused
    )


async def test_readers_never_block_and_a_killed_owner_releases_the_lock(tmp_path: Path) -> None:
    go = tmp_path / "go"
    go.touch()
    holder = writer(tmp_path / "root", "held", 1, go, "--hold")
    assert holder.stdout is not None
    assert holder.stdout.readline().startswith("acked 0")
    assert holder.stdout.readline().strip() == "holding"
    reader = JsonlPersistence(tmp_path / "root")
    assert len((await reader.inspect("held")).events) == 1
    assert (await reader.read_raw("held")) is not None
    assert [h.id for h in await reader.list_headers()] == ["held"]
    verify = run_cli("verify", str(tmp_path / "root"), timeout=60)
    assert verify.returncode == 0, verify.stderr
    event = {
        "type": "plugin/write",
        "seq": 1,
        "time": 1,
        "data": {"pid": os.getpid(), "n": 1},
        "ignorable": True,
    }
    with pytest.raises(SessionCollisionError, match=rf"pid {holder.pid}\)"):
        await reader.append("held", [event])
    holder.send_signal(signal.SIGKILL)
    holder.wait(timeout=30)
    await reader.append("held", [event])  # the OS released the dead owner's lock
    assert [e.seq for e in await reader.read_from("held", 0)] == [0, 1]
    await reader.aclose()
    dead = writer(tmp_path / "root", "dies", 5, go, "--die")
    dead.wait(timeout=60)
    assert dead.returncode == -signal.SIGKILL
    after = JsonlPersistence(tmp_path / "root")
    loaded = await after.load("dies")
    assert [e.seq for e in loaded.events] == [0]
    await after.append("dies", [{**event, "seq": 1}])
    await after.aclose()


async def test_ls_reports_a_turn_held_by_a_live_writer_as_open(tmp_path: Path) -> None:
    root = tmp_path / "root"
    go = tmp_path / "go"
    go.touch()
    holder = writer(root, "busy", 1, go, "--hold", "--turn")
    assert holder.stdout is not None
    assert holder.stdout.readline().startswith("acked 0")
    assert holder.stdout.readline().strip() == "holding"

    def state() -> str:
        listed = run_cli("ls", str(root), "--json", timeout=60)
        assert listed.returncode == 0, listed.stderr
        return str(json.loads(listed.stdout)["state"])

    assert state() == "open"  # the writer is alive: its turn is still running
    holder.send_signal(signal.SIGKILL)
    holder.wait(timeout=30)
    assert state() == "interrupted"  # nobody holds it any more: it needs recovery


async def test_delete_is_refused_while_another_process_writes_the_session(
    tmp_path: Path,
) -> None:
    go = tmp_path / "go"
    go.touch()
    holder = writer(tmp_path / "root", "held", 1, go, "--hold")
    assert holder.stdout is not None
    assert holder.stdout.readline().startswith("acked 0")
    assert holder.stdout.readline().strip() == "holding"
    other = JsonlPersistence(tmp_path / "root")
    with pytest.raises(SessionCollisionError, match=rf"pid {holder.pid}\)"):
        await other.delete("held")
    assert len(await other.read_from("held", 0)) == 1  # nothing was removed
    holder.send_signal(signal.SIGKILL)
    holder.wait(timeout=30)
    await other.delete("held")  # the dead owner's lock is gone: now it can be deleted
    assert list((tmp_path / "root").rglob("*")) == [tmp_path / "root" / "_no-cwd"]
    await other.aclose()


_FORKS = """
import os, sys
from agent_session.persistence_jsonl import FileOps
ops = FileOps()
ops.lock(os.path.join(sys.argv[1], "parent.lock"))
child = os.fork()
if child == 0:
    ops.lock(os.path.join(sys.argv[1], "child.lock"), new=True)
    os._exit(0)
os.waitpid(child, 0)
print(os.getpid(), child)
"""


def test_a_forked_child_writes_its_own_pid_into_the_locks_it_takes(tmp_path: Path) -> None:
    """The pid a lock file holds (named in the next writer's collision error) is the taker's,
    also in a child forked after the parent took a lock."""
    done = subprocess.run(
        [sys.executable, "-c", _FORKS, str(tmp_path)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    parent, child = done.stdout.split()
    assert parent != child
    assert (tmp_path / "child.lock").read_text() == f"{child}\n"
    assert (tmp_path / "parent.lock").read_text() == f"{parent}\n"
