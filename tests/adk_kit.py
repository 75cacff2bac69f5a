"""A scripted model and tools for the Google ADK tests: ADK's real ``Runner`` and ``LlmAgent``
with a ``BaseLlm`` of the tests' own (no network), and helpers that compare sessions."""

from __future__ import annotations

import os
from collections.abc import AsyncGenerator
from pathlib import Path
from typing import Any

from google.adk.agents import LlmAgent
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.runners import Runner
from google.adk.sessions.base_session_service import BaseSessionService
from google.adk.sessions.session import Session
from google.adk.tools.tool_context import ToolContext
from google.genai import types
from pydantic import Field

APP = "calc-app"


class Scripted(BaseLlm):
    """Answers each request with the next scripted list of parts; keeps every request."""

    model: str = "scripted"
    script: list[list[types.Part]] = Field(default_factory=list)
    requests: list[LlmRequest] = Field(default_factory=list)

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        self.requests.append(llm_request)
        parts = self.script.pop(0)
        yield LlmResponse(content=types.Content(role="model", parts=parts))


def call(name: str, **args: Any) -> types.Part:
    return types.Part(function_call=types.FunctionCall(name=name, args=args))


def text(value: str) -> types.Part:
    return types.Part(text=value)


def add(a: int, b: int, tool_context: ToolContext) -> dict[str, int]:
    """Add two numbers (and remember the sum for the user)."""
    tool_context.state["user:last_sum"] = a + b
    tool_context.state["temp:scratch"] = a
    tool_context.state["app:calls"] = tool_context.state.get("app:calls", 0) + 1
    return {"sum": a + b}


def write_file(path: str) -> dict[str, str]:
    """Append a line to a file (its side effect is counted by the crash test)."""
    with open(path, "a") as file:
        file.write("ran\n")
    print("in-tool", flush=True)
    hold = os.environ.get("ADK_TEST_HOLD")
    if hold:  # the crash test's child: wait here to be killed
        os.read(int(hold), 1)
    return {"written": path}


def runner(service: BaseSessionService, script: list[list[types.Part]]) -> tuple[Runner, Scripted]:
    model = Scripted(script=list(script), requests=[])
    agent = LlmAgent(name="calc", model=model, tools=[add, write_file], output_key="answer")
    return Runner(app_name=APP, agent=agent, session_service=service), model


async def say(run: Runner, user: str, session_id: str, words: str) -> None:
    message = types.Content(role="user", parts=[types.Part(text=words)])
    async for _ in run.run_async(user_id=user, session_id=session_id, new_message=message):
        pass


SCRIPT = [
    [call("add", a=1, b=2), call("add", a=3, b=4)],
    [text("The sums are 3 and 7.")],
    [text("Bye.")],
]


def shape(session: Session) -> list[dict[str, Any]]:
    """A session's events without what differs between two runs of one script (ids,
    times, ADK's generated call ids)."""
    calls: dict[str, str] = {}
    out = []
    for event in session.events:
        dump = event.model_dump(mode="json", exclude={"id", "timestamp", "invocation_id"})
        for part in (dump.get("content") or {}).get("parts") or ():
            for key in ("function_call", "function_response"):
                if part.get(key):
                    part[key]["id"] = calls.setdefault(part[key]["id"], f"call-{len(calls)}")
        out.append(dump)
    return out


def requests_are_valid(model: Scripted) -> list[str]:
    """Problems of the last request a model got: a function call without exactly one
    response after it, or a response to no call."""
    problems: list[str] = []
    asked: list[str] = []
    answered: list[str] = []
    for content in model.requests[-1].contents:
        for part in content.parts or ():
            if part.function_call:
                asked.append(str(part.function_call.id))
            if part.function_response:
                answered.append(str(part.function_response.id))
    for id in asked:
        if answered.count(id) != 1:
            problems.append(f"call {id} has {answered.count(id)} responses")
    problems += [f"response {id} answers no call" for id in answered if id not in asked]
    return problems


def lines(path: Path) -> int:
    return len(path.read_text().splitlines()) if path.exists() else 0
