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


def _image(png: bytes) -> tuple[int, int, int, bytes]:
    """A PNG screenshot's width, height, bytes per pixel (3 or 4: 8-bit RGB or RGBA) and its
    inflated rows (each led by its filter byte)."""
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    at, idat, width, height, depth = 8, b"", 0, 0, 4
    while at < len(png):
        (length,) = struct.unpack(">I", png[at : at + 4])
        kind, body = png[at + 4 : at + 8], png[at + 8 : at + 8 + length]
        if kind == b"IHDR":
            width, height = struct.unpack(">II", body[:8])
            assert body[8] == 8, "8 bits a channel"
            assert body[12] == 0, "not interlaced"
            depth = {6: 4, 2: 3}[body[9]]
        elif kind == b"IDAT":
            idat += body
        at += 12 + length
    return width, height, depth, zlib.decompress(idat)


def distinct_pixels(png: bytes) -> int:
    """How many distinct RGB(A) pixel values a PNG screenshot holds (a blank page has one or
    two)."""
    width, height, depth, raw = _image(png)
    stride = width * depth + 1
    seen = set()
    for row in range(0, height, max(1, height // 64)):  # (filtered bytes: enough to tell)
        line = raw[row * stride + 1 : (row + 1) * stride]
        seen.update(line[i : i + depth] for i in range(0, len(line), depth * 7))
    return len(seen)


def _paeth(left: int, up: int, corner: int) -> int:
    guess = left + up - corner
    near = min(
        (abs(guess - left), 0, left), (abs(guess - up), 1, up), (abs(guess - corner), 2, corner)
    )
    return near[2]


def pixels(png: bytes) -> list[tuple[int, int, int]]:
    """Every pixel of a (small: a clip of) PNG screenshot as ``(r, g, b)``, row by row, its
    filters undone as the PNG specification says."""
    width, height, depth, raw = _image(png)
    stride = width * depth
    prior, out = bytearray(stride), []
    for row in range(height):
        kind = raw[row * (stride + 1)]
        line = bytearray(raw[row * (stride + 1) + 1 : (row + 1) * (stride + 1)])
        for i in range(stride):
            left = line[i - depth] if i >= depth else 0
            if kind == 1:
                line[i] = (line[i] + left) & 255
            elif kind == 2:
                line[i] = (line[i] + prior[i]) & 255
            elif kind == 3:
                line[i] = (line[i] + (left + prior[i]) // 2) & 255
            elif kind == 4:
                corner = prior[i - depth] if i >= depth else 0
                line[i] = (line[i] + _paeth(left, prior[i], corner)) & 255
        out += [tuple(line[i : i + 3]) for i in range(0, stride, depth)]
        prior = line
    return out  # type: ignore[return-value]


def share(png: bytes, test: Any) -> float:
    """The share of a screenshot's pixels whose ``(r, g, b)`` passes ``test``."""
    seen = pixels(png)
    return sum(1 for p in seen if test(p)) / len(seen)
