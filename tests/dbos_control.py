"""The control of the DBOS kill tests: the same turns, with the conversation kept the way a
workflow without this library keeps it, in the OpenAI Agents SDK's ``SQLiteSession``: each
step adds its items when it is done. DBOS runs a step again when its process died after the
step's write and before DBOS recorded the step."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from agents import SQLiteSession
from dbos import DBOS

from agent_session.session.persistence.kit import failpoint
from tests.dbos_kit import lookup, reply_to, send


def _session(store: str, session_id: str) -> SQLiteSession:
    return SQLiteSession(session_id, store)


def _add(store: str, session_id: str, items: list[dict[str, Any]]) -> None:
    asyncio.run(_session(store, session_id).add_items(items))  # type: ignore[arg-type]


def _items(store: str, session_id: str) -> list[Any]:
    return asyncio.run(_session(store, session_id).get_items())


@DBOS.step(name="control.user_message")
def _user(store: str, session_id: str, text: str) -> None:
    _add(store, session_id, [{"role": "user", "content": text}])
    failpoint("dbos:step-appended")


@DBOS.step(name="control.model_call")
def _model(store: str, session_id: str) -> list[list[Any]]:
    items = _items(store, session_id)
    users = [n for n, i in enumerate(items) if i.get("role") == "user"]
    asked = not any(i.get("type") == "function_call" for i in items[users[-1] :])
    text, calls = reply_to(asked, len(users))
    added: list[dict[str, Any]] = [
        {"type": "function_call", "call_id": i, "name": n, "arguments": json.dumps(a)}
        for i, n, a in calls
    ]
    if text:
        added.append({"role": "assistant", "content": text})
    _add(store, session_id, added)
    failpoint("dbos:step-appended")
    return [[i, n, a] for i, n, a in calls]


@DBOS.step(name="control.tool_call")
def _tool(store: str, session_id: str, call: list[Any]) -> None:
    call_id, name, arguments = call
    failpoint("dbos:before-body")
    output = (send if name == "send" else lookup)(arguments, call_id)
    failpoint("dbos:after-body")
    _add(
        store, session_id, [{"type": "function_call_output", "call_id": call_id, "output": output}]
    )
    failpoint("dbos:step-appended")


@DBOS.workflow(name="control.turn")
def control_turn(store: str, session_id: str, text: str) -> None:
    _user(store, session_id, text)
    while True:
        calls = _model(store, session_id)
        if not calls:
            return
        for call in calls:
            _tool(store, session_id, call)
