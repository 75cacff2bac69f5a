"""An agent with a spend budget, as a real process: ``python -m tests.budget_child STORE
OUTBOX [--die POINT@N] [--turns K]``.

Runs turns ``turn 1 .. turn K`` (skipping the ones the log already has; a crashed turn is
first finished with ``agent.resume()``) against a scripted model whose request ``n`` (from
0, counted across runs by the outbox) answers with usage ``(100 + 10 n, 5 + n)`` and asks
for the ``look`` tool on even ``n``; every request sends ``maxTokens`` 40. Each request
writes ``request <n>`` to ``OUTBOX`` before its first chunk, each answered one ``answered
<n>`` after its last. Prints ``done``.

``POINT@N`` SIGKILLs the process around request ``N``: ``sent`` (the request went out, no
chunk came back), ``streaming`` (after its first text delta), ``answered`` (its last chunk,
the usage among them, was read; no message recorded), ``recorded`` (its message is durable:
inside the tool body it asked for).
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
    set_budget,
)
from tests import outbox

STORE, OUTBOX = sys.argv[1], sys.argv[2]
DIE = sys.argv[sys.argv.index("--die") + 1] if "--die" in sys.argv else "none@-1"
TURNS = int(sys.argv[sys.argv.index("--turns") + 1]) if "--turns" in sys.argv else 3
POINT, AT = DIE.split("@")[0], int(DIE.split("@")[1])


def die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def step(n: int) -> ScriptedStep:
    calls = [ScriptedCall(f"c-{n}", "look", ['{"n": ', f"{n}}}"])] if n % 2 == 0 else []
    return ScriptedStep(text=[f"answer {n} ", "done."], calls=calls, usage=(100 + 10 * n, 5 + n))


def requests_made() -> int:
    return sum(1 for line in outbox.effects(OUTBOX) if line.startswith("request "))


async def main() -> None:
    first = requests_made()
    script = [step(n) for n in range(first, first + 3 * TURNS + 2)]

    async def on_chunk(number: int, request: object, chunk: dict | None) -> None:
        n = first + number
        if chunk is None:
            outbox.record(OUTBOX, f"request {n}")
            if ("sent", n) == (POINT, AT):
                die()
        elif chunk.get("type") == "text-delta" and ("streaming", n) == (POINT, AT):
            die()
        elif chunk.get("type") == "finish":
            outbox.record(OUTBOX, f"answered {n}")
            if ("answered", n) == (POINT, AT):
                die()

    async with AgentRuntime() as runtime:
        runtime.install(open_store(STORE))
        runtime.install(checkpoint_policy)

        @runtime.tools.tool(effect="read")
        async def look(args: dict, call: object) -> str:
            """Look."""
            if ("recorded", args["n"]) == (POINT, AT):
                die()
            return "seen"

        runtime.models.register("demo", ScriptedModel(script, on_chunk, max_tokens=40))
        session = await runtime.sessions.open_or_create("job")
        if not any(e.type == "budget/set" for e in session.events):
            set_budget(session, {"totalTokens": 100_000})
        agent = runtime.agent(session, model="demo/m")
        await agent.resume()
        done = sum(
            1 for e in session.events if e.type == "agent/inbox/spliced" and e.data.get("inserted")
        )
        for turn in range(done + 1, TURNS + 1):
            await agent.run_turn(f"turn {turn}")
    print("done")


asyncio.run(main())
