"""A child for the live OpenTelemetry exporter's crash test.

``python -m tests.otel_child STORE ENDPOINT crash`` runs the scripted agent with
``otel_exporter`` installed: one complete turn (printing ``turn 1 sent`` once the exporter
drained it), then a turn that SIGKILLs itself inside its ``write_file`` body (printing
``dying``). ``... restart`` opens the stack again with the exporter, waits for its catch-up
and prints ``caught up``.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys

from agent_session.agent_loop.tools import ToolCall
from agent_session.demo.stack import MODEL, SYSTEM, open_stack, turn_script
from agent_session.otel.live import otel_exporter


async def main(store: str, endpoint: str, phase: str) -> None:
    crashing = False

    def tool_hook(name: str, call: ToolCall) -> None:
        if crashing and name == "write_file":
            print("dying", flush=True)
            os.kill(os.getpid(), signal.SIGKILL)

    script = [*turn_script(1), *turn_script(2, calls=("write_file",))] if phase == "crash" else []
    stack = open_stack(store, script, tool_hook=tool_hook)
    exporter = otel_exporter(store, endpoint, timeout=5)
    stack.runtime.install(exporter)
    if phase == "crash":
        session = stack.runtime.sessions.create("traced")
        agent = stack.runtime.agent(session, model=MODEL, system=SYSTEM)
        await agent.run_turn("task 1")
        await exporter.drain()
        print("turn 1 sent", flush=True)
        crashing = True
        await agent.run_turn("task 2")
    else:
        await exporter.drain()
        print("caught up", flush=True)
    await stack.close()


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:4]))
