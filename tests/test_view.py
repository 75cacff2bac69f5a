"""``agent-session view``: one self-contained HTML timeline, opened from a file URL in a real
Chromium: the crash point, the repaired calls and each tool bar are there and clickable, no
console errors, hostile content runs nothing, a 100,000-event log's page holds only the rows in
view (its first-screen time is printed, measured, not asserted: a busy machine would fail a
bound), and the page is not blank."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pytest

from agent_session.persistence_jsonl import JsonlPersistence
from agent_session.see.view import page
from agent_session.session import Runtime, Session
from bench.workload import write_long_log
from tests.browser import chromium, distinct_pixels, share
from tests.corpus import case_bytes, cases
from tests.test_cli import cli

pytestmark = pytest.mark.process

ROOT = Path(__file__).parent.parent
SCREENSHOT = ROOT / "docs" / "images" / "timeline.png"


async def opened(browser: Any, path: Path) -> tuple[Any, list[str]]:
    """The page of ``path`` (a file URL), ready, with the console errors it logged."""
    tab = await browser.new_page(viewport={"width": 1200, "height": 700})
    errors: list[str] = []
    tab.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    tab.on("pageerror", lambda e: errors.append(str(e)))
    await tab.goto(path.as_uri())
    await tab.wait_for_selector("body[data-ready='1']")
    return tab, errors


async def test_a_crashed_and_repaired_session_is_marked_and_its_calls_open(tmp_path: Path) -> None:
    store = str(tmp_path / "s")
    cli("demo", "--store", store, "--session-id", "chat-7", "--crash", "tool")
    out = tmp_path / "chat-7.html"
    cli("view", store, "chat-7", "-o", str(out))
    async with chromium() as browser:
        tab, errors = await opened(browser, out)
        crash = tab.locator(".row.crash")
        assert await crash.count() == 1
        assert "CRASH — turn 2 cut after seq 71" in await crash.inner_text()
        # the picture, compared by its structure (regions and their colours), not its pixels
        await crash.scroll_into_view_if_needed()
        drawn = await tab.screenshot(clip=await crash.bounding_box())
        assert share(drawn, lambda p: p[0] > 150 and p[1] < 90 and p[2] < 90) > 0.6  # red
        head = await tab.screenshot(clip=await tab.locator("#head").bounding_box())
        assert share(head, lambda p: min(p) > 200) > 0.7  # a light head with dark text
        assert share(head, lambda p: max(p) < 120) > 0.01
        repaired = tab.locator(".row.call.repaired")
        assert await repaired.count() == 1
        assert "REPAIRED: TOOL_OUTCOME_UNKNOWN" in await repaired.inner_text()
        bars = tab.locator(".row.call .bar")
        assert await bars.count() == 4  # turn 1: read and write; 2: write; 3: read
        for index in range(await bars.count()):  # every tool bar opens its call
            await bars.nth(index).click()
            assert await tab.locator("#detail-body h3").first.text_content() == "arguments"
        await repaired.click()
        shown = await tab.locator("#detail-body").text_content() or ""
        assert "write_file(" in shown
        assert "[call-2-1]" in shown
        assert '"path":"notes-2-1.txt"' in shown
        assert "Its outcome is unknown" in shown
        assert "crashes: 1" in await tab.locator("#head").inner_text()
        await tab.locator(".row.step", has_text="step 2").first.click()  # (the picture's)
        assert "system prompt" in (await tab.locator("#detail-body").text_content() or "")
        shown_list = await tab.locator("#list").bounding_box()
        panel = await tab.locator("#detail").bounding_box()
        assert panel["x"] >= shown_list["x"] + shown_list["width"] - 1  # side by side
        said = tab.locator("#detail-body h3", has_text="response")
        response = await said.locator("xpath=following-sibling::pre[1]").text_content()
        assert response == "input tokens 120 · output tokens 8"  # (the demo's scripted usage)
        picture = await tab.screenshot()
        assert errors == []
    assert distinct_pixels(picture) > 20  # a rendered page, not a blank one
    if os.environ.get("AGENT_SESSION_WRITE_SCREENSHOT"):
        SCREENSHOT.parent.mkdir(exist_ok=True)
        SCREENSHOT.write_bytes(picture)


HOSTILE = [
    "</script><script>window.pwned = 1</script>",
    '<img src=x onerror="window.pwned = 1">',
    "javascript:window.pwned = 1",
    "\u202egnp.exe",
    "]]><!-- & &amp; <b>bold</b>",
]


async def test_hostile_content_runs_nothing_and_shows_as_text(tmp_path: Path) -> None:
    runtime = Runtime()
    session = runtime.sessions.create("x\"'../<s>")
    session.append("turn/start", {"turn": 1})
    session.append("step/start", {"turn": 1, "step": 1})
    for index, text in enumerate([*HOSTILE, "A" * 4_000_000]):
        message = {
            "role": "user",
            "content": [{"type": "text", "text": text}],
            "source": {"kind": "user"},
            "id": f"u{index}",
        }
        session.append("user/message", message, surface_op="append")
    html = page(session.header.to_json(), session.events)
    assert html.count("<script") == 2  # the data and the page's own script, nothing else
    assert "</script><script>window" not in html
    out = tmp_path / "hostile.html"
    out.write_text(html, encoding="utf-8")
    async with chromium() as browser:
        tab, errors = await opened(browser, out)
        assert await tab.evaluate("window.pwned") is None
        text = await tab.locator("#rows").inner_text()
        assert HOSTILE[0] in text
        assert HOSTILE[1] in text
        assert await tab.locator("#rows img").count() == 0
        assert errors == []


async def test_a_100k_event_log_renders_only_the_rows_in_view(tmp_path: Path) -> None:
    await write_long_log(tmp_path / "s", "big", 100_000)
    log = next((tmp_path / "s").rglob("session.jsonl"))
    out = tmp_path / "big.html"
    cli("view", str(tmp_path / "s"), "big", "-o", str(out))
    assert out.stat().st_size < 3 * log.stat().st_size
    async with chromium() as browser:
        tab = await browser.new_page(viewport={"width": 1200, "height": 700})
        start = time.perf_counter()
        await tab.goto(out.as_uri())
        await tab.wait_for_selector("body[data-ready='1']")
        elapsed = time.perf_counter() - start
        assert await tab.locator(".row").count() < 200  # virtualized: only what is in view
        await tab.locator("#list").evaluate("list => { list.scrollTop = list.scrollHeight; }")
        await tab.locator(".row.end").wait_for()  # (a selector: the page's CSP forbids eval)
    print(f"100,000-event log: first screen after {elapsed:.2f} s")


async def test_the_conformance_corpus_renders_without_errors(tmp_path: Path) -> None:
    chosen: dict[str, dict[str, Any]] = {}
    for case in cases("upstream-v0"):  # the longest log of each scenario that loads
        if "error" in case["load"]:
            continue
        known = chosen.get(case["scenario"])
        if known is None or len(case_bytes(case)) > len(case_bytes(known)):
            chosen[case["scenario"]] = case
    async with chromium() as browser:
        for scenario, case in chosen.items():
            root = tmp_path / scenario.replace(":", "_")
            path = root / case["path"]
            path.parent.mkdir(parents=True)
            path.write_bytes(case_bytes(case))
            backend = JsonlPersistence(root)
            try:
                inspected = await backend.inspect(case["session_id"])
            finally:
                await backend.aclose()
            events, header = inspected.events, inspected.header.to_json()
            out = root / "view.html"
            out.write_text(page(header, events), encoding="utf-8")
            tab, errors = await opened(browser, out)
            assert errors == [], scenario
            rows = json.loads(await tab.locator("#data").text_content() or "{}")["rows"]
            assert rows, scenario
            assert 0 < await tab.locator(".row").count() <= len(rows)
            await tab.close()
    assert len(chosen) == 4


def test_a_session_object_is_what_page_takes() -> None:
    session = Session.create("s")
    assert "session s" in page(session.header.to_json(), session.events)
