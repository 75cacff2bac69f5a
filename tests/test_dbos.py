"""The log as a durable-execution engine's conversation store: ``EngineSteps.append_once``
on every store kind, and an agent's turns as DBOS workflows (``DurableAgent``) SIGKILLed at
every step boundary, then recovered by DBOS, against the same turns kept in the OpenAI
Agents SDK's ``SQLiteSession`` (the control)."""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path
from typing import Any

import pytest
from dbos import DBOSClient

from agent_session import Runtime, open_store
from agent_session.engines.once import EngineSteps, read_after
from agent_session.session.errors import SessionEventError
from agent_session.session.events.builders import user_message
from agent_session.session.events.outcomes import TOOL_OUTCOME_UNKNOWN
from agent_session.session.persistence.failpoints import FAILPOINT_ENV
from tests.backends import fresh_database
from tests.forkserver import run_module
from tests.sweeps import sample

TURNS = 4
STEPS_PER_TURN = 5
"""A turn's steps: the user's message, the model asking for two tools, the two tools, the
model's answer."""
BOUNDARIES = (
    [("dbos:step-appended", n) for n in range(1, TURNS * STEPS_PER_TURN + 1)]
    + [("dbos:before-body", n) for n in range(1, 2 * TURNS + 1)]
    + [("dbos:after-body", n) for n in range(1, 2 * TURNS + 1)]
)
"""Every step boundary of the four turns: after each step's write (before DBOS records the
step), and before and after each tool body."""


def _say(text: str) -> Any:
    def write(session: Any) -> None:
        session.append("turn/start", {"turn": 1})
        session.append("step/start", {"turn": 1, "step": 1})
        session.append("user/message", user_message(text), surface_op="append")

    return write


async def test_a_step_appends_once_whatever_runs_it_again(store: str) -> None:
    async with Runtime() as runtime:
        runtime.install(open_store(store))
        session = runtime.sessions.create("s")
        steps = EngineSteps(runtime)
        first = await steps.append_once(session, ["wf", 1], _say("hi"))
        assert first == [0, 1, 2]
        assert await steps.append_once(session, ["wf", 1], _say("again")) == first
        assert session.seq == 4  # the three events and their engine/step marker
        with pytest.raises(SessionEventError, match="list of strings and integers"):
            await steps.append_once(session, [], _say("x"))
        with pytest.raises(SessionEventError, match="appended no events"):
            await steps.append_once(session, ["wf", 2], lambda s: None)
    async with Runtime() as runtime:  # another process: the key is read from the log
        runtime.install(open_store(store))
        session = await runtime.sessions.resume("s")
        assert await EngineSteps(runtime).append_once(session, ["wf", 1], _say("x")) == first
        after = await read_after(runtime.persistence, "s", 1)  # type: ignore[arg-type]
        assert [e.seq for e in after][:2] == [2, 3]  # (then the load's closers)
        assert after[1].to_json()["data"] == {"key": ["wf", 1], "seqs": [0, 1, 2]}
        assert after[1].ignorable is True  # (the reference skips it)


def _store(kind: str, tmp_path: Path) -> str:
    if kind == "postgres":
        return fresh_database()
    return str(tmp_path / "log") if kind == "jsonl" else f"sqlite:///{tmp_path}/log.db"


def _run(store: str, system: str, outbox: Path, *more: str, kill: str | None = None) -> Any:
    env = None
    if kill is not None:
        import os

        env = {**os.environ, FAILPOINT_ENV: kill}
    args = (store, system, "s1", str(TURNS), str(outbox), *more)
    return run_module("tests.dbos_child", *args, env=env, server="dbos")


def _recorded(system: str) -> dict[tuple[str, int], Any]:
    """What DBOS recorded of each step of the turns' workflows: (workflow, step) -> output."""
    client = DBOSClient(system_database_url=system)
    try:
        return {
            (f"s1-turn-{n}", step["function_id"]): step["output"]
            for n in range(1, TURNS + 1)
            for step in client.list_workflow_steps(f"s1-turn-{n}")
        }
    finally:
        client.destroy()


