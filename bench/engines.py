"""``python -m bench --engines`` (through ``scripts/with-postgres``: DBOS keeps its state in
PostgreSQL): the log as a DBOS workflow's conversation store.

- What DBOS's history holds per model call: the bytes of each model step's recorded output
  with ``DurableAgent`` (a few seqs), against a step that returns the model's reply (what a
  workflow records when the model call is its step, the SDK's default), and against the
  conversation an engine that records a call's input carries per call (the history so far),
  each over the same 20 turns in the same run.
- The kill sweep of the tests (``tests/test_dbos.py``) on a JSONL store, every boundary of
  four turns, with ``DurableAgent`` and with the control (the turns kept in the OpenAI Agents
  SDK's ``SQLiteSession``): the kills that left something twice, a call without its result,
  or an unsafe body run twice.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path
from typing import Any

from bench.postgres import DSN_ENV

__all__ = ["engine_figures", "print_figures"]

REPLY = "x" * 2000
"""What each model answer says (2,000 characters)."""


def _database() -> str:
    import psycopg

    server = os.environ[DSN_ENV]
    name = f"b_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(server, autocommit=True) as db:
        db.execute(f"CREATE DATABASE {name}")
    return f"{server.rpartition('/')[0]}/{name}"


_HISTORY = r"""
import json, sys
from dbos import DBOS, DBOSClient, SetWorkflowID
from agent_session.engines.dbos_turns import DurableAgent, Reply, Tool

store, system, turns, reply = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
sizes = []
def model(messages):
    sizes.append(len(json.dumps(messages, default=str)))
    return Reply(reply + str(len(messages)))

@DBOS.step(name="bench.reply")
def by_value(n: int) -> dict:
    return {"text": reply + str(n), "calls": []}

@DBOS.workflow(name="bench.turn")
def by_value_turn(n: int) -> dict:
    return by_value(n)

agent = DurableAgent("bench", store, model)
DBOS(config={"name": "agent-session-bench", "system_database_url": system,
              "run_admin_server": False})
DBOS.launch()
for n in range(turns):
    agent.start_turn("s", f"question {n}", workflow_id=f"log-{n}").get_result()
    with SetWorkflowID(f"value-{n}"):
        DBOS.start_workflow(by_value_turn, n).get_result()
client = DBOSClient(system_database_url=system)
def recorded(prefix, name):
    total = calls = 0
    for n in range(turns):
        for step in client.list_workflow_steps(f"{prefix}-{n}"):
            if step["function_name"] == name:
                total += len(json.dumps(step["output"])); calls += 1
    return total / calls
print(json.dumps({"log": recorded("log", "agent_session.model_call"),
                  "value": recorded("value", "bench.reply"),
                  "input": sum(sizes) / len(sizes)}))
agent.close(); client.destroy(); DBOS.destroy()
"""


def history_per_call(turns: int = 20) -> dict[str, float]:
    """Bytes DBOS records per model call (``log``: DurableAgent; ``value``: the reply as
    the step's output) and the mean size of the history a call's input carries."""
    with tempfile.TemporaryDirectory() as place:
        done = subprocess.run(
            [sys.executable, "-c", _HISTORY, place, _database(), str(turns), REPLY],
            capture_output=True,
            text=True,
            check=True,
        )
    figures: dict[str, float] = json.loads(done.stdout.splitlines()[-1])
    return figures


def _worker(place: Path, system: str, kill: str | None, control: bool) -> int:
    store = str(place / ("items.db" if control else "log"))
    args = [store, system, "s1", "4", str(place / "outbox"), *(["control"] if control else [])]
    env = {**os.environ, **({"AGENT_SESSION_FAILPOINT": kill} if kill else {})}
    root = Path(__file__).resolve().parent.parent
    done = subprocess.run(
        [sys.executable, "-m", "tests.dbos_child", *args],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    return done.returncode


def kill_sweep(control: bool) -> dict[str, int]:
    """Every boundary of four turns, each killed once then recovered: how many kills, how
    many left a message, call or result twice, how many left a call without its result (a
    history the model's provider refuses), how many ran an unsafe body twice."""
    boundaries = [("dbos:step-appended", n) for n in range(1, 21)]
    boundaries += [(f"dbos:{p}-body", n) for p in ("before", "after") for n in range(1, 9)]
    found = {"kills": 0, "duplicated": 0, "unanswered": 0, "unsafe_twice": 0}
    for point, hit in boundaries:
        with tempfile.TemporaryDirectory() as name:
            place, system = Path(name), _database()
            if _worker(place, system, f"{point}@{hit}", control) != -signal.SIGKILL:
                continue  # (the control has no such point)
            found["kills"] += 1
            if _worker(place, system, None, control) != 0:
                raise RuntimeError(f"the recovery after {point}@{hit} failed")
            said, calls, answers = _conversation(place, control)
            twice = len(set(said)) < len(said) or len(set(answers)) < len(answers)
            found["duplicated"] += twice
            found["unanswered"] += bool(set(calls) - set(answers))
            ran = (place / "outbox").read_text().split() if (place / "outbox").exists() else []
            found["unsafe_twice"] += any(ran.count(call) > 1 for call in set(ran))
    return found


def _conversation(place: Path, control: bool) -> tuple[list[str], list[str], list[str]]:
    """What the conversation holds: the user's and the model's texts, the calls asked for,
    the calls answered (each as often as it is there)."""
    if control:
        import sqlite3

        with sqlite3.connect(place / "items.db") as db:
            rows = db.execute("SELECT message_data FROM agent_messages").fetchall()
        items = [json.loads(row[0]) for row in rows]
        said = [str(i["content"]) for i in items if "content" in i]
        calls = [i["call_id"] for i in items if i.get("type") == "function_call"]
        answers = [i["call_id"] for i in items if i.get("type") == "function_call_output"]
        return said, calls, answers
    import asyncio

    from agent_session.persistence_jsonl import JsonlPersistence

    async def read() -> Any:
        store = JsonlPersistence(place / "log")
        try:
            return (await store.inspect("s1")).events
        finally:
            await store.aclose()

    events = asyncio.run(read())
    said = [
        str(e.data.get("content") or e.data["message"]["content"])
        for e in events
        if e.type in ("user/message", "assistant/message")
    ]
    calls = [
        b["id"]
        for e in events
        if e.type == "assistant/message"
        for b in e.data["message"]["content"]
        if b["type"] == "tool-call"
    ]
    answers = [e.data["message"]["source"]["callId"] for e in events if e.type == "tool/result"]
    return said, calls, answers


def engine_figures() -> dict[str, Any]:
    """Every figure of this module."""
    history = history_per_call()
    ours, theirs = kill_sweep(control=False), kill_sweep(control=True)
    return {
        "dbos_history_bytes_per_model_call_log": history["log"],
        "dbos_history_bytes_per_model_call_reply": history["value"],
        "conversation_bytes_per_model_call_input": history["input"],
        **{f"kills_log_{k}": v for k, v in ours.items()},
        **{f"kills_sqlitesession_{k}": v for k, v in theirs.items()},
    }


def print_figures(*, as_json: bool) -> int:
    """Print :func:`engine_figures` (one JSON object with ``as_json``)."""
    found = engine_figures()
    if as_json:
        print(json.dumps(found))
    else:
        for key, value in found.items():
            print(f"{key:50} {value:12.4g}")
    return 0
