"""The real OpenAI Agents SDK ``Runner`` on an ``EventLogSession``, killed inside a tool body,
then finished by ``resume_run``: ``python -m tests.sdk_settle_child STORE OUTBOX --effect
EFFECT --die {tool-before,tool-after,settle}``.

The first run's model asks for ``pay`` (declared ``EFFECT``), and after it ``notify``; the
process dies in ``pay``'s body, before or after its effect (``settle``: after, and again in
the body's run while settling). A later run calls ``resume_run``. Effects go to ``OUTBOX`` as
``<tool> <call id>`` lines; ``pay``'s probe reads them. Prints the final output, or
``nothing``."""

import asyncio
import os
import signal
import sys

from agents import Agent, function_tool, set_tracing_disabled
from agents.testing import ScriptedModel, assistant_message, function_call

from agent_session import DurableRunHooks, EventLogSession
from agent_session.agent_loop.effects import Applied, NotApplied
from agent_session.integrations.openai_agents import declare, resume_run
from tests import outbox

STORE, OUTBOX = sys.argv[1], sys.argv[2]
EFFECT = sys.argv[sys.argv.index("--effect") + 1]
DIE = sys.argv[sys.argv.index("--die") + 1]
STARTED, SETTLING = OUTBOX + ".started", OUTBOX + ".settling"
set_tracing_disabled(True)


def effects() -> list[str]:
    return outbox.effects(OUTBOX)


def record(line: str) -> None:
    outbox.record(OUTBOX, line)


async def main() -> None:
    first_run = not os.path.exists(STARTED)
    open(STARTED, "a").close()

    @function_tool
    async def pay(amount: int) -> str:
        """Pay."""
        if first_run and DIE == "tool-before":
            os.kill(os.getpid(), signal.SIGKILL)
        record("pay call-pay")
        if first_run and DIE in ("tool-after", "settle"):
            os.kill(os.getpid(), signal.SIGKILL)
        if not first_run and DIE == "settle" and not os.path.exists(SETTLING):
            open(SETTLING, "w").close()
            os.kill(os.getpid(), signal.SIGKILL)
        return f"paid {amount}"

    @function_tool
    async def notify() -> str:
        """Notify."""
        record("notify call-notify")
        return "notified"

    async def probe(call):
        return (
            Applied("paid (found at the provider)") if "pay call-pay" in effects() else NotApplied()
        )

    effect = "unsafe" if EFFECT.startswith("unsafe") else EFFECT
    declare(pay, effect, reconcile=probe if EFFECT == "unsafe-probe" else None)
    declare(notify, "unsafe")
    steps = [[function_call("pay", {"amount": 5}, call_id="call-pay")]] if first_run else []
    steps += [
        [function_call("notify", {}, call_id="call-notify")],
        [assistant_message("Done.", item_id="msg-done")],
    ]
    agent = Agent(name="payer", model=ScriptedModel(steps), tools=[pay, notify])
    async with await EventLogSession.open(STORE, "job") as session:
        if first_run:
            from agents import Runner

            result = await Runner.run(
                agent, "Pay 5, then notify.", session=session, hooks=DurableRunHooks(session)
            )
        else:
            result = await resume_run(agent, session)
        print(result.final_output if result is not None else "nothing")


asyncio.run(main())
