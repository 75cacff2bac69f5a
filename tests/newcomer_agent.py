"""An agent written from the README's five steps alone, importing only ``agent_session``: the
first run is SIGKILLed inside its tool body, after the side effect; a second run resumes.

``python tests/newcomer_agent.py STORE OUTSIDE``: ``OUTSIDE`` is the file the tool's side
effect goes to (the outside world, keyed by the call id)."""

import asyncio
import os
import signal
import sys

from agent_session import (
    AgentRuntime,
    ScriptedCall,
    ScriptedModel,
    ScriptedStep,
    checkpoint_policy,
    open_store,
)

STORE, OUTSIDE = sys.argv[1], sys.argv[2]


async def main() -> None:
    async with AgentRuntime() as runtime:
        runtime.install(open_store(STORE))  # 1. a store ...
        runtime.install(checkpoint_policy)  # ... and the checkpoint policy

        # 5. the outside world deduplicates on the key: sending again is safe
        @runtime.tools.tool(description="Send an email.", exclusive=True, effect="idempotent")
        async def send_email(args, call):
            with open(OUTSIDE, "a") as outside:  # 3. keyed on the call id
                outside.write(f"{call.call_id} {args['to']}\n")
            if os.environ.get("DIE_IN_TOOL"):
                os.kill(os.getpid(), signal.SIGKILL)
            return "queued"

        session = await runtime.sessions.open_or_create("chat-1")  # 2.
        agent = runtime.agent(session, model="demo/scripted")
        crash = session.interrupted
        if crash is None:
            ask = ScriptedCall("call-1", "send_email", ['{"to": "ada@example.com"}'])
            steps = [ScriptedStep(calls=[ask]), ScriptedStep(text=["Sent."])]
            runtime.models.register("demo", ScriptedModel(steps))
            print(await agent.run_turn("Email Ada."))  # 4.
        else:
            print(f"interrupted turn {crash.turn}: unknown {list(crash.outcome_unknown)}")
            runtime.models.register("demo", ScriptedModel([ScriptedStep(text=["Sent."])]))
            print(await agent.resume())  # 4. settle the interrupted call, finish the job


asyncio.run(main())
