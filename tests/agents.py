"""A small reference stack for loop and policy tests: a runtime with the scripted model and
two tools (``read_file`` parallel-safe, ``write_file`` exclusive), as in the corpus runs."""

from __future__ import annotations

from typing import Any

from agent_session.agent_loop import AgentRuntime
from agent_session.agent_loop.loop import Agent
from agent_session.agent_loop.scripted import ScriptedCall, ScriptedModel, ScriptedStep
from agent_session.agent_loop.tools import ToolCall
from agent_session.session import Session

SYSTEM = "You are an AI agent powered by DeepSeek Harness."


def corpus_script(turns: int = 2) -> list[ScriptedStep]:
    """The steps of the corpus's ``complete:2`` run: a reasoning+text+two-calls step, then a
    text step, per turn."""
    steps: list[ScriptedStep] = []
    for turn in range(turns):
        steps.append(
            ScriptedStep(
                reasoning=["Think", "ing ", "hard."],
                text=["Let me ", "check ", "that ", "— ünïcödé ✓ ", '"quoted"\n'],
                calls=[
                    ScriptedCall(
                        f"call-{2 * turn + 1}",
                        "read_file",
                        ['{"path":"/tmp/f', f'{2 * turn + 1}.txt","content', '":"x"}'],
                    ),
                    ScriptedCall(
                        f"call-{2 * turn + 2}",
                        "write_file",
                        ['{"path":"/tmp/f', f'{2 * turn + 2}.txt","content', '":"x"}'],
                    ),
                ],
                usage=(100, 20),
            )
        )
        steps.append(ScriptedStep(text=["All ", "done ", "now."]))
    return steps


def stack(
    steps: list[ScriptedStep], *, session_id: str = "agent"
) -> tuple[AgentRuntime, Session, Agent, ScriptedModel, list[str]]:
    """A runtime with the scripted model and the two corpus tools; ``calls`` records every
    tool body that ran, as ``name:call_id``."""
    runtime = AgentRuntime()
    model = ScriptedModel(steps)
    runtime.models.register("scripted", model)
    calls: list[str] = []

    async def read_file(args: Any, call: ToolCall) -> str:
        calls.append(f"read_file:{call.call_id}")
        return f"ok read_file {args['path']}"

    async def write_file(args: Any, call: ToolCall) -> str:
        calls.append(f"write_file:{call.call_id}")
        return f"ok write_file {args['path']}"

    schema = {"type": "object", "properties": {"path": {"type": "string"}}}
    runtime.tools.register("read_file", "read_file", schema, read_file)
    runtime.tools.register("write_file", "write_file", schema, write_file, exclusive=True)
    session = runtime.sessions.create(session_id)
    agent = runtime.agent(session, model="scripted/scripted-1", system=SYSTEM)
    return runtime, session, agent, model, calls
