"""An agent whose crash is settled, as a real process: ``python -m tests.settle_child STORE
OUTBOX --effect EFFECT --die POINT [--zstd]``.

The first run asks for ``lookup`` twice (read, parallel), ``pay`` (of the class ``EFFECT``) and
``notify`` (unsafe), and SIGKILLs itself at ``POINT``:

- ``request`` (at the first model request), ``midstream`` (after a streamed delta),
- ``tool-before`` / ``tool-after`` (in ``pay``'s body, before or after its effect),
- ``parallel`` (in the second ``lookup``, the first still running),
- ``post-step`` (after the first step's checkpoint), ``none`` (no crash);
- ``settle``: as ``tool-after``, and the first resume dies again inside ``pay``'s body while
  settling it.

A later run resumes the session and finishes the job with ``agent.resume()``. Every effect
goes to ``OUTBOX`` as ``<tool> <call id>`` lines (the outside world); ``pay``'s probe reads it.
Prints the end reason of the run's turn (or ``nothing``)."""

import asyncio
import json
import os
import signal
import sys

from agent_session import AgentRuntime, checkpoint_policy, open_store
from agent_session.agent_loop.effects import Applied, NotApplied
from tests import outbox

STORE, OUTBOX = sys.argv[1], sys.argv[2]
EFFECT = sys.argv[sys.argv.index("--effect") + 1]
DIE = sys.argv[sys.argv.index("--die") + 1]
ZSTD = "--zstd" in sys.argv
MARK = OUTBOX + ".settling"  # exists once a resume began settling


def die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def effects() -> list[str]:
    return outbox.effects(OUTBOX)


def record(line: str) -> None:
    outbox.record(OUTBOX, line)


CALLS = [
    ("c-look-1", "lookup", {"q": "a"}),
    ("c-look-2", "lookup", {"q": "b"}),
    ("c-pay", "pay", {"amount": 5}),
    ("c-notify", "notify", {}),
]


class Model:
    """Asks for the four calls when the history ends with the user's message, else answers."""

    def __init__(self, first_run: bool) -> None:
        self.first_run = first_run

    async def stream(self, request):
        last = request.messages[-1]
        if last["role"] == "user" and last["source"]["kind"] == "user":
            if self.first_run and DIE == "request":
                die()
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
        yield {"type": "text-delta", "index": 0, "text": "Done"}
        if self.first_run and DIE == "midstream":
            die()
        yield {"type": "text-delta", "index": 0, "text": "."}
        yield {"type": "block-end", "index": 0, "block": {"type": "text", "text": "Done."}}
        yield {"type": "finish", "reason": {"kind": "stop"}}


async def main() -> None:
    options = {"new_session_compression": "zstd"} if ZSTD else {}
    async with AgentRuntime() as runtime:
        runtime.install(open_store(STORE, **options))
        runtime.install(checkpoint_policy)
        sessions = runtime.sessions
        first_run = not effects() and not os.path.exists(OUTBOX + ".started")
        open(OUTBOX + ".started", "a").close()
        session = await sessions.open_or_create("job")
        resuming = session.interrupted is not None
        second_lookup_started = asyncio.Event()

        async def lookup(args, call):
            record(f"lookup {call.call_id}")
            if call.call_id == "c-look-2":
                second_lookup_started.set()
                if first_run and DIE == "parallel":
                    die()
            elif first_run:  # the first still runs while the second starts
                await second_lookup_started.wait()
            return f"found {args['q']}"

        async def pay(args, call):
            if first_run and DIE == "tool-before":
                die()
            record(f"pay {call.call_id}")
            if first_run and DIE in ("tool-after", "settle"):
                die()
            if resuming and DIE == "settle" and not os.path.exists(MARK):
                open(MARK, "w").close()
                die()
            return f"paid {args['amount']}"

        async def probe(call):
            if f"pay {call.call_id}" in effects():
                return Applied(f"paid (found {call.call_id} at the provider)")
            return NotApplied()

        async def notify(args, call):
            record(f"notify {call.call_id}")
            return "notified"

        tools = runtime.tools
        tools.register("lookup", "Look up.", {"type": "object"}, lookup, effect="read")
        effect = "unsafe" if EFFECT.startswith("unsafe") else EFFECT
        reconcile = probe if EFFECT == "unsafe-probe" else None
        tools.register(
            "pay",
            "Pay.",
            {"type": "object"},
            pay,
            exclusive=True,
            effect=effect,
            reconcile=reconcile,
        )
        tools.register("notify", "Notify.", {"type": "object"}, notify, exclusive=True)

        async def post_step(context, downstream):
            await downstream(context)
            if first_run and DIE == "post-step" and context.step == 1:
                die()

        runtime.hooks.wrap("agent/post-step", post_step)  # after the policy's checkpoint
        runtime.models.register("demo", Model(first_run))
        agent = runtime.agent(session, model="demo/scripted")
        if resuming:
            print(await agent.resume() or "nothing")
        elif first_run:
            print(await agent.run_turn("Look up a and b, pay 5, then notify."))
        else:
            print("nothing")


asyncio.run(main())
