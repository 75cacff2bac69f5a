"""A real browser for the page tests: Debian's Chromium (``scripts/ensure-chromium`` installs
it for ``make test``), one per test process, driven by Playwright for Python over the
DevTools protocol. Without it the calling test fails."""

from __future__ import annotations

import atexit
import ctypes
import os
import shutil
import signal
import struct
import subprocess
import tempfile
import threading
import zlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest

__all__ = ["chromium", "distinct_pixels"]


def executable() -> str:
    found = os.environ.get("AGENT_SESSION_CHROMIUM") or shutil.which("chromium")
    if not found:
        pytest.fail(
            "no chromium for the browser tests: run them through make test (scripts/"
            "ensure-chromium installs it), or set AGENT_SESSION_CHROMIUM"
        )
    return found


_shared: tuple[subprocess.Popen[bytes], str] | None = None
_lock = threading.Lock()


def _endpoint() -> str:
    """The DevTools address of this test process's one Chromium (started on first use,
    killed when the process exits): each test connects to it instead of starting its own."""
    global _shared
    with _lock:
        if _shared is None or _shared[0].poll() is not None:
            profile = tempfile.mkdtemp(prefix="agent-session-chromium-")
            flags = ["--headless=new", "--no-sandbox", "--disable-gpu", "--remote-debugging-port=0"]
            process = subprocess.Popen(
                [executable(), *flags, f"--user-data-dir={profile}", "about:blank"],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                preexec_fn=_die_with_parent,
            )
            assert process.stderr is not None
            said = []
            for line in process.stderr:  # (until it says where it listens)
                said.append(line)
                if line.startswith(b"DevTools listening on "):
                    break
            else:
                pytest.fail(f"chromium did not start: {b''.join(said)!r}")
            atexit.register(_stop, process, profile)
            threading.Thread(target=process.stderr.read, daemon=True).start()  # (drained)
            _shared = (process, line.removeprefix(b"DevTools listening on ").strip().decode())
        return _shared[1]


def _die_with_parent() -> None:
    """(In the child, before it runs Chromium) be killed when this test process ends, however
    it ends (killed, or crashed, when its atexit functions never run)."""
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def _stop(process: subprocess.Popen[bytes], profile: str) -> None:
    process.kill()
    process.wait()
    shutil.rmtree(profile, ignore_errors=True)


@asynccontextmanager
async def chromium() -> AsyncIterator[Any]:
    """A headless Chromium browser: this process's one Chromium, connected to afresh (a
    test's pages are its own, and are closed when it lets go)."""
    from playwright.async_api import async_playwright

    async with async_playwright() as driver:
        browser = await driver.chromium.connect_over_cdp(_endpoint())
        try:
            yield browser
        finally:
            await browser.close()


def distinct_pixels(png: bytes) -> int:
    """How many distinct RGB(A) pixel values a PNG screenshot holds (a blank page has one or
    two)."""
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    at, idat, width, height, depth = 8, b"", 0, 0, 4
    while at < len(png):
        (length,) = struct.unpack(">I", png[at : at + 4])
        kind, body = png[at + 4 : at + 8], png[at + 8 : at + 8 + length]
        if kind == b"IHDR":
            width, height = struct.unpack(">II", body[:8])
            depth = {6: 4, 2: 3}[body[9]]
        elif kind == b"IDAT":
            idat += body
        at += 12 + length
    raw = zlib.decompress(idat)
    stride = width * depth + 1
    seen = set()
    for row in range(0, height, max(1, height // 64)):  # (filtered bytes: enough to tell)
        line = raw[row * stride + 1 : (row + 1) * stride]
        seen.update(line[i : i + depth] for i in range(0, len(line), depth * 7))
    return len(seen)
