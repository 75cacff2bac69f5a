"""The timeline page as a person reads it, in a real Chromium: the model and totals in its
head (tokens summed from the log, cost from a price table), human dates, each step opening to
show its request (system prompt, tools, the history by seq) and its answer, the keyboard
moving through the rows and opening them, and a parked session showing what waits, why, the
arguments, and a command that, run as shown, decides it."""

from __future__ import annotations

import datetime
import json
import re
import shlex
from pathlib import Path
from typing import Any

import pytest
from playwright.async_api import expect

from agent_session.session.events.requests import logged_requests
from tests.browser import chromium
from tests.test_cli import cli
from tests.test_parking_crash import park
from tests.test_view import opened

pytestmark = pytest.mark.process


async def _events(store: str, id: str) -> list[Any]:
    from agent_session import open_store

    backend = open_store(store)
    try:
        return list((await backend.inspect(id)).events)
    finally:
        await backend.aclose()


async def test_the_head_has_the_model_the_totals_and_the_cost(tmp_path: Path) -> None:
    store = str(tmp_path / "s")
    cli("demo", "--store", store, "--session-id", "chat", "--crash", "none", "--turns", "2")
    events = await _events(store, "chat")
    usage = [e.data["usage"] for e in events if e.type == "assistant/message"]
    tokens_in = sum(u["inputTokens"] for u in usage)
    tokens_out = sum(u["outputTokens"] for u in usage)
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({"models": {"scripted-*": {"input": 3000, "output": 15000}}}))
    out = tmp_path / "chat.html"
    cli("view", store, "chat", "-o", str(out), "--prices", str(prices))
    async with chromium() as browser:
        tab, errors = await opened(browser, out)
        head = await tab.locator("#head").inner_text()
        assert "model scripted-1" in head
        assert f"{tokens_in} in / {tokens_out} out tokens" in head
        cost = (tokens_in * 3000 + tokens_out * 15000) / 1e6
        assert f"cost {cost:.2f} USD" in head
        assert "task 1" in await tab.locator("#head h1").inner_text()  # titled by its first ask
        turn = await tab.locator(".row.turn").first.inner_text()
        assert str(datetime.datetime.now(datetime.UTC).year) in turn
        assert not re.search(r"\d{13}", head + turn)  # no epoch milliseconds anywhere
        assert errors == []


async def test_a_step_opens_to_show_what_it_was_sent_and_what_came_back(tmp_path: Path) -> None:
    store = str(tmp_path / "s")
    cli("demo", "--store", store, "--session-id", "chat", "--crash", "none", "--turns", "1")
    events = await _events(store, "chat")
    second = logged_requests(events)[1]  # turn 1, step 2: after the tool results
    out = tmp_path / "chat.html"
    cli("view", store, "chat", "-o", str(out))
    async with chromium() as browser:
        tab, errors = await opened(browser, out)
        await tab.locator(".row.step", has_text="step 2").first.click()
        detail = tab.locator("#detail-body")
        sections = await detail.locator("h3").all_text_contents()
        # (no parameters: the scripted model sends none besides the model, named above)
        assert sections[:4] == ["sent to", "system prompt", "tools", "messages"]
        text = await detail.text_content() or ""
        assert second.system
        assert second.system in text
        for tool in second.tools:
            assert f"{tool['name']}: {tool['description']}" in text
        seqs = await detail.locator(".message .role").all_text_contents()
        assert seqs == [
            f"{m['role'] if events[s].type != 'tool/result' else 'tool'} (seq {s})"
            for s, m in zip(second.message_seqs, second.messages, strict=True)
        ]
        answer = next(e for e in events if e.seq >= second.at_seq and e.type == "assistant/message")
        came = detail.locator("h3", has_text="came back").locator("xpath=following-sibling::pre[1]")
        assert await came.text_content() == answer.data["message"]["content"][0]["text"]
        assert errors == []


