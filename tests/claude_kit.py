"""A scripted Claude Code CLI for the Claude Agent SDK's own ``query()``: a ``Transport`` that
answers the SDK's control handshake and, for each prompt, emits what the CLI would: the
transcript entries of the turn as ``transcript_mirror`` frames (what the SDK hands a
``SessionStore``), the assistant message, and the result. No process, no network."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
from claude_agent_sdk import ClaudeAgentOptions, SessionStore, query
from claude_agent_sdk._internal.transport import Transport

PROJECT = "-work-project"
MODEL = "claude-scripted"


def turn_entries(session: str, prompt: str, n: int, parent: str | None) -> list[dict[str, Any]]:
    """A turn as the CLI writes it: the prompt, the model's text and ``tool_use`` (two
    entries of one API message), the tool's result, and the model's answer."""

    def entry(kind: str, message: dict[str, Any], parent: str | None, **more: Any) -> Any:
        return {
            "type": kind,
            "uuid": str(uuid.uuid4()),
            "parentUuid": parent,
            "sessionId": session,
            "timestamp": f"2026-12-04T10:00:{n:02d}.000Z",
            "cwd": "/work/project",
            "isSidechain": False,
            "userType": "external",
            "message": message,
            **more,
        }

    call = f"toolu_{n:02d}"
    first = entry("user", {"role": "user", "content": prompt}, parent)
    api = {"id": f"msg_{n:02d}a", "type": "message", "role": "assistant", "model": MODEL}
    text = entry(
        "assistant", {**api, "content": [{"type": "text", "text": "Checking."}]}, first["uuid"]
    )
    use = {"type": "tool_use", "id": call, "name": "Read", "input": {"file_path": "a.txt"}}
    asked = entry("assistant", {**api, "content": [use]}, text["uuid"])
    answer = {"type": "tool_result", "tool_use_id": call, "content": "hello", "is_error": False}
    result = entry(
        "user",
        {"role": "user", "content": [answer]},
        asked["uuid"],
        toolUseResult={"stdout": "hello"},
    )
    final = {
        "id": f"msg_{n:02d}b",
        "type": "message",
        "role": "assistant",
        "model": MODEL,
        "content": [{"type": "text", "text": f"It says hello ({n})."}],
    }
    done = entry("assistant", final, result["uuid"])
    return [first, text, asked, result, done]


class ScriptedCli(Transport):
    """The CLI's side of the SDK's stream for one session (``session``, a UUID), mirroring
    each turn's entries into the transcript under ``config/projects``."""

    def __init__(self, config: Path, session: str) -> None:
        self.path = str(config / "projects" / PROJECT / f"{session}.jsonl")
        self.session = session
        self.written: list[dict[str, Any]] = []
        self._send, self._receive = anyio.create_memory_object_stream[dict[str, Any]](100)
        self._turns = 0

    async def connect(self) -> None:
        return None

    async def write(self, data: str) -> None:
        message = json.loads(data)
        if message.get("type") == "control_request":
            response = {"subtype": "success", "request_id": message["request_id"], "response": {}}
            await self._send.send({"type": "control_response", "response": response})
        elif message.get("type") == "user":
            self._turns += 1
            prompt = message["message"]["content"]
            parent = self.written[-1]["uuid"] if self.written else None
            entries = turn_entries(self.session, prompt, self._turns, parent)
            self.written += entries
            await self._send.send(
                {"type": "transcript_mirror", "filePath": self.path, "entries": entries}
            )
            await self._send.send(
                {
                    "type": "assistant",
                    "message": entries[-1]["message"],
                    "parent_tool_use_id": None,
                    "session_id": self.session,
                }
            )
            await self._send.send(
                {
                    "type": "result",
                    "subtype": "success",
                    "duration_ms": 1,
                    "duration_api_ms": 1,
                    "is_error": False,
                    "num_turns": 1,
                    "session_id": self.session,
                    "result": "done",
                }
            )

    async def read_messages(self) -> AsyncIterator[dict[str, Any]]:
        async with self._receive:
            async for message in self._receive:
                yield message

    async def close(self) -> None:
        await self._send.aclose()

    def is_ready(self) -> bool:
        return True

    async def end_input(self) -> None:
        await self._send.aclose()


async def converse(store: SessionStore, config: Path, session: str, prompts: list[str]) -> Any:
    """Run ``prompts`` through the SDK's ``query()`` against the scripted CLI, with
    ``store`` as the session store; the CLI (its transcript entries)."""
    cli = ScriptedCli(config, session)
    options = ClaudeAgentOptions(session_store=store, env={"CLAUDE_CONFIG_DIR": str(config)})

    async def stream() -> AsyncIterator[dict[str, Any]]:
        for prompt in prompts:
            yield {
                "type": "user",
                "message": {"role": "user", "content": prompt},
                "parent_tool_use_id": None,
                "session_id": session,
            }

    async for _ in query(prompt=stream(), options=options, transport=cli):
        pass
    return cli
