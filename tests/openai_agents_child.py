"""A process that runs the real OpenAI Agents SDK ``Runner`` on an ``EventLogSession`` with a
scripted model and dies by SIGKILL inside a tool body (``--crash``), or runs to the end.

    python -m tests.openai_agents_child STORE ID BODY_LOG [--streamed] [--crash]

The tool ``send_email`` appends one line to BODY_LOG before anything else, so the parent can
tell whether (and how often) a body ran.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
from pathlib import Path

from agents import Agent, Runner, function_tool
from agents.testing import ScriptedModel, assistant_message, function_call

from agent_session.integrations.openai_agents import DurableRunHooks, EventLogSession


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("store")
    parser.add_argument("id")
    parser.add_argument("body_log")
    parser.add_argument("--streamed", action="store_true")
    parser.add_argument("--crash", action="store_true")
    args = parser.parse_args()

    @function_tool
    async def send_email(to: str) -> str:
        """Send an email."""
        with Path(args.body_log).open("a") as log:
            log.write(f"{to}\n")
            log.flush()
            os.fsync(log.fileno())
        if args.crash:
            print("failpoint tool", flush=True)
            os.kill(os.getpid(), signal.SIGKILL)
        return f"sent to {to}"

    model = ScriptedModel(
        [
            [
                assistant_message("Sending.", item_id="msg_1"),
                function_call("send_email", {"to": "a@b.c"}, call_id="call_1"),
            ],
            [assistant_message("Done.", item_id="msg_2")],
        ]
    )
    agent = Agent(name="mailer", model=model, tools=[send_email])
    async with await EventLogSession.open(args.store, args.id) as session:
        hooks = DurableRunHooks(session)
        if args.streamed:
            result = Runner.run_streamed(agent, "email a@b.c", session=session, hooks=hooks)
            async for _ in result.stream_events():
                pass
        else:
            result = await Runner.run(agent, "email a@b.c", session=session, hooks=hooks)
        print("final", result.final_output, flush=True)


if __name__ == "__main__":
    asyncio.run(main())
