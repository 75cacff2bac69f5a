"""``agent-session serve``: the session list and the timeline pages in a real Chromium, a page
following a session another process writes, loopback-only by default, and an audit of every
write-capable file operation of the server process: none touches the store."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from playwright.async_api import expect

from tests.browser import chromium
from tests.test_cli import cli

pytestmark = pytest.mark.process

ROOT = Path(__file__).parent.parent

AUDITED = """
import os, sys
store, log = sys.argv[1], sys.argv[2]
watched = store.removeprefix("sqlite:///")
WRITES = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND

def audit(event, args):
    if event == "open" and args and isinstance(args[0], (str, bytes)):
        path, mode, flags = os.fsdecode(args[0]), args[1], args[2]
        writes = (isinstance(mode, str) and any(c in mode for c in "wax+")) or (flags or 0) & WRITES
        if writes and os.path.abspath(path).startswith(watched):
            with open(log, "a") as out:
                out.write(f"{event} {path} {mode} {flags}\\n")
    elif event in ("os.remove", "os.rename", "os.truncate", "os.replace", "os.mkdir", "os.rmdir"):
        if any(isinstance(a, (str, bytes)) and os.path.abspath(os.fsdecode(a)).startswith(watched) for a in args):
            with open(log, "a") as out:
                out.write(f"{event} {args}\\n")

sys.addaudithook(audit)
from agent_session.cli import main
sys.exit(main(["serve", store, "--port", "0"]))
"""


@contextmanager
def serving(store: Path | str, audit: Path) -> Iterator[str]:
    """The base URL of ``agent-session serve`` on ``store``, under the write audit."""
    server = subprocess.Popen(
        [sys.executable, "-c", AUDITED, str(store), str(audit)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    try:
        assert server.stdout is not None
        line = server.stdout.readline()  # "serving STORE at http://127.0.0.1:PORT/ ..."
        assert " at http://127.0.0.1:" in line, server.stderr.read() if server.stderr else line
        yield line.split(" at ")[1].split()[0].rstrip("/")
    finally:
        server.terminate()
        server.wait(timeout=30)


def get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=30) as response:
        return str(response.read().decode())


def listed(base: str, query: str = "") -> str:
    """The list page once the server has read the whole store (until then it says it is still
    reading, a fact to wait on: each request waits a moment for the pass it started)."""
    deadline = time.monotonic() + 120
    while True:
        page = get(f"{base}/{query}")
        if 'id="pending"' not in page or time.monotonic() > deadline:
            return page


WRITER = """
import asyncio, sys
from agent_session import open_store
from agent_session.session import Runtime

async def main():
    async with Runtime() as runtime:
        runtime.install(open_store(sys.argv[1]))
        session = await runtime.sessions.resume(sys.argv[2])
        session.append("turn/start", {"turn": 9})
        message = {"role": "user", "content": [{"type": "text", "text": "more work"}],
                   "source": {"kind": "user"}, "id": "late"}
        session.append("user/message", message, surface_op="append")
        session.append("turn/end", {"turn": 9, "reason": {"kind": "completed"}})
        await runtime.sessions.flush(session)