async def test_a_step_shows_the_parameters_its_adapter_sent(tmp_path: Path) -> None:
    from agent_session import (
        AgentRuntime,
        JsonlPersistence,
        RequestSettings,
        ScriptedModel,
        ScriptedStep,
    )
    from agent_session.see.view import page

    class Tuned(ScriptedModel):  # an adapter that says what it sends besides the history
        def request_settings(self) -> RequestSettings:
            return RequestSettings({"temperature": 0.5, "maxTokens": 64}, frozenset({"maxTokens"}))

    async with AgentRuntime() as runtime:
        runtime.install(JsonlPersistence(tmp_path / "s"))
        runtime.models.register("m", Tuned([ScriptedStep(text=["Hi."])]))
        session = runtime.sessions.create("tuned")
        await runtime.agent(session, model="m/small").run_turn("Hello.")
        header = next(e.data for e in session.events if e.type == "request/header")["header"]
        assert header["config"] == {
            "provider": "m",
            "model": "small",
            "temperature": 0.5,
            "maxTokens": 64,
        }
        assert header["adapterDefaults"] == {"maxTokens": True}
        out = tmp_path / "tuned.html"
        out.write_text(page(session.header.to_json(), session.events), encoding="utf-8")
    async with chromium() as browser:
        tab, errors = await opened(browser, out)
        await tab.locator(".row.step").first.click()
        said = tab.locator("#detail-body h3", has_text="parameters")
        shown = await said.locator("xpath=following-sibling::pre[1]").text_content()
        assert json.loads(shown or "") == {"temperature": 0.5, "maxTokens": 64}
        assert errors == []


async def test_the_keyboard_moves_through_the_rows_and_opens_them(tmp_path: Path) -> None:
    store = str(tmp_path / "s")
    cli("demo", "--store", store, "--session-id", "chat", "--crash", "tool", "--turns", "2")
    out = tmp_path / "chat.html"
    cli("view", store, "chat", "-o", str(out))
    async with chromium() as browser:
        tab, errors = await opened(browser, out)
        body = tab.locator("body")
        for key, selected in (("Home", 0), ("ArrowDown", 1), ("j", 2), ("k", 1), ("End", None)):
            await tab.keyboard.press(key)
            if selected is not None:
                await expect(body).to_have_attribute("data-selected", str(selected))
        rows = json.loads(await tab.locator("#data").text_content() or "{}")["rows"]
        assert await body.get_attribute("data-selected") == str(len(rows) - 1)
        assert await tab.locator(".row.selected").count() == 1  # the last row, scrolled to
        await tab.keyboard.press("Home")
        await tab.keyboard.press("ArrowDown")
        await tab.keyboard.press("Enter")
        assert await tab.locator("#detail").is_visible()
        selected = await tab.locator(".row.selected .what").text_content()
        assert await tab.locator("#detail-body h2").text_content() == selected
        await tab.keyboard.press("Escape")
        assert not await tab.locator("#detail").is_visible()
        assert errors == []


async def test_a_parked_session_shows_what_waits_and_how_to_decide_it(tmp_path: Path) -> None:
    store = str(tmp_path / "s")
    park(store, tmp_path / "outbox", "none")
    out = tmp_path / "job.html"
    cli("view", store, "job", "-o", str(out))
    async with chromium() as browser:
        tab, errors = await opened(browser, out)
        panel = tab.locator("#parked")
        assert await panel.is_visible()
        shown = await panel.inner_text()
        assert "waiting for approval: tool pay" in shown
        assert "why: moves money" in shown
        assert json.loads(await panel.locator("pre.arguments").text_content() or "") == {
            "amount": 5
        }
        commands = (await panel.locator("pre.command").text_content() or "").splitlines()
        assert errors == []
    approve = shlex.split(commands[0])
    assert approve[:5] == ["agent-session", "approve", store, "job", "c-pay"]
    cli(*approve[1:])  # the command as the page shows it decides the call
    cli("view", store, "job", "-o", str(out))
    async with chromium() as browser:
        tab, errors = await opened(browser, out)
        shown = await tab.locator("#parked").inner_text()
        assert "decided allowed-once" in shown
        assert await tab.locator("#parked pre.command").count() == 0
        assert errors == []
