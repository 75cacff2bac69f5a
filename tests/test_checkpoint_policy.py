"""The checkpoint policy (the reference's acceptance cases 68-73). Flushes are held open on
gates the test releases, so ordering is proven without sleeping."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from agent_session.agent_loop import AgentRuntime
from agent_session.agent_loop.loop import AGENT_POST_STEP, StepContext
from agent_session.agent_loop.models import ModelRequest
from agent_session.agent_loop.scripted import ScriptedCall, ScriptedModel, ScriptedStep
from agent_session.agent_loop.tools import ToolCall
from agent_session.checkpoints import checkpoint_policy
from agent_session.persistence_jsonl import JsonlPersistence
from agent_session.session import Session
from agent_session.session.events.event import register_event_type
from tests.agents import corpus_script, stack


class GatedFlush:
    """A ``session/flush`` listener that records and, when gated, waits for release."""

    def __init__(self, runtime: AgentRuntime, trace: list[str], *, gated: bool = True) -> None:
        self.trace, self.gate = trace, asyncio.Event()
        if not gated:
            self.gate.set()
        self.fail: Exception | None = None
        self.count = 0
        runtime.hooks.listen("session/flush", self)

    async def __call__(self, session: Session) -> None:
        self.count += 1
        self.trace.append("flush:start")
        await self.gate.wait()
        if self.fail is not None:
            raise self.fail
        self.trace.append("flush:end")


def recording_model(trace: list[str]) -> ScriptedModel:
    def hook(number: int, request: Any, chunk: Any) -> None:
        if chunk is None:
            trace.append("adapter")

    return ScriptedModel([ScriptedStep(text=["hi"])] * 5, on_chunk=hook)


async def settle() -> None:
    for _ in range(10):
        await asyncio.sleep(0)


async def test_case_68_request_flush_completes_before_the_adapter_is_built() -> None:
    runtime, trace = AgentRuntime(), []
    runtime.install(checkpoint_policy)
    runtime.models.register("s", recording_model(trace))
    gate = GatedFlush(runtime, trace)
    session = runtime.sessions.create("r")
    chunks: list[Any] = []

    async def consume() -> None:
        async for chunk in runtime.models.stream(ModelRequest("s", "m", [], session_id="r")):
            chunks.append(chunk)

    consuming = asyncio.ensure_future(consume())
    await settle()
    assert trace == ["flush:start"]
    gate.gate.set()
    await consuming
    assert trace == ["flush:start", "flush:end", "adapter"]
    assert chunks
    assert session.id == "r"


async def test_case_69_no_session_no_flush_and_a_failed_flush_never_calls_the_adapter() -> None:
    runtime, trace = AgentRuntime(), []
    runtime.install(checkpoint_policy)
    runtime.models.register("s", recording_model(trace))
    gate = GatedFlush(runtime, trace, gated=False)
    for session_id in (None, "unknown"):
        async for _ in runtime.models.stream(ModelRequest("s", "m", [], session_id=session_id)):
            pass
    assert gate.count == 0
    runtime.sessions.create("r")
    gate.fail = OSError("disk unavailable")
    trace.clear()
    with pytest.raises(OSError, match="disk unavailable"):
        async for _ in runtime.models.stream(ModelRequest("s", "m", [], session_id="r")):
            pass
    assert "adapter" not in trace


def tool_runtime(trace: list[str]) -> tuple[AgentRuntime, Session]:
    runtime = AgentRuntime()
    runtime.install(checkpoint_policy)

    async def body(args: Any, call: ToolCall) -> str:
        trace.append("tool")
        return "done"

    runtime.tools.register("t", "t", {"type": "object"}, body)
    return runtime, runtime.sessions.create("s")


async def test_case_70_tool_body_runs_after_the_flush() -> None:
    trace: list[str] = []
    runtime, session = tool_runtime(trace)
    gate = GatedFlush(runtime, trace)
    running = asyncio.ensure_future(runtime.tools.execute(ToolCall("c1", "t", "{}", session)))
    await settle()
    assert trace == ["flush:start"]
    gate.gate.set()
    result = await running
    assert trace == ["flush:start", "flush:end", "tool"]
    assert result.content == [{"type": "text", "text": "done"}]


async def test_case_71_cancel_during_the_tool_flush_returns_the_canonical_result() -> None:
    trace: list[str] = []
    runtime, session = tool_runtime(trace)
    gate = GatedFlush(runtime, trace)
    call = ToolCall("c1", "t", "{}", session)
    running = asyncio.ensure_future(runtime.tools.execute(call))
    await settle()
    call.cancel.cancel()
    gate.gate.set()
    result = await running
    assert "tool" not in trace
    assert result.is_error is True
    assert result.error == {"name": "AbortError", "code": "ABORTED_BEFORE_DISPATCH"}
    assert result.content == [{"type": "text", "text": "Error: tool call aborted before dispatch"}]


async def test_case_72_failed_tool_flush_is_an_error_result_and_nested_calls_do_not_flush() -> None:
    trace: list[str] = []
    runtime, session = tool_runtime(trace)
    gate = GatedFlush(runtime, trace, gated=False)
    gate.fail = OSError("disk unavailable")
    result = await runtime.tools.execute(ToolCall("c1", "t", "{}", session))
    assert result.is_error is True
    assert result.content == [{"type": "text", "text": "Error: disk unavailable"}]
    assert "tool" not in trace
    gate.fail, gate.count = None, 0
    outer = ToolCall("outer", "t", "{}", session)
    await runtime.tools.execute(ToolCall("inner", "t", "{}", session, parent=outer))
    assert gate.count == 0
    assert trace[-1] == "tool"


async def test_case_73_post_step_flushes_once_and_disposal_removes_every_wrapper() -> None:
    runtime = AgentRuntime()
    dispose = runtime.install(checkpoint_policy)
    trace: list[str] = []
    gate = GatedFlush(runtime, trace, gated=False)
    session = runtime.sessions.create("s")
    await runtime.hooks.chain(AGENT_POST_STEP, _done)(StepContext(None, session, 1, 1))  # type: ignore[arg-type]
    assert gate.count == 1
    dispose()
    await runtime.hooks.chain(AGENT_POST_STEP, _done)(StepContext(None, session, 1, 1))  # type: ignore[arg-type]
    await runtime.tools.execute(ToolCall("c", "t", "{}", session))
    runtime.models.register("s", recording_model([]))
    async for _ in runtime.models.stream(ModelRequest("s", "m", [], session_id="s")):
        pass
    assert gate.count == 1


async def _done(context: StepContext) -> None:
    return None


async def test_post_step_listeners_registered_before_the_policy_are_in_the_checkpoint(
    tmp_path: Path,
) -> None:
    register_event_type("plugin/step-note")
    runtime, _session, agent, _, _ = stack(corpus_script(1))
    backend = JsonlPersistence(tmp_path, write_batch_max_delay_ms=600_000)
    runtime.install(backend)
    durable_at_step: list[list[str]] = []

    async def annotate(context: StepContext, downstream: Any) -> None:
        context.session.append("plugin/step-note", {"step": context.step})
        await downstream(context)

    async def observe(context: StepContext, downstream: Any) -> None:
        stored = await backend.read_from(context.session.id, 0)
        durable_at_step.append([e.type for e in stored])
        await downstream(context)

    runtime.hooks.wrap(AGENT_POST_STEP, annotate)  # before the policy: inside its checkpoint
    runtime.install(checkpoint_policy)
    runtime.hooks.wrap(AGENT_POST_STEP, observe)  # after: sees what the checkpoint wrote
    await agent.run_turn("task")
    first = durable_at_step[0]
    assert first[-1] == "plugin/step-note"
    assert first[-2] == "tool/result"
    await backend.aclose()


async def test_a_failed_post_step_flush_fails_the_turn_before_another_request() -> None:
    runtime, session, agent, model, _ = stack(corpus_script(1))
    runtime.install(checkpoint_policy)
    flushes = 0

    async def fail_fourth(session: Session) -> None:
        nonlocal flushes
        flushes += 1
        if flushes == 4:  # the request, two tool calls, then the post-step checkpoint
            raise OSError("disk full")

    runtime.hooks.listen("session/flush", fail_fourth)
    reason = await agent.run_turn("task")
    assert reason["kind"] == "error"
    assert "disk full" in reason["error"]["message"]
    assert len(model.requests) == 1  # no second request after the failed checkpoint
    assert [e.type for e in session.events][-2:] == ["step/end", "turn/end"]


async def test_concurrent_tool_checkpoints_share_one_drain(tmp_path: Path) -> None:
    runtime = AgentRuntime()
    backend = JsonlPersistence(tmp_path)
    runtime.install(backend)
    runtime.install(checkpoint_policy)
    runtime.models.register(
        "s",
        ScriptedModel(
            [
                ScriptedStep(calls=[ScriptedCall(f"c{i}", "t", ["{}"]) for i in range(6)]),
                ScriptedStep(text=["ok"]),
            ]
        ),
    )

    async def body(args: Any, call: ToolCall) -> str:
        await asyncio.sleep(0)
        return call.call_id

    runtime.tools.register("t", "t", {"type": "object"}, body)
    session = runtime.sessions.create("c")
    await runtime.agent(session, model="s/m").run_turn("go")
    stored = await backend.read_from("c", 0)
    assert [e.seq for e in stored] == list(range(len(session.events)))
    assert [e.encode() for e in stored] == [e.encode() for e in session.events]
    await backend.aclose()
