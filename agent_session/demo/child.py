"""The crash child: runs the reference stack and SIGKILLs itself at a named failpoint.

``python -m agent_session.demo.child ROOT SESSION_ID --mode MODE [--turns N] [--no-policy]
[--window MS] [--compression {none,zstd}] [--model PROVIDER/NAME]`` runs ``N`` complete
turns, then one more turn that dies at ``MODE`` (with ``--model``, a real model is asked to
read and write files, and ``failpoint-missed`` is printed if its last turn never reached
``MODE``):

- ``request``: inside the model adapter, after the request checkpoint, before any output;
- ``tool``: inside a ``write_file`` body (the only call of the step);
- ``parallel-tool``: inside the second of two tool bodies (``read_file`` completed first);
- ``midstream``: after several chunks, once a background write stored one of them;
- ``post-step``: right after the post-step checkpoint of the turn's first step;
- ``none``: the last turn completes.

It prints ``turn <n>`` as each turn starts. After every ``flush`` that returns, it prints
``durable <n> <sha256>``: the first ``n`` events, whose encoded lines hash to ``<sha256>``,
are on stable storage. Before dying it prints ``failpoint <mode>``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import os
import signal
import sys
from collections.abc import Sequence
from typing import Any

from agent_session.agent_loop.loop import AGENT_POST_STEP, StepContext
from agent_session.agent_loop.models import LLM_STREAM
from agent_session.agent_loop.tools import ToolCall
from agent_session.cli.commands import open_backend
from agent_session.demo.real_model import real_adapter, task
from agent_session.demo.stack import MODEL, SYSTEM, open_stack, turn_script
from agent_session.session import Session, SessionNotFoundError
from agent_session.stores import parse_store

__all__ = ["MODES", "digest", "main"]

MODES = ("none", "request", "tool", "parallel-tool", "midstream", "post-step")


def digest(events: Sequence[Any]) -> str:
    """SHA-256 over the encoded lines of ``events``."""
    h = hashlib.sha256()
    for event in events:
        h.update(event.encode() + b"\n")
    return h.hexdigest()


def die(mode: str) -> None:
    """Report the failpoint and SIGKILL this process (no cleanup, no flush)."""
    print(f"failpoint {mode}", flush=True)
    os.kill(os.getpid(), signal.SIGKILL)


async def until_stored(root: str, session_id: str, kind: str, window_ms: int) -> None:
    """Wait for the fact that a background write stored an event of type ``kind`` in the
    session's last turn (read back from the store, as another process would)."""
    reader = open_backend(parse_store(root), read_only=True)
    try:
        while True:
            with contextlib.suppress(SessionNotFoundError, FileNotFoundError):
                events = await reader.read_from(session_id, 0)
                starts = [i for i, e in enumerate(events) if e.type == "turn/start"]
                if starts and any(e.type == kind for e in events[starts[-1] :]):
                    return
            await asyncio.sleep(window_ms / 1000)  # (the next look; the write is the fact)
    finally:
        await reader.aclose()


async def run(
    root: str,
    session_id: str,
    mode: str,
    turns: int,
    policy: bool,
    window_ms: int,
    compression: str = "none",
    model: str | None = None,
) -> None:
    crash_turn = turns + 1
    calls = {"tool": ("write_file",), "parallel-tool": ("read_file", "write_file")}
    script = [
        step
        for t in range(1, crash_turn + 1)
        for step in turn_script(
            t,
            calls=calls.get(mode, ("read_file", "write_file"))
            if t == crash_turn
            else ("read_file", "write_file"),
        )
    ]
    crashing = False

    def tool_hook(name: str, call: ToolCall) -> None:
        if crashing and mode in ("tool", "parallel-tool") and name == "write_file":
            die(mode)

    stack = open_stack(
        root,
        script if model is None else [],
        policy=policy,
        window_ms=window_ms,
        tool_hook=tool_hook,
        compression=compression,
    )
    runtime = stack.runtime
    session = runtime.sessions.create(session_id)
    original_flush = runtime.sessions.flush

    async def reporting_flush(target: Session) -> bool:
        events = target.events
        result = await original_flush(target)
        if target is session:
            print(f"durable {len(events)} {digest(events)}", flush=True)
        return result

    runtime.sessions.flush = reporting_flush  # type: ignore[method-assign, assignment]

    async def on_chunk(number: int, request: Any, chunk: Any) -> None:
        if not crashing:
            return
        if mode == "request" and chunk is None:
            die(mode)
        if mode == "midstream" and chunk is not None and chunk.get("type") == "text-delta":
            await until_stored(root, session_id, "assistant/chunk", window_ms)
            die(mode)

    stack.model.on_chunk = on_chunk
    if model is not None:
        provider, adapter = real_adapter(model)
        runtime.models.register(provider, adapter)

        async def failing(request: Any, downstream: Any) -> Any:  # (inside the checkpoint)
            if crashing and mode == "request":
                die(mode)
            async for chunk in downstream(request):
                await on_chunk(1, request, chunk)
                yield chunk

        runtime.hooks.wrap(LLM_STREAM, failing)

    async def post_step(context: StepContext, downstream: Any) -> None:
        if crashing and mode == "post-step":
            die(mode)
        await downstream(context)

    runtime.hooks.wrap(AGENT_POST_STEP, post_step)  # after the policy: inside its checkpoint
    agent = runtime.agent(session, model=model or MODEL, system=SYSTEM)
    for turn in range(1, crash_turn + 1):
        crashing = turn == crash_turn
        print(f"turn {turn}", flush=True)
        await agent.run_turn(f"task {turn}" if model is None else task(turn))
    if mode != "none":
        print("failpoint-missed", flush=True)
    await stack.close()


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point (see the module docstring)."""
    parser = argparse.ArgumentParser(prog="python -m agent_session.demo.child")
    parser.add_argument("root")
    parser.add_argument("session_id")
    parser.add_argument("--mode", choices=MODES, default="none")
    parser.add_argument("--turns", type=int, default=1, help="complete turns before the last")
    parser.add_argument("--no-policy", action="store_true")
    parser.add_argument("--window", type=int, default=200, help="batching window in ms")
    parser.add_argument("--compression", choices=["none", "zstd"], default="none")
    parser.add_argument("--model", help="a real model (provider/name) instead of the script")
    args = parser.parse_args(argv)
    asyncio.run(
        run(
            args.root,
            args.session_id,
            args.mode,
            args.turns,
            not args.no_policy,
            args.window,
            args.compression,
            args.model,
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
