"""The reference stack assembled: a backend (``JsonlPersistence``, or ``SqlitePersistence``
for a ``sqlite:///`` store) + ``checkpoint_policy`` + the reference loop + a ``ScriptedModel``
with two tools (``read_file``, read-only and parallel-safe; ``write_file``, a side effect,
exclusive). Used by the demo, the crash child and the tests."""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from agent_session.agent_loop import AgentRuntime
from agent_session.agent_loop.scripted import ScriptedCall, ScriptedModel, ScriptedStep
from agent_session.agent_loop.tools import ToolCall
from agent_session.checkpoints import checkpoint_policy
from agent_session.persistence_jsonl import FileOps
from agent_session.session.live.hooks import Disposer
from agent_session.session.persistence.service import SessionPersistence
from agent_session.stores import parse_store

__all__ = ["MODEL", "SYSTEM", "Stack", "open_stack", "turn_script", "workdir_of"]

MODEL = "scripted/scripted-1"
"""The model the stack's agents use."""
SYSTEM = "You are an AI agent powered by DeepSeek Harness."
"""The system prompt of the stack's agents."""

ToolHook = Callable[[str, ToolCall], Any]


_CONTENT = {"write_file": [',"content', '":"hello"}']}
"""The rest of a call's streamed arguments after its path (a read has none)."""


def turn_script(
    turn: int, *, calls: tuple[str, ...] = ("read_file", "write_file")
) -> list[ScriptedStep]:
    """A turn's two model responses: reasoning, text and the given tool calls; then an
    answer. Call ids are ``call-<turn>-<n>``."""
    scripted = [
        ScriptedCall(
            f"call-{turn}-{n + 1}",
            name,
            ['{"path":"notes-', f'{turn}-{n + 1}.txt"', *_CONTENT.get(name, ["}"])],
        )
        for n, name in enumerate(calls)
    ]
    return [
        ScriptedStep(
            reasoning=["Think", "ing ", "hard."],
            text=["Let me ", "check ", "that."],
            calls=scripted,
            usage=(100, 20),
        ),
        ScriptedStep(text=["All ", "done ", f"(turn {turn})."], usage=(120, 8)),
    ]


@dataclass
class Stack:
    """A runtime wired with a backend, the policy, the model and the tools."""

    runtime: AgentRuntime
    backend: SessionPersistence
    model: ScriptedModel
    workdir: str
    """Where ``write_file`` writes (the side effect)."""
    uninstall_policy: Disposer | None

    async def close(self) -> None:
        """Flush everything and release the backend."""
        await self.backend.aclose()


def workdir_of(store: str) -> str:
    """Where the tools of a stack over ``store`` work by default: beside a JSONL root or a
    SQLite file (``<store>-workdir``); for a PostgreSQL database, a directory of the
    system's temporary directory named after the database's URL."""
    spec = parse_store(store)
    if spec.kind == "postgres":
        digest = hashlib.sha256(spec.path.encode()).hexdigest()[:12]
        return os.path.join(tempfile.gettempdir(), f"agent-session-workdir-{digest}")
    return spec.path.rstrip(os.sep) + "-workdir"


def open_stack(
    root: str | os.PathLike[str],
    script: list[ScriptedStep],
    *,
    policy: bool = True,
    window_ms: int = 200,
    tool_hook: ToolHook | None = None,
    workdir: str | None = None,
    ops: FileOps | None = None,
    compression: str = "none",
) -> Stack:
    """Assemble the reference stack over the store ``root``: a JSONL directory, or a SQLite
    database as ``sqlite:///path.db``. ``tool_hook(name, call)`` runs at the start of every
    tool body (failpoints live there). The tools work in ``workdir`` (default: a sibling of
    the store named ``<store>-workdir``); ``ops`` replaces a JSONL backend's system calls
    (fault injection, recording); ``compression`` is the encoding of a new JSONL session's
    log (``none`` or ``zstd``; a stored one keeps its own)."""
    runtime = AgentRuntime()
    store = parse_store(os.fspath(root))
    options: dict[str, Any] = {"write_batch_max_delay_ms": window_ms}
    if ops is not None:
        options["ops"] = ops  # (a JSONL store's; any other refuses it)
    if store.kind == "jsonl":
        options["new_session_compression"] = compression
    backend = store.open(**options)
    runtime.install(backend)
    uninstall = runtime.install(checkpoint_policy) if policy else None
    model = ScriptedModel(script)
    runtime.models.register("scripted", model)
    if workdir is None:
        workdir = workdir_of(store.url)

    async def read_file(args: Any, call: ToolCall) -> str:
        if tool_hook is not None:
            await _maybe_await(tool_hook("read_file", call))
        path = os.path.join(workdir, os.path.basename(str(args.get("path", ""))))
        try:
            with open(path, encoding="utf-8") as f:
                return f.read()
        except FileNotFoundError:
            return f"(no such file: {os.path.basename(path)})"

    async def write_file(args: Any, call: ToolCall) -> str:
        if tool_hook is not None:
            await _maybe_await(tool_hook("write_file", call))
        os.makedirs(workdir, exist_ok=True)
        name = os.path.basename(str(args.get("path", "out.txt")))
        with open(os.path.join(workdir, name), "w", encoding="utf-8") as f:
            f.write(f"{args.get('content', '')} (idempotency key {call.call_id})\n")
        return f"wrote {name}"

    schema = {
        "type": "object",
        "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
    }
    runtime.tools.register("read_file", "Read a file from the work directory.", schema, read_file)
    runtime.tools.register(
        "write_file", "Write a file in the work directory.", schema, write_file, exclusive=True
    )
    return Stack(runtime, backend, model, workdir, uninstall)


async def _maybe_await(value: Any) -> None:
    if hasattr(value, "__await__"):
        await value
