"""The loop's approvals write what the reference writes: each scenario of the approval corpus
is run again here (the same model chunks, tools, listener and answers) and its log has the
same events, in the same order, with the same data and texts (ids and times aside)."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from agent_session.agent_loop.approval import (
    APPROVAL_REQUEST,
    OUTSIDE_TURN,
    TOOLS_PRE_EXECUTE,
    set_approval_policy,
    user_approval,
)
from agent_session.agent_loop.models import ModelRequest
from agent_session.persistence_jsonl import JsonlPersistence
from agent_session.session import SessionEventError
from tests.agents import SYSTEM, stack
from tests.corpus import cases

CORPUS = {(c["scenario"], c["case"]): c for c in cases("upstream-approval-v0")}


class Replay:
    """A model that streams, request by request, the chunks the corpus run recorded."""

    def __init__(self, events: list[Any]) -> None:
        steps: dict[tuple[int, int], list[Any]] = {}
        for event in events:
            if event.type == "assistant/chunk":
                key = (event.data["turn"], event.data["step"])
                steps.setdefault(key, []).append(event.data["chunk"])
        self.steps = [steps[key] for key in sorted(steps)]

    async def stream(self, request: ModelRequest) -> AsyncIterator[dict[str, Any]]:
        for chunk in json.loads(json.dumps(self.steps.pop(0))):
            yield chunk


def _mask(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: ("<id>" if k == "id" else _mask(v)) for k, v in value.items()}
    if isinstance(value, list):
        return [_mask(v) for v in value]
    return value


def _shape(events: Any) -> list[tuple[str, Any, Any]]:
    return [(e.type, _mask(e.to_json()["data"]), e.to_json().get("surfaceOp")) for e in events]


async def _corpus_events(scenario: str, tmp_path: Path) -> list[Any]:
    case = CORPUS[(scenario, "as-written")]
    path = tmp_path / "corpus" / case["path"]
    path.parent.mkdir(parents=True)
    path.write_bytes(b"".join(line.encode() + b"\n" for line in case["log_lines"]))
    backend = JsonlPersistence(tmp_path / "corpus")
    events = list((await backend.load(case["session_id"])).events)
    await backend.aclose()
    return events


@pytest.mark.parametrize(
    "scenario", ["approve", "reject", "unavailable", "never", "cancel", "switch", "no-service"]
)
async def test_each_scenario_writes_the_reference_s_events(tmp_path: Path, scenario: str) -> None:
    options = CORPUS[(scenario, "as-written")]["options"]
    expected = await _corpus_events(scenario, tmp_path)
    runtime, session, agent, _, _ = stack([], session_id="s")
    runtime.models.register("scripted", Replay(expected))
    if options.get("service", True):
        runtime.install(user_approval())

    async def ask_for_writes(call: Any, downstream: Any) -> Any:
        if call.name == "write_file":
            return {"kind": "ask", "reason": "writes to the workspace"}
        return await downstream(call)

    runtime.hooks.wrap(TOOLS_PRE_EXECUTE, ask_for_writes)
    answer = options.get("answer")
    if answer in ("allowed-once", "rejected"):

        async def answerer(request: Any, downstream: Any) -> Any:
            await asyncio.sleep(0)
            return answer

        runtime.hooks.wrap(APPROVAL_REQUEST, answerer)
    elif answer == "hang":

        async def hang(request: Any, downstream: Any) -> Any:
            agent.cancel({"kind": "user"})  # cancelled while the question is pending
            await asyncio.Event().wait()

        runtime.hooks.wrap(APPROVAL_REQUEST, hang)
    if options.get("policy") == "never":
        set_approval_policy(session, "never")
    if options.get("service", True):  # an ask between turns logs nothing and fails
        with pytest.raises(SessionEventError, match=re.escape(OUTSIDE_TURN)):
            await runtime.approval.request(session, "x")
    await agent.run_turn("task 0")
    if options.get("turns") == 2:
        runtime.approval.set_policy(agent, options["switchTo"])
        await agent.run_turn("task 1")
    assert agent.system == SYSTEM
    assert _shape(session.events) == _shape(expected)
