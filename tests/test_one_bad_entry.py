"""One bad entry in a store affects only itself (the newcomer's finding 2): a stray flat
``*.jsonl`` file, a compressed log, a copied session directory and a session directory this
process cannot read are each refused for their own id, or listed with their reason, while
every other session loads, is created, listed, verified, shown, exported and recovered."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from agent_session.persistence_jsonl import JsonlPersistence
from agent_session.persistence_jsonl.fileio import FileOps, Stat
from agent_session.session import Runtime, SessionFormatUnsupportedError
from tests.forkserver import run_cli
from tests.stores import HEADER, OPEN_TURN, plant

DROP_CAPS = [
    "setpriv",
    "--inh-caps=-dac_override,-dac_read_search",
    "--bounding-set=-dac_override,-dac_read_search",
]
"""Root ignores file modes; without these capabilities it meets them like any user."""


class Denied(FileOps):
    """The I/O seam refusing to enter one directory, as the kernel does for a directory
    without search permission (EACCES on anything beneath it)."""

    def __init__(self, denied: Path) -> None:
        super().__init__()
        self.denied = str(denied) + os.sep

    def _check(self, path: str) -> None:
        if path.startswith(self.denied):
            raise PermissionError(13, "Permission denied", path)

    def stat(self, path: str, *, follow: bool = False) -> Stat | None:
        self._check(path)
        return super().stat(path, follow=follow)

    def read_prefix(self, path: str, size: int) -> bytes | None:
        self._check(path)
        return super().read_prefix(path, size)


async def new_session(backend: JsonlPersistence, id: str) -> None:
    runtime = Runtime()
    runtime.install(backend)
    session = runtime.sessions.create(id)
    session.append("turn/start", {"turn": 1})
    session.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    await runtime.sessions.flush(session)


def test_foreign_and_unreadable_entries_affect_only_their_own_id(tmp_path: Path) -> None:
    root = tmp_path / "store"
    plant(root, "good")
    (root / "_no-cwd" / "export.jsonl").write_bytes(HEADER % b"export")
    plant(root, "twice")  # a plain log, and a compressed one beside it
    (root / "_no-cwd" / "twice" / "session.jsonl.zstd").write_bytes(b"\x28\xb5\x2f\xfd")
    locked = plant(root, "locked")

    async def main() -> None:
        backend = JsonlPersistence(str(root), ops=Denied(locked))
        assert (await backend.load("good")).header.id == "good"
        await new_session(backend, "brand-new")  # the first flush of an unrelated session
        assert {h.id for h in await backend.list_headers()} == {"good", "brand-new"}
        with pytest.raises(SessionFormatUnsupportedError, match="flat-file layout"):
            await backend.load("export")
        with pytest.raises(SessionFormatUnsupportedError, match="holds both session.jsonl"):
            await backend.load("twice")
        with pytest.raises(PermissionError) as denied:
            await backend.load("locked")
        assert denied.value.filename == str(locked)  # the directory, not a file beneath it
        assert "zstd" not in str(denied.value)
        await backend.aclose()

    asyncio.run(main())


def cli(*args: str, unprivileged: bool = False) -> subprocess.CompletedProcess[str]:
    if not (unprivileged and os.geteuid() == 0):
        return run_cli(*args, timeout=120)
    command = [*DROP_CAPS, sys.executable, "-m", "agent_session", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)


def lines_of(out: str) -> dict[str, str]:
    return dict(line.split(": ", 1) for line in out.splitlines() if ": " in line)


@pytest.mark.process
def test_the_cli_reports_an_unreadable_session_and_serves_the_rest(tmp_path: Path) -> None:
    root = tmp_path / "store"
    plant(root, "ok")
    plant(root, "open", OPEN_TURN)
    unreadable = plant(root, "private")
    unreadable.chmod(0)
    try:
        listing = cli("ls", str(root), unprivileged=True)
        assert listing.returncode == 5, listing
        table, problems = listing.stdout.split("\n\n")
        assert [line.split()[0] for line in table.splitlines()[1:]] == ["ok", "open", "private"]
        assert f"private: unreadable — [Errno 13] Permission denied: '{unreadable}'" in problems
        verify = cli("verify", str(root), unprivileged=True)
        assert verify.returncode == 5, verify
        verdicts = lines_of(verify.stdout)
        assert verdicts["ok"].startswith("balanced")
        assert verdicts["open"].startswith("interrupted")
        assert verdicts["private"] == f"unreadable — [Errno 13] Permission denied: '{unreadable}'"
        named = cli("verify", str(root), "private", unprivileged=True)
        assert named.returncode == 5, named
        assert str(unreadable) in named.stdout
        assert "zstd" not in named.stdout
        shown = cli("show", str(root), "ok", unprivileged=True)
        assert shown.returncode == 0, shown
        recovered = cli("recover", str(root), unprivileged=True)
        assert recovered.returncode == 5, recovered
        assert "open: repaired (interrupted): 1 closer(s) appended" in recovered.stdout
        assert "private: not repaired (unreadable)" in recovered.stdout
    finally:
        unreadable.chmod(0o700)
    assert cli("verify", str(root), "open").returncode == 0


@pytest.mark.process
def test_a_stray_flat_file_is_listed_and_blocks_nothing(tmp_path: Path) -> None:
    root = tmp_path / "store"
    plant(root, "ok")
    stray = root / "_no-cwd" / "export.jsonl"
    stray.write_bytes(b'{"messages": []}\n')
    listing = cli("ls", str(root), "--json")
    assert listing.returncode == 2, listing
    rows = {row["id"]: row for row in map(json.loads, listing.stdout.splitlines())}
    assert rows["export.jsonl"]["flags"] == ["unsupported"]
    assert "unsupported flat-file layout" in rows["export.jsonl"]["problem"]
    verify = cli("verify", str(root))
    assert verify.returncode == 2, verify
    assert lines_of(verify.stdout)["ok"].startswith("balanced")
    assert cli("show", str(root), "ok").returncode == 0
    assert cli("export", str(root), "ok", "--format", "openai").returncode == 0
    assert cli("recover", str(root), "ok").returncode == 0
    assert stray.read_bytes() == b'{"messages": []}\n'


@pytest.mark.process
def test_a_copied_session_directory_is_reported_not_verified_twice(tmp_path: Path) -> None:
    root = tmp_path / "store"
    plant(root, "done-1")
    shutil.copytree(root / "_no-cwd" / "done-1", root / "_no-cwd" / "copy-1")
    verify = cli("verify", str(root))
    assert verify.returncode == 2, verify
    verdicts = lines_of(verify.stdout)
    assert verdicts["done-1"].startswith("balanced")
    assert verdicts["copy-1"].startswith("corrupt")
    assert 'header id "done-1"' in verdicts["copy-1"]
    assert verify.stdout.splitlines()[-1] == "verified 2 session(s): 1 balanced, 1 corrupt"
