"""The command line on a SQLite store, as real subprocesses: the crash demo writes a database;
``ls``/``verify``/``show``/``export`` read it without writing; ``recover`` repairs it; ``rm``
deletes; ``copy`` moves sessions between a database and a directory in both directions; the
store is accepted positionally and as ``--store``, and a wrong one is a one-line error."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from tests.test_cli import cli

pytestmark = pytest.mark.process


def crashed_database(path: Path, mode: str = "tool", session: str = "s1") -> str:
    store = f"sqlite:///{path}"
    cli("demo", "--store", store, "--crash", mode, "--session-id", session, "--no-recover")
    return store


def rows(path: Path) -> list[tuple[object, ...]]:
    with sqlite3.connect(path) as db:
        return [
            *db.execute("SELECT * FROM sessions ORDER BY id"),
            *db.execute("SELECT * FROM events ORDER BY session_id, seq"),
        ]


@pytest.mark.parametrize("mode", ["none", "request", "tool", "parallel-tool", "midstream"])
def test_the_demo_runs_on_sqlite(tmp_path: Path, mode: str) -> None:
    store = f"sqlite:///{tmp_path}/demo.db"
    result = cli("demo", "--store", store, "--crash", mode, "--session-id", "d", "--json")
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["killed"] is (mode != "none")
    assert report["resumedReason"] == {"kind": "completed"}
    assert (report["backend"], report["compression"]) == ("sqlite", None)
    with sqlite3.connect(tmp_path / "demo.db") as db:
        (count,) = db.execute("SELECT COUNT(*) FROM events WHERE session_id = 'd'").fetchone()
    assert count == report["events"]
    assert cli("verify", store).returncode == 0
    text = cli("demo", "--store", f"sqlite:///{tmp_path}/other.db", "--crash", mode).stdout
    assert "one row per event in a SQLite database" in text
    assert "ls sqlite:///" in text  # the next commands name the store as it was given


def test_read_commands_never_write_and_recover_repairs(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    store = crashed_database(path)
    crashed_database(path, "none", "clean")
    before = (path.read_bytes(), path.stat().st_mtime_ns, rows(path))
    listing = [json.loads(line) for line in cli("ls", store, "--json").stdout.splitlines()]
    assert [(r["id"], r["state"], r["backend"], r["compression"]) for r in listing] == [
        ("clean", "balanced", "sqlite", None),
        ("s1", "interrupted", "sqlite", None),
    ]
    with sqlite3.connect(path) as db:
        (last_time,) = db.execute("SELECT max(time) FROM events WHERE session_id = 's1'").fetchone()
    assert listing[1]["updatedAt"] == last_time  # the time of its last event
    assert listing[1]["events"] == len([r for r in rows(path) if r[0] == "s1"]) - 1  # (session)
    verify = cli("verify", "--store", store, check_rc=1)
    assert "s1: interrupted" in verify.stdout
    assert "clean: balanced" in verify.stdout
    shown = cli("show", store, "s1").stdout
    assert "not on disk yet" in shown
    assert f"agent-session recover {store.replace(str(tmp_path), '')}" not in shown
    header = cli("show", "--store", store, "s1", "--json").stdout.splitlines()[0]
    assert json.loads(header)["id"] == "s1"
    cli("export", store, "clean", "--format", "openai")
    assert (path.read_bytes(), path.stat().st_mtime_ns, rows(path)) == before
    recover = cli("recover", store)
    assert "s1: repaired (interrupted): 3 closer(s) appended" in recover.stdout
    assert "s1: balanced" in cli("verify", store).stdout
    assert cli("verify", "--store", store, "s1", "clean").returncode == 0


def test_rm_deletes_one_session(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    store = crashed_database(path, "none", "a")
    crashed_database(path, "none", "b")
    assert cli("rm", store, "a").stdout.strip() == f"deleted a from {store}"
    assert {r[0] for r in rows(path)} == {"b"}
    missing = cli("rm", "--store", store, "a", check_rc=3)
    assert missing.stderr.strip() == f'agent-session: error: no session "a" in {store}'


def test_copy_between_a_database_and_a_directory(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    store = crashed_database(path)
    crashed_database(path, "none", "clean")
    before = rows(path)
    directory = tmp_path / "logs"
    out = cli("copy", store, str(directory)).stdout
    assert "s1: copied — " in out
    assert "interrupted (a load repairs it)" in out
    assert out.strip().endswith("copied 2 session(s) to " + str(directory) + "; 0 refused")
    assert "s1: interrupted" in cli("verify", str(directory), check_rc=1).stdout
    again = cli("copy", str(directory), f"sqlite:///{tmp_path}/again.db", "s1", "clean")
    assert "copied 2 session(s)" in again.stdout
    assert rows(tmp_path / "again.db")[2:] == before[2:]  # every event row, column for column
    refused = cli("copy", store, str(directory), "clean", check_rc=2)
    assert "clean: exists — " in refused.stdout
    missing = cli("copy", store, str(directory), "nope", check_rc=3)
    assert "nope: not found" in missing.stdout
    same = cli("copy", store, store, check_rc=4)
    assert "SRC and DST are the same store" in same.stderr


def test_store_errors_are_one_line(tmp_path: Path) -> None:
    missing = cli("ls", f"sqlite:///{tmp_path}/none.db", check_rc=3)
    assert missing.stderr.strip() == (
        f'agent-session: error: session database "{tmp_path}/none.db" does not exist'
    )
    assert not (tmp_path / "none.db").exists()  # reading never creates a database
    scheme = cli("ls", "mysql://host/db", check_rc=4)
    assert "unsupported store 'mysql://host/db'" in scheme.stderr
    (tmp_path / "dir.db").mkdir()
    directory = cli("verify", f"sqlite:///{tmp_path}/dir.db", check_rc=4)
    assert "is a directory, not a file" in directory.stderr
    twice = cli("show", str(tmp_path), "x", "--store", str(tmp_path), check_rc=4)
    assert "the store was given twice" in twice.stderr
    none = cli("ls", check_rc=4)
    assert "a store is required" in none.stderr
    store = crashed_database(tmp_path / "s.db", "none", "a")
    convert = cli("convert", store, "a", "--to", "zstd", check_rc=4)
    assert "convert rewrites JSONL logs" in convert.stderr
    for output in (missing, scheme, directory, twice, none, convert):
        assert "Traceback" not in output.stderr
