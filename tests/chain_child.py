"""An agent writing a hash-chained log, as a real process: ``python -m tests.chain_child STORE
--die-at SEQ [--turns K] [--fork]``.

Opens (or resumes) session ``job`` of a store opened with ``integrity=True`` and runs ``K``
turns of streamed text and a tool call, SIGKILLing itself when the log reaches ``SEQ``
events (an observer of every append, so the kill lands anywhere relative to the writes: with
events pending, mid-batch, after a checkpoint). ``--fork``: first fork ``job`` as ``job-fork``
in the store (both chained). Prints ``done`` when it was not killed.
"""

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
from agent_session.session.live.hooks import SESSION_EVENT

STORE = sys.argv[1]
DIE_AT = int(sys.argv[sys.argv.index("--die-at") + 1]) if "--die-at" in sys.argv else -1
TURNS = int(sys.argv[sys.argv.index("--turns") + 1]) if "--turns" in sys.argv else 3


def script(turns: int) -> list[ScriptedStep]:
    steps = []
    for n in range(turns):
        call = ScriptedCall(f"c{os.getpid()}-{n}", "look", ['{"n": ', f"{n}}}"])
        steps.append(
            ScriptedStep(text=["Look", "ing ", "at ", f"{n}."], calls=[call], usage=(9, 3))
        )
        steps.append(ScriptedStep(text=["Se", "en ", "it", "."], usage=(12, 4)))
    return steps


async def main() -> None:
    async with AgentRuntime() as runtime:
        runtime.install(open_store(STORE, integrity=True))
        runtime.install(checkpoint_policy)

        def watch(session, event) -> None:
            if DIE_AT >= 0 and session.seq + 1 >= DIE_AT:
                os.kill(os.getpid(), signal.SIGKILL)

        runtime.hooks.observe(SESSION_EVENT, watch)

        @runtime.tools.tool(effect="read")
        async def look(args: dict, call: object) -> str:
            """Look."""
            return f"seen {args['n']}"

        runtime.models.register("demo", ScriptedModel(script(TURNS + 3)))
        session = await runtime.sessions.open_or_create("job")
        agent = runtime.agent(session, model="demo/m")
        await agent.resume()
        for turn in range(TURNS):
            await agent.run_turn(f"turn {turn}")
        if "--fork" in sys.argv:
            child = runtime.sessions.fork(session, child_id="job-fork")
            await runtime.agent(child, model="demo/m").run_turn("in the fork")
    print("done")


asyncio.run(main())
