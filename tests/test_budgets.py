"""Spend budgets kept in the log: a breach parks the turn, a raise from another process lets
``agent.resume()`` make the parked request once, and spend after any crash is the usage the
log recorded plus the bound of each request a crash cut: never more, never less. On every
store, with real processes killed around each model request."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import orjson
import pytest

from agent_session import (
    AgentRuntime,
    BudgetError,
    BudgetPendingError,
    ScriptedModel,
    ScriptedStep,
    budget_report,
    checkpoint_policy,
    open_store,
    set_budget,
)
from agent_session.session import SessionCollisionError
from tests import outbox
from tests.forkserver import run_module
from tests.sweeps import sample
from tests.test_cli import cli
from tests.test_parking_crash import reference_agrees
from tests.test_settle_crash import store_of

KINDS = ["jsonl", "sqlite", "postgres"]


def replies(n: int, usage: tuple[int, int] = (100, 30)) -> ScriptedModel:
    return ScriptedModel([ScriptedStep(text=["ok"], usage=usage)] * n, max_tokens=50)


async def run_until_parked(store: str, model: ScriptedModel, limit: int) -> list[dict[str, Any]]:
    """Turns on session ``job`` under an output budget of ``limit`` until one parks."""
    results = []
    async with AgentRuntime() as runtime:
        runtime.install(open_store(store))
        runtime.install(checkpoint_policy)
        runtime.models.register("demo", model)
        session = await runtime.sessions.open_or_create("job")
        set_budget(session, {"outputTokens": limit}, reason="trial")
        agent = runtime.agent(session, model="demo/m")
        for turn in range(10):
            result = await agent.run_turn(f"turn {turn}")
            results.append(result)
            if result["kind"] != "completed":
                with pytest.raises(BudgetPendingError, match="parked over its budget"):
                    await agent.run_turn("one more")
                break
    return results


@pytest.mark.parametrize("kind", KINDS)
def test_a_breach_parks_and_a_raise_from_another_process_resumes_in_the_same_turn(
    kind: str, tmp_path: Path
) -> None:
    store = store_of(kind, tmp_path)
    model = replies(10)
    results = asyncio.run(run_until_parked(store, model, 130))
    # 30 output tokens per response, 50 reserved per request: the 4th would reach 140 > 130
    assert [r["kind"] for r in results] == ["completed"] * 3 + ["awaiting-budget"]
    parked = results[-1]["budget"]
    assert (parked["turn"], parked["step"], parked["over"]) == (4, 1, ["outputTokens"])
    assert parked["spent"]["outputTokens"] == 90
    assert len(model.requests) == 3
    listed = cli("ls", store, "--json")
    assert json.loads(listed.stdout)["state"] == "awaiting-budget"
    verdict = cli("verify", store)
    assert verdict.returncode == 0
    assert "job: awaiting-budget" in verdict.stdout
    assert "parked over its budget (outputTokens)" in verdict.stdout
    shown = cli("show", store, "job").stdout
    assert "budget: outputTokens 130 (trial)" in shown
    assert "budget: the step 1 request was not made: over outputTokens" in shown
    lowered = cli("budget", "raise", store, "job", "--output-tokens", "100", check_rc=2)
    assert lowered.returncode == 2
    assert "cannot lower outputTokens from 130 to 100" in lowered.stderr
    raised = cli("budget", "raise", store, "job", "--output-tokens", "200", "--json")
    assert raised.returncode == 0, raised.stderr
    shown = json.loads(raised.stdout)
    assert shown["budget"]["limits"] == {"outputTokens": 200}
    assert shown["remaining"] == {"outputTokens": 110}
    assert shown["parked"]["over"] == ["outputTokens"]

    async def resume() -> tuple[Any, list[str], int]:
        async with AgentRuntime() as runtime:
            runtime.install(open_store(store))
            runtime.install(checkpoint_policy)
            again = replies(3, (120, 20))
            runtime.models.register("demo", again)
            session = await runtime.sessions.resume("job")
            result = await runtime.agent(session, model="demo/m").resume()
            turns = [e.data["turn"] for e in session.events if e.type == "turn/start"]
            return result, turns, len(again.requests)

    result, turns, made = asyncio.run(resume())
    assert result == {"kind": "completed"}
    assert made == 1  # the parked step's request, once
    assert turns == [1, 2, 3, 4]  # in the parked turn: no new one
    after = json.loads(cli("budget", "show", store, "job", "--json").stdout)
    assert after["spent"]["outputTokens"] == 110
    assert after["spent"]["requests"] == 4
    assert after["parked"] is None
    stats = cli("stats", store, "job")
    assert "spend: 420 input + 110 output tokens over 4 response(s)" in stats.stdout
    assert "budget: outputTokens 200" in stats.stdout


def test_resume_while_the_budget_still_does_not_allow_writes_nothing(tmp_path: Path) -> None:
    store = str(tmp_path / "s")
    asyncio.run(run_until_parked(store, replies(5), 70))

    async def resume() -> tuple[Any, int]:
        async with AgentRuntime() as runtime:
            runtime.install(open_store(store))
            runtime.models.register("demo", replies(1))
            session = await runtime.sessions.resume("job")
            before = session.seq
            result = await runtime.agent(session, model="demo/m").resume()
            return result, session.seq - before

    result, written = asyncio.run(resume())
    assert result["kind"] == "awaiting-budget"
    assert written == 0


def test_bad_budgets_write_nothing_and_a_live_writer_refuses_a_raise(tmp_path: Path) -> None:
    store = str(tmp_path / "s")

    async def scene() -> None:
        async with AgentRuntime() as runtime:
            runtime.install(open_store(store))
            runtime.models.register("demo", replies(2))
            session = await runtime.sessions.open_or_create("job")
            for limits, why in (
                ({"outputTokens": -1}, "must be a whole number ≥ 0"),
                ({"outputTokens": 1.5}, "must be a whole number ≥ 0"),
                ({"cost": 1}, "needs a price table"),
                ({"tokens": 5}, "unknown budget limit 'tokens'"),
                ({}, "at least one of"),
            ):
                with pytest.raises(BudgetError, match=why):
                    set_budget(session, limits)
            assert session.seq == 0
            await runtime.agent(session, model="demo/m").run_turn("hi")
            from agent_session import set_stored_budget

            with pytest.raises(SessionCollisionError):
                await set_stored_budget(store, "job", {"outputTokens": 10})

    asyncio.run(scene())


def test_cost_limits_price_usage_with_the_user_s_table(tmp_path: Path) -> None:
    store = str(tmp_path / "s")
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({"currency": "EUR", "models": {"m": {"input": 2, "output": 10}}}))
    asyncio.run(run_until_parked(store, replies(2, (1000, 100)), 100))
    done = cli("budget", "set", store, "job", "--cost", "0.5", "--prices", str(prices), "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    # 1000 input at 2/M and 100 output at 10/M: 0.003
    assert report["spent"]["cost"] == pytest.approx(0.003)
    assert report["budget"]["currency"] == "EUR"
    kept = cli("budget", "set", store, "job", "--cost", "1")  # (the table in force is kept)
    assert "budget: cost 1 (0.997 left)" in kept.stdout
    fresh = str(tmp_path / "fresh")
    asyncio.run(run_until_parked(fresh, replies(2, (1000, 100)), 100))
    no_prices = cli("budget", "set", fresh, "job", "--cost", "1", check_rc=2)
    assert "a cost limit needs a price table" in no_prices.stderr


def stored_lines(store: str) -> list[dict[str, Any]]:
    async def read() -> bytes:
        backend = open_store(store)
        try:
            raw = await backend.read_raw("job")
            assert raw is not None
            return raw.content
        finally:
            await backend.aclose()

    lines = asyncio.run(read()).splitlines()[1:]
    return [orjson.loads(line) for line in lines]


def independent_spend(lines: list[dict[str, Any]]) -> tuple[int, int, int]:
    """``(input, output, unanswered)`` summed from the stored lines by this test's own
    reading: every recorded usage, plus each reservation no message of its step answered."""
    spent_in = spent_out = cut = 0
    answered = {
        (line["data"]["turn"], line["data"]["step"])
        for line in lines
        if line["type"] == "assistant/message"
    }
    for line in lines:
        data = line["data"]
        if line["type"] == "assistant/message" and "usage" in data:
            spent_in += data["usage"]["inputTokens"]
            spent_out += data["usage"]["outputTokens"]
        elif line["type"] == "budget/reserved" and (data["turn"], data["step"]) not in answered:
            spent_in += data["inputTokens"]
            spent_out += data["outputTokens"]
            cut += 1
    return spent_in, spent_out, cut


POINTS = ["sent", "streaming", "answered", "recorded"]
CASES = [(kind, point, n) for kind in KINDS for point in POINTS for n in range(4)]


@pytest.mark.process
@pytest.mark.parametrize(
    ("kind", "point", "n"),
    sample(
        [c for c in CASES if c[1] != "recorded" or c[2] % 2 == 0],
        0.3,
        name="budget",
        key=lambda c: c[0],
    ),
)
def test_a_kill_around_a_model_request_never_resets_or_double_counts_the_spend(
    kind: str, point: str, n: int, tmp_path: Path
) -> None:
    store, box = store_of(kind, tmp_path), tmp_path / "outbox"
    killed = run_module("tests.budget_child", store, str(box), "--die", f"{point}@{n}")
    assert killed.returncode == -9, killed.stderr
    done = run_module("tests.budget_child", store, str(box))
    assert done.returncode == 0, done.stderr
    effects = outbox.effects(str(box))
    made = [int(line.split()[1]) for line in effects if line.startswith("request ")]
    got = {int(line.split()[1]) for line in effects if line.startswith("answered ")}
    lines = stored_lines(store)
    # (a settlement's re-asked call is a message without usage: no request made it)
    recorded = [e for e in lines if e["type"] == "assistant/message" and "usage" in e["data"]]
    spent_in, spent_out, cut = independent_spend(lines)
    # ground truth: every request made was answered and recorded, or is the one the kill cut
    cut_here = 0 if point == "recorded" else 1
    assert len(made) == len(recorded) + cut_here
    assert cut == cut_here
    expected_out = sum(5 + m for m in made if m != n or point == "recorded") + 40 * cut_here
    assert spent_out == expected_out
    report = budget_report([_event(line) for line in lines])
    assert report["spent"]["inputTokens"] == spent_in
    assert report["spent"]["outputTokens"] == spent_out
    assert report["spent"]["unknown"]["requests"] == cut_here
    shown = json.loads(cli("budget", "show", store, "job", "--json").stdout)
    assert shown["spent"] == report["spent"]
    assert got >= {m for m in made if m != n}
    if kind == "jsonl":  # (a SQLite row has no column for ignorable: the reference refuses)
        reference_agrees(store, [_event(line) for line in lines])


def _event(line: dict[str, Any]) -> Any:
    from agent_session.session import SessionEvent

    return SessionEvent.from_json(line)


def test_a_spend_window_is_one_query_over_labelled_sessions(store: str) -> None:
    async def scene() -> None:
        async with AgentRuntime() as runtime:
            runtime.install(open_store(store))
            runtime.models.register("demo", replies(6, (200, 20)))
            for id, tenant, turns in (("a", "acme", 2), ("b", "acme", 1), ("c", "other", 3)):
                session = await runtime.sessions.open_or_create(id)
                from agent_session import set_labels

                set_labels(session, {"tenant": tenant})
                agent = runtime.agent(session, model="demo/m")
                for turn in range(turns):
                    await agent.run_turn(f"t{turn}")
                await runtime.sessions.dispose(session)

    asyncio.run(scene())
    moved = cli("label", store, "b", "tenant=other")
    assert moved.returncode == 0, moved.stderr
    acme = cli("budget", "spend", store, "--label", "tenant=acme", "--json")
    assert acme.returncode == 0, acme.stderr
    [window] = [json.loads(line) for line in acme.stdout.splitlines()]
    assert (window["sessions"], window["requests"]) == (1, 2)
    assert (window["inputTokens"], window["outputTokens"]) == (400, 40)
    other = json.loads(cli("budget", "spend", store, "--label", "tenant=other", "--json").stdout)
    assert (other["sessions"], other["requests"], other["outputTokens"]) == (2, 4, 80)
    every = json.loads(cli("budget", "spend", store, "--per", "hour", "--json").stdout)
    assert (every["sessions"], every["requests"]) == (3, 6)
    assert cli("label", store, "a", "bad key=1", check_rc=4).stdout == ""
    from agent_session import spend_windows

    with pytest.raises(ValueError, match="label key"):
        asyncio.run(spend_windows(store, label=('tenant"]', "acme")))
