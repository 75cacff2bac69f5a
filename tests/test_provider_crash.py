"""Crash safety with real provider adapters: an agent on each adapter (the SDK client over
recorded SSE replies, ``tests/provider_child.py``) is SIGKILLed at the request, mid-stream and
inside a tool body, on JSONL and SQLite; a second process resumes it. The request after the
crash must pass the provider SDK's own request types, carry the repaired result, and the job
must finish."""

from __future__ import annotations

import functools
import json
import signal
import subprocess
from pathlib import Path
from typing import Any

import pydantic
import pytest

from agent_session.session.events.outcomes import TOOL_OUTCOME_UNKNOWN_TEXT
from tests.forkserver import run_module

pytestmark = pytest.mark.process

ROOT = Path(__file__).parent.parent
ADAPTERS = ["openai-chat", "openai-responses", "anthropic"]


def child(store: str, log: Path, adapter: str, *args: str) -> subprocess.CompletedProcess[str]:
    return run_module("tests.provider_child", store, str(log), adapter, *args, server="frameworks")


def valid_for(adapter: str, body: dict[str, Any]) -> list[Any]:
    """Check ``body`` with the provider SDK's own request types (the whole body, and its
    message list item by item: pydantic reads an ``Iterable`` field lazily); return the
    messages."""
    whole, items, key = _types(adapter)
    whole.validate_python(body)
    messages: list[Any] = items.validate_python(body[key])
    return messages


@functools.cache
def _types(adapter: str) -> tuple[pydantic.TypeAdapter[Any], pydantic.TypeAdapter[Any], str]:
    """The request type of ``adapter``'s API, the type of its message list, and the list's
    key."""
    if adapter == "anthropic":
        from anthropic.types import MessageParam
        from anthropic.types.message_create_params import MessageCreateParamsStreaming

        whole, items, key = MessageCreateParamsStreaming, MessageParam, "messages"
    elif adapter == "openai-responses":
        from openai.types.responses import ResponseInputItemParam
        from openai.types.responses.response_create_params import ResponseCreateParamsStreaming

        whole, items, key = ResponseCreateParamsStreaming, ResponseInputItemParam, "input"
    else:
        from openai.types.chat import ChatCompletionMessageParam
        from openai.types.chat.completion_create_params import CompletionCreateParamsStreaming

        whole, items, key = CompletionCreateParamsStreaming, ChatCompletionMessageParam, "messages"
    return pydantic.TypeAdapter(whole), pydantic.TypeAdapter(list[items]), key  # type: ignore[valid-type]


def repaired_result(adapter: str, body: dict[str, Any]) -> str | None:
    """The text the request gives the ``pay`` call's result, if it has one."""
    if adapter == "anthropic":
        for message in body["messages"]:
            for block in message["content"]:
                if block.get("type") == "tool_result":
                    return str(block["content"][0]["text"])
    elif adapter == "openai-responses":
        for item in body["input"]:
            if item.get("type") == "function_call_output":
                return str(item["output"])
    else:
        for message in body["messages"]:
            if message["role"] == "tool":
                return str(message["content"])
    return None


@pytest.mark.sweep(share=0.35)
@pytest.mark.parametrize("kind", ["jsonl", "sqlite"])
@pytest.mark.parametrize("point", ["request", "midstream", "tool"])
@pytest.mark.parametrize("adapter", ADAPTERS)
def test_a_killed_agent_on_each_adapter_resumes_with_a_valid_request(
    tmp_path: Path, adapter: str, point: str, kind: str
) -> None:
    store = str(tmp_path / "s") if kind == "jsonl" else f"sqlite:///{tmp_path}/s.db"
    log = tmp_path / "requests.jsonl"
    killed = child(store, log, adapter, "--die", point)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    done = child(store, log, adapter)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"kind": "completed"}
    bodies = [json.loads(line) for line in log.read_text().splitlines()]
    after = bodies[-1]
    valid_for(adapter, after)
    result = repaired_result(adapter, after)
    if point == "tool":  # the unsafe call whose body was killed: its unknown outcome
        assert result is not None
        assert TOOL_OUTCOME_UNKNOWN_TEXT in result
    elif point == "request":
        assert len(bodies) == 2  # the request that was killed, then the resumed one
        assert result is None
    for body in bodies:
        valid_for(adapter, body)
