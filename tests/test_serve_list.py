"""``agent-session serve``'s list: every session titled by its first message with its model,
human dates, tokens, crashes and errors; sorted by a column either way; filtered by state,
model, date, crash, approval and words; 100 to a page; content escaped; kept up to date as
the store changes (the catalog reads again only what changed); and each session's page leads
back to the list."""

from __future__ import annotations

import asyncio
import html
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from playwright.async_api import expect

from agent_session.persistence_jsonl import JsonlPersistence
from agent_session.see.catalog import Catalog
from agent_session.session import Runtime
from agent_session.stores import parse_store
from tests.browser import chromium
from tests.test_cli import cli
from tests.test_parking_crash import park
from tests.test_serve import listed, serving

pytestmark = pytest.mark.process

HOSTILE = "<script>window.pwned = 1</script> & <b>bold</b>"


async def _write(root: Path, count: int) -> None:
    """Sessions ``q000``…: ``question N`` asked of model ``m-a`` (even N) or ``m-b``, answered
    with N input and 2N output tokens; the last one's question is hostile markup."""
    async with Runtime() as runtime:
        runtime.install(JsonlPersistence(root))
        for n in range(count):
            session = runtime.sessions.create(f"q{n:03d}")
            title = HOSTILE if n == count - 1 else f"question {n:03d}"
            session.append("turn/start", {"turn": 1})
            user = {"role": "user", "content": [{"type": "text", "text": f"{title}\nmore"}]}
            session.append(
                "user/message",
                {**user, "source": {"kind": "user"}, "id": f"u{n}"},
                surface_op="append",
            )
            session.append("step/start", {"turn": 1, "step": 1})
            source = {"kind": "model", "provider": "p", "model": "m-a" if n % 2 == 0 else "m-b"}
            message = {"role": "assistant", "content": [{"type": "text", "text": "ok"}]}
            data = {"turn": 1, "step": 1, "message": {**message, "source": source, "id": f"a{n}"}}
            data["usage"] = {"inputTokens": n, "outputTokens": 2 * n}
            session.append("assistant/message", data, surface_op="append", source_event_seqs=[])
            session.append("step/end", {"turn": 1, "step": 1})
            session.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
            await runtime.sessions.flush(session)


def ids(page: str) -> list[str]:
    return [html.unescape(id) for id in re.findall(r'<tr data-id="([^"]*)">', page)]


@pytest.fixture(scope="module")
def store(tmp_path_factory: Any) -> Path:
    root = tmp_path_factory.mktemp("list") / "s"
    asyncio.run(_write(root, 150))
    cli("demo", "--store", str(root), "--session-id", "crashed", "--crash", "tool", "--no-recover")
    park(str(root), root.parent / "outbox", "none")  # session "job", parked
    return root


def test_a_page_lists_titles_models_dates_tokens_and_crashes(store: Path, tmp_path: Path) -> None:
    with serving(store, tmp_path / "audit.log") as base:
        page = listed(base)
        seventh = listed(base, "?q=007")
    assert "152 of 152 sessions · page 1 of 2" in page
    assert len(ids(page)) == 100
    assert "1 of 152 sessions" in seventh
    row = seventh.split('<tr data-id="q007">')[1].split("</tr>")[0]
    assert ">question 007</a>" in row  # the first line of the first message
    assert "<td>m-b</td>" in row
    assert "7 / 14" in row
    assert re.search(r"[A-Z][a-z]{2} \d{1,2}, \d{4} \d\d:\d\d UTC", row)
    assert not re.search(r"\d{13}", page)  # no epoch milliseconds
    crashed = page.split('<tr data-id="crashed">')[1].split("</tr>")[0]
    assert 'class="n crashed">1<' in crashed
    assert "task 1" in crashed
    assert html.escape(HOSTILE) in page
    assert "<script" not in page
    assert not (tmp_path / "audit.log").exists()


@pytest.mark.parametrize(
    ("query", "first", "count"),
    [
        ("?sort=tokens&order=desc", "q149", 100),
        ("?sort=tokens&order=asc&page=2", "q099", 52),  # page 1: job (0 tokens), q000 to q098
        ("?sort=title&order=asc", "q149", 100),  # "<script…" sorts before "question…"
        ("?sort=events&order=desc", "crashed", 100),
        ("?model=m-a&sort=title&order=desc", "q148", 75),
        ("?state=awaiting-approval", "job", 1),
        ("?approval=1", "job", 1),
        ("?crash=1", "crashed", 1),
        ("?q=question+01&sort=title&order=asc", "q010", 10),
        ("?state=interrupted", "crashed", 1),
    ],
)
def test_sorted_and_filtered(
    store: Path, tmp_path: Path, query: str, first: str, count: int
) -> None:
    with serving(store, tmp_path / "audit.log") as base:
        page = listed(base, query)
    shown = ids(page)
    assert shown[0] == first
    assert len(shown) == count


def test_the_dates_filter_by_last_write(store: Path, tmp_path: Path) -> None:
    import datetime

    today = datetime.datetime.now(datetime.UTC).date()
    with serving(store, tmp_path / "audit.log") as base:
        since = listed(base, f"?since={today}")
        before = listed(base, f"?until={today - datetime.timedelta(days=1)}")
        after = listed(base, f"?since={today + datetime.timedelta(days=1)}")
    assert "152 of 152 sessions" in since
    assert "0 of 152 sessions" in before
    assert "no session matches" in after


async def test_the_catalog_reads_again_only_what_changed(tmp_path: Path) -> None:
    root = tmp_path / "s"
    await _write(root, 3)
    catalog = Catalog(parse_store(str(root)))
    found, complete = catalog.current(wait=120)
    assert complete
    assert {s.id: s.tokens_in for s in found} == {"q000": 0, "q001": 1, "q002": 2}
    first = {s.id: s for s in found}
    async with Runtime() as runtime:
        runtime.install(JsonlPersistence(root))
        session = await runtime.sessions.resume("q001")
        session.append("turn/start", {"turn": 2})
        session.append("turn/end", {"turn": 2, "reason": {"kind": "completed"}})
        await runtime.sessions.flush(session)
        written = len(session.events)
    shutil.rmtree(root / "_no-cwd" / "q002")
    found, complete = catalog.current(wait=120)
    assert complete
    again = {s.id: s for s in found}
    assert sorted(again) == ["q000", "q001"]  # the removed one is gone
    assert again["q000"] is first["q000"]  # unchanged: not read again
    assert again["q001"] is not first["q001"]
    assert (again["q001"].turns, again["q001"].events) == (2, written)
    assert written > 6


async def test_a_session_page_leads_back_to_the_list(store: Path, tmp_path: Path) -> None:
    with serving(store, tmp_path / "audit.log") as base:
        listed(base)
        async with chromium() as browser:
            tab = await browser.new_page()
            await tab.goto(f"{base}/?crash=1")
            await tab.click("tr[data-id='crashed'] a")
            await tab.wait_for_selector("body[data-ready='1']")
            await tab.click("a.back")
            await expect(tab.locator("h1")).to_have_text(f"Sessions of {store}")
            await tab.locator("select[name=state]").select_option("awaiting-approval")
            await tab.click("button[type=submit]")
            await expect(tab.locator("#sessions tr")).to_have_count(1)
            assert await tab.locator("#sessions tr").get_attribute("data-id") == "job"