asyncio.run(main())
"""


async def test_the_list_and_a_timeline_follow_the_store_and_nothing_is_written(
    tmp_path: Path,
) -> None:
    store, audit = tmp_path / "s", tmp_path / "audit.log"
    cli("demo", "--store", str(store), "--session-id", "crashed", "--crash", "tool", "--no-recover")
    cli("demo", "--store", str(store), "--session-id", "done", "--crash", "none", "--turns", "1")
    with serving(store, audit) as base:
        shown = listed(base)
        assert "crashed" in shown
        assert "done" in shown
        only = listed(base, "?state=interrupted")
        assert "crashed" in only
        assert ">done<" not in only
        data = json.loads(get(f"{base}/api/session/crashed"))
        assert any(row["k"] == "crash" for row in data["rows"])
        async with chromium() as browser:
            tab = await browser.new_page()
            errors: list[str] = []
            tab.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            await tab.goto(f"{base}/")
            await tab.click("tr[data-id='crashed'] a")
            await tab.wait_for_selector("body[data-ready='1']")
            assert await tab.locator(".row.crash").count() == 1
            await tab.goto(f"{base}/session/done")
            await tab.wait_for_selector("body[data-ready='1']")
            before = int(await tab.evaluate("document.body.dataset.events"))
            wrote = subprocess.run(
                [sys.executable, "-c", WRITER, str(store), "done"],
                cwd=ROOT,
                capture_output=True,
                text=True,
            )
            assert wrote.returncode == 0, wrote.stderr
            # (the page's strict CSP forbids the evaluated predicates of wait_for_function)
            await expect(tab.locator("body")).not_to_have_attribute(
                "data-events", str(before), timeout=60_000
            )
            # the timeline paints only the rows in view: scroll to its end, as a reader would
            await tab.locator("#list").evaluate("list => { list.scrollTop = list.scrollHeight; }")
            await expect(tab.locator("#rows")).to_contain_text("more work", timeout=60_000)
            assert errors == []
    written = audit.read_text() if audit.exists() else ""
    assert written == ""  # no write-capable operation of the server touched the store


def test_a_non_loopback_address_needs_allow_remote(tmp_path: Path) -> None:
    store = tmp_path / "s"
    cli("demo", "--store", str(store), "--crash", "none", "--turns", "1")
    refused = cli("serve", str(store), "--host", "0.0.0.0", "--port", "0", check_rc=4)
    assert "--allow-remote" in refused.stderr
    assert os.path.isdir(store)


def test_a_busy_port_says_so_and_how_to_pick_another(tmp_path: Path) -> None:
    store = tmp_path / "s"
    cli("demo", "--store", str(store), "--crash", "none", "--turns", "1")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        refused = cli("serve", str(store), "--port", port, check_rc=5)
    assert f"port {port} on 127.0.0.1 is already in use" in refused.stderr
    assert "--port 0 for any free port" in refused.stderr
    assert "Errno" not in refused.stderr


async def test_the_corpus_sessions_are_served_without_errors(tmp_path: Path) -> None:
    from tests.corpus import case_bytes, cases

    store, audit = tmp_path / "s", tmp_path / "audit.log"
    chosen: dict[str, dict] = {}
    for case in cases("upstream-v0"):  # the longest loadable log of each scenario
        known = chosen.get(case["session_id"])
        if "error" not in case["load"] and (
            known is None or len(case_bytes(case)) > len(case_bytes(known))
        ):
            chosen[case["session_id"]] = case
    for case in chosen.values():
        path = store / case["path"]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(case_bytes(case))
    with serving(store, audit) as base:
        shown = listed(base)
        async with chromium() as browser:
            for id in chosen:
                assert id in shown
                tab = await browser.new_page()
                errors: list[str] = []
                tab.on(
                    "console", lambda m, e=errors: e.append(m.text) if m.type == "error" else None
                )
                await tab.goto(f"{base}/session/{id}")
                await tab.wait_for_selector("body[data-ready='1']")
                assert await tab.locator(".row").count() > 0, id
                assert errors == [], id
                await tab.close()
    assert len(chosen) == 4
    assert not audit.exists() or audit.read_text() == ""


def test_the_list_page_has_a_strict_policy_and_no_script(tmp_path: Path) -> None:
    store, audit = tmp_path / "s", tmp_path / "audit.log"
    cli("demo", "--store", str(store), "--crash", "none", "--turns", "1")
    with serving(store, audit) as base:
        shown = listed(base)
    assert "<script" not in shown
    assert "default-src 'none'; style-src 'sha256-" in shown
    assert "unsafe-inline" not in shown


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_a_database_store_is_served_too(tmp_path: Path, kind: str) -> None:
    from tests.test_settle_crash import store_of

    store, audit = store_of(kind, tmp_path), tmp_path / "audit.log"
    cli("demo", "--store", store, "--session-id", "crashed", "--crash", "tool", "--no-recover")
    # (SQLite writes outside Python's audit: the file and its -wal must stay as they were; a
    # reader's marks in the -shm index are not the store)
    files = [f for f in (tmp_path / "sessions.db", tmp_path / "sessions.db-wal") if f.exists()]
    before = [(f.name, f.read_bytes(), f.stat().st_mtime_ns) for f in files]
    with serving(store, audit) as base:
        front = listed(base)
        data = json.loads(get(f"{base}/api/session/crashed"))
        shown = get(f"{base}/session/crashed")
    after = [(f.name, f.read_bytes(), f.stat().st_mtime_ns) for f in files]
    assert after == before
    assert "crashed" in front
    assert "interrupted" in front
    assert any(row["k"] == "crash" for row in data["rows"])
    assert "Content-Security-Policy" in shown
    assert not audit.exists() or audit.read_text() == ""
