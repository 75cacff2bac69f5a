"""An agent whose ``pay`` tool needs approval, as a real process: ``python -m tests.park_child
STORE OUTBOX [--die POINT] [--expires SECONDS] [--answer OUTCOME]``.

The first run asks for ``lookup`` (read, no approval), ``pay`` (asks: ``moves money``) and
``notify`` (no approval), with approvals mounted with ``park=True``. A later run opens the
session and calls ``agent.resume()``. Every tool effect and every model request goes to
``OUTBOX`` as a line (``lookup <id>``, ``pay <id>``, ``notify <id>``, ``request <n>``): the
outside world. Prints the run's result as JSON (``null`` for nothing to do).

``POINT`` (SIGKILL there, in the run it applies to):

- ``parked``: after ``run_turn`` returned the parked value; ``none``: a clean exit after it;
- ``before-ask``: in ``tools/pre-execute`` for ``pay``, before it answers ``ask``;
- ``in-answerer``: in an in-process answerer, once the ask is durable (it never answers);
- ``mark``: in a resume, inside ``pay``'s body before its effect (the mark is durable);
- ``effect``: in a resume, inside ``pay``'s body after its effect.

``--answer OUTCOME`` mounts an in-process answerer that decides at once (no parking).
``--hold``: once parked, stay alive (the live writer of the session) until a line arrives on
stdin. ``--barrier``: print ``ready`` and wait for a line on stdin before opening the session
(a test lets two resumers go at once); a resumer the other holds the session against prints
``{"error": ...}``.
"""

import asyncio
import json
import os
import signal
import sys

from agent_session import (
    AgentRuntime,
    checkpoint_policy,
    open_store,
    user_approval,
)
from agent_session.session import SessionCollisionError
from tests import outbox
from tests.together import wait_for_go

STORE, OUTBOX = sys.argv[1], sys.argv[2]


def option(name, default=None):
    return sys.argv[sys.argv.index(name) + 1] if name in sys.argv else default


DIE = option("--die", "none")
EXPIRES = option("--expires")
ANSWER = option("--answer")


def die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def record(line: str) -> None:
    outbox.record(OUTBOX, line)


CALLS = [
    ("c-look", "lookup", {"q": "a"}),
    ("c-pay", "pay", {"amount": 5}),
    ("c-notify", "notify", {}),
]


class Model:
    """Asks for the three calls at the first request of the session, else answers."""

    async def stream(self, request):
        record(f"request {sum(1 for e in outbox.effects(OUTBOX) if e.startswith('request'))}")
        if not any(message["role"] == "assistant" for message in request.messages):
            for index, (id, name, args) in enumerate(CALLS):
                call = {"id": id, "name": name}
                arguments = json.dumps(args)
                yield {"type": "block-start", "index": index, "blockType": "tool-call", **call}
                yield {
                    "type": "tool-call-delta",
                    "index": index,
                    **call,
                    "argumentsDelta": arguments,
                }
                block = {"type": "tool-call", **call, "arguments": arguments}
                yield {"type": "block-end", "index": index, "block": block}
            yield {"type": "finish", "reason": {"kind": "tool-calls"}}
            return
        yield {"type": "block-start", "index": 0, "blockType": "text"}
        yield {"type": "text-delta", "index": 0, "text": "Done."}
        yield {"type": "block-end", "index": 0, "block": {"type": "text", "text": "Done."}}
        yield {"type": "finish", "reason": {"kind": "stop"}}


async def main() -> None:
    async with AgentRuntime() as runtime:
        runtime.install(open_store(STORE))
        runtime.install(checkpoint_policy)
        expires = float(EXPIRES) if EXPIRES else None
        runtime.install(user_approval(park=True, expires_after=expires))
        wait_for_go()
        try:
            session = await runtime.sessions.open_or_create("job")
        except SessionCollisionError as e:
            print(json.dumps({"error": f"SessionCollisionError: {e}"}))
            return
        first_run = len(session.events) == 0

        async def lookup(args, call):
            record(f"lookup {call.call_id}")
            return f"found {args['q']}"

        async def pay(args, call):
            if not first_run and DIE == "mark":
                die()
            record(f"pay {call.call_id}")
            if not first_run and DIE == "effect":
                die()
            return f"paid {args['amount']}"

        async def notify(args, call):
            record(f"notify {call.call_id}")
            return "notified"

        tools = runtime.tools
        tools.register("lookup", "Look up.", {"type": "object"}, lookup, effect="read")
        tools.register("pay", "Pay.", {"type": "object"}, pay, exclusive=True)
        tools.register("notify", "Notify.", {"type": "object"}, notify, exclusive=True)

        async def ask_for_pay(call, downstream):
            if call.name != "pay":
                return await downstream(call)
            if first_run and DIE == "before-ask":
                die()
            return {"kind": "ask", "reason": "moves money"}

        runtime.hooks.wrap("tools/pre-execute", ask_for_pay)

        async def answerer(request, downstream):
            if DIE == "in-answerer":
                die()
            return ANSWER

        if ANSWER or DIE == "in-answerer":
            runtime.hooks.wrap("approval/request", answerer)
        runtime.models.register("demo", Model())
        agent = runtime.agent(session, model="demo/scripted")
        if first_run:
            result = await agent.run_turn("Look up a, pay 5, then notify.")
        else:
            result = await agent.resume()
        print(json.dumps(result))
        sys.stdout.flush()
        if first_run and DIE == "parked":
            die()
        if "--hold" in sys.argv:
            await asyncio.to_thread(sys.stdin.readline)


asyncio.run(main())
