"""A real browser for the page tests: Debian's Chromium (``scripts/ensure-chromium`` installs
it for ``make test``), driven by Playwright for Python. Without it the calling test fails."""

from __future__ import annotations

import os
import shutil
import struct
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


@asynccontextmanager
async def chromium() -> AsyncIterator[Any]:
    """A headless Chromium browser."""
    from playwright.async_api import async_playwright

    async with async_playwright() as driver:
        browser = await driver.chromium.launch(
            executable_path=executable(), args=["--no-sandbox", "--disable-gpu"]
        )
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