@pytest.mark.process
@pytest.mark.parametrize("kind", ["jsonl", "sqlite", "postgres"])
async def test_turns_killed_at_every_step_boundary_and_recovered_by_dbos(
    kind: str, tmp_path: Path
) -> None:
    for point, hit in sample(BOUNDARIES, 0.08, name=f"dbos-kill-{kind}", key=lambda b: b[0]):
        case = tmp_path / f"{point.split(':')[1]}-{hit}"
        case.mkdir()
        store, system, outbox = _store(kind, case), fresh_database(), case / "outbox"
        killed = _run(store, system, outbox, kill=f"{point}@{hit}")
        assert killed.returncode == -signal.SIGKILL, (point, hit, killed.stderr[-2000:])
        done = _run(store, system, outbox)
        assert done.returncode == 0, (point, hit, done.stderr[-2000:])
        assert done.stdout.split("\n")[-2] == f"turn {TURNS} done"
        backend = open_store(store)
        try:
            events = (await backend.inspect("s1")).events
        finally:
            await backend.aclose()
        users = [e.data["content"][0]["text"] for e in events if e.type == "user/message"]
        assert users == [f"task {n}" for n in range(1, TURNS + 1)], (point, hit)  # 0 duplicated
        answers = [e for e in events if e.type == "assistant/message"]
        assert len(answers) == 2 * TURNS, (point, hit)
        results = {}
        for event in events:
            if event.type == "tool/result":
                call = event.data["message"]["source"]["callId"]
                assert call not in results, (point, hit, call)  # one result per call
                results[call] = event.data
        assert sorted(results) == sorted(
            f"{tool}-{n}" for n in range(1, TURNS + 1) for tool in ("send", "look")
        )
        ran = outbox.read_text().split() if outbox.exists() else []
        for n in range(1, TURNS + 1):
            assert ran.count(f"send-{n}") <= 1, (point, hit, ran)  # an unsafe body at most once
            code = (results[f"send-{n}"].get("error") or {}).get("code")
            if f"send-{n}" not in ran:  # never a result of a body that did not run
                assert code == TOOL_OUTCOME_UNKNOWN, (point, hit, n)
            assert code in (None, TOOL_OUTCOME_UNKNOWN)
        marks = {
            tuple(e.data["key"]): list(e.data["seqs"]) for e in events if e.type == "engine/step"
        }
        recorded = _recorded(system)
        assert len(recorded) == TURNS * STEPS_PER_TURN
        for key, output in recorded.items():  # the seqs DBOS holds are the log's
            seqs = output["seqs"] if isinstance(output, dict) else output
            assert marks[key] == seqs, (point, hit, key)


@pytest.mark.process
def test_the_control_duplicates_what_a_kill_after_a_write_left(tmp_path: Path) -> None:
    """The same turns kept by ``SQLiteSession``: DBOS runs the killed step again, so its items
    are added twice and an unsafe body runs twice (measured here; docs/engines.md quotes the
    whole sweep, ``python -m bench --engines``)."""
    # (the 3rd step is turn 1's send: killed after its output was added, or before)
    cases = [("dbos:step-appended", 3, 1), ("dbos:after-body", 1, 0)]
    for point, hit, extra in cases:
        case = tmp_path / f"{point.split(':')[1]}-{hit}"
        case.mkdir()
        items, system, outbox = str(case / "items.db"), fresh_database(), case / "outbox"
        killed = _run(items, system, outbox, "control", kill=f"{point}@{hit}")
        assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
        assert _run(items, system, outbox, "control").returncode == 0
        import sqlite3

        with sqlite3.connect(items) as db:
            stored = [
                json.loads(r[0]) for r in db.execute("SELECT message_data FROM agent_messages")
            ]
        assert len(stored) == 6 * TURNS + extra  # (a turn holds six items)
        assert outbox.read_text().split().count("send-1") == 2  # the unsafe body ran twice


def _approvals(store: str) -> str:
    """What ``agent-session approvals`` lists (nothing while the store is not there yet)."""
    from tests.forkserver import run_cli

    return run_cli("approvals", store).stdout


@pytest.mark.process
def test_a_parked_turn_survives_a_kill_and_goes_on_once_approved(
    tmp_path: Path, store: str
) -> None:
    from tests.forkserver import start_module
    from tests.test_cli import cli

    system, outbox = fresh_database(), tmp_path / "outbox"
    args = (store, system, "s1", "1", str(outbox), "approval")
    worker = start_module("tests.dbos_child", *args, server="dbos")
    try:
        deadline = time.monotonic() + 300  # (a bound for a worker that hangs, not a wait)
        while "send-1" not in _approvals(store):  # (the turn parks: a fact to wait for)
            assert worker.poll() is None, worker.communicate()
            assert time.monotonic() < deadline, "the worker never parked the turn"
        worker.send_signal(signal.SIGKILL)  # a crash while parked changes nothing
        worker.communicate()
        assert "awaiting-approval" in cli("verify", store, check_rc=None).stdout
        worker = start_module("tests.dbos_child", *args, server="dbos")  # DBOS recovers it
        assert "send-1" in _approvals(store)
        cli("approve", store, "s1", "send-1")
        client = DBOSClient(system_database_url=system)
        try:
            client.send("s1-turn-1", "decided", topic="approval:send-1")  # (DurableAgent.wake)
        finally:
            client.destroy()
        out, err = worker.communicate(timeout=120)
        assert worker.returncode == 0, err[-2000:]
        assert out.split("\n")[-2] == "turn 1 done"
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.communicate()
    assert outbox.read_text().split() == ["send-1"]  # the approved body ran once
    assert "1 balanced" in cli("verify", store).stdout
    shown = cli("show", store, "s1").stdout
    assert "tool send-1 [ok]" in shown
