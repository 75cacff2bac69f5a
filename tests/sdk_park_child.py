"""The real OpenAI Agents SDK ``Runner`` on an ``EventLogSession`` with a ``needs_approval``
tool, as a real process: ``python -m tests.sdk_park_child STORE OUTBOX [--die]``.

The first run's model asks for ``pay`` (needs approval) and ``notify`` at once: the SDK runs
``notify`` and stops for ``pay``'s approval; ``park_run`` makes the approval durable, then the
process prints the parked call ids and (``--die``) SIGKILLs itself. A later run calls
``resume_run``. Effects and model requests go to ``OUTBOX`` as lines; prints the final output,
or ``nothing``."""

import asyncio
import os
import signal
import sys

from agents import Agent, Runner, function_tool, set_tracing_disabled
from agents.testing import ScriptedModel, assistant_message, function_call

from agent_session import DurableRunHooks, EventLogSession
from agent_session.integrations.openai_agents import park_run, resume_run
from tests import outbox

STORE, OUTBOX = sys.argv[1], sys.argv[2]
STARTED = OUTBOX + ".started"
set_tracing_disabled(True)


def record(line: str) -> None:
    outbox.record(OUTBOX, line)


class Counted(ScriptedModel):
    """The SDK's scripted model, writing each request to the outbox."""

    async def get_response(self, *args, **kwargs):
        record("request")
        return await super().get_response(*args, **kwargs)


async def main() -> None:
    first_run = not os.path.exists(STARTED)
    open(STARTED, "a").close()

    @function_tool(needs_approval=True)
    async def pay(amount: int) -> str:
        """Pay."""
        record("pay call-pay")
        return f"paid {amount}"

    @function_tool
    async def notify() -> str:
        """Notify."""
        record("notify call-notify")
        return "notified"

    steps = []
    if first_run:
        steps.append(
            [
                function_call("pay", {"amount": 5}, call_id="call-pay"),
                function_call("notify", {}, call_id="call-notify"),
            ]
        )
    steps.append([assistant_message("Done.", item_id="msg-done")])
    agent = Agent(name="payer", model=Counted(steps), tools=[pay, notify])
    async with await EventLogSession.open(STORE, "job") as session:
        if first_run:
            result = await Runner.run(
                agent, "Pay 5, then notify.", session=session, hooks=DurableRunHooks(session)
            )
            parked = await park_run(result, session)
            print(" ".join(call.call_id for call in parked))
            sys.stdout.flush()
            if "--die" in sys.argv:
                os.kill(os.getpid(), signal.SIGKILL)
            return
        result = await resume_run(agent, session)
        print(result.final_output if result is not None else "nothing")


asyncio.run(main())
