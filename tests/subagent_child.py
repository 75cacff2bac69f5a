"""A parent agent that delegates to a child agent, as a real process:
``python -m tests.subagent_child STORE OUTBOX --die POINT --effect EFFECT``.

The parent (session ``job``) calls ``research`` (a subagent tool, call ``c-sub``) with a task;
the child calls ``fetch`` (of the class ``EFFECT``, call ``c-fetch``), then answers
``child found x``; the parent then answers ``Parent done: <the child's answer>``. The first
run SIGKILLs itself at ``POINT``:

- ``child-created``: when the child session is created (the parent's reference to it is
  durable; nothing of the child is stored);
- ``child-request``: at the child's first model request;
- ``child-tool``: inside ``fetch``'s body, after its effect;
- ``child-end``: after the child's turn ended, before the parent records the result;
- ``none``: no crash.

A later run resumes the parent with ``agent.resume()``. Every effect goes to ``OUTBOX`` as
``fetch <call id>``. Prints the run's outcome (or ``nothing``)."""

import asyncio
import json
import os
import signal
import sys

from agent_session import AgentRuntime, checkpoint_policy, open_store
from agent_session.agent_loop.effects import Applied, NotApplied
from tests import outbox

STORE, OUTBOX = sys.argv[1], sys.argv[2]
DIE = sys.argv[sys.argv.index("--die") + 1]
EFFECT = sys.argv[sys.argv.index("--effect") + 1]
STARTED = OUTBOX + ".started"
FIRST = not os.path.exists(STARTED)  # (the first run of a job)


def die(point: str) -> None:
    if FIRST and point == DIE:
        os.kill(os.getpid(), signal.SIGKILL)


def call(index: int, id: str, name: str, args: dict) -> list[dict]:
    arguments = json.dumps(args)
    head = {"id": id, "name": name}
    return [
        {"type": "block-start", "index": index, "blockType": "tool-call", **head},
        {"type": "tool-call-delta", "index": index, **head, "argumentsDelta": arguments},
        {
            "type": "block-end",
            "index": index,
            "block": {"type": "tool-call", **head, "arguments": arguments},
        },
        {"type": "finish", "reason": {"kind": "tool-calls"}},
    ]


def text(words: str) -> list[dict]:
    return [
        {"type": "block-start", "index": 0, "blockType": "text"},
        {"type": "text-delta", "index": 0, "text": words},
        {"type": "block-end", "index": 0, "block": {"type": "text", "text": words}},
        {"type": "finish", "reason": {"kind": "stop"}},
    ]


def said(message: dict) -> str:
    return "".join(b.get("text", "") for b in message["content"] if b.get("text"))


class Model:
    """The parent's and the child's model, told apart by the system prompt."""

    async def stream(self, request):
        last = request.messages[-1]
        if request.system == "child":
            if last["source"]["kind"] == "user":
                die("child-request")
                chunks = call(0, "c-fetch", "fetch", {"what": "x"})
            else:
                chunks = text("child found x")
        elif last["source"]["kind"] == "user":
            chunks = call(0, "c-sub", "research", {"task": "find x"})
        else:
            result = last["content"][0]
            chunks = text("Parent done: " + said(result))
        for chunk in chunks:
            yield chunk


async def main() -> None:
    async with AgentRuntime() as runtime:
        runtime.install(open_store(STORE))
        runtime.install(checkpoint_policy)
        open(STARTED, "a").close()
        runtime.models.register("demo", Model())

        async def fetch(args, call):
            outbox.record(OUTBOX, f"fetch {call.call_id}")
            die("child-tool")
            return "x is 42"

        async def probe(call):
            found = f"fetch {call.call_id}" in outbox.effects(OUTBOX)
            return Applied("x is 42 (found at the provider)") if found else NotApplied()

        effect = "unsafe" if EFFECT.startswith("unsafe") else EFFECT
        reconcile = probe if EFFECT == "unsafe-probe" else None
        runtime.tools.register(
            "fetch", "Fetch.", {"type": "object"}, fetch, effect=effect, reconcile=reconcile
        )
        runtime.subagent("research", "Research a task.", model="demo/child", system="child")

        def created(session):
            if session.id != "job":
                die("child-created")

        runtime.hooks.observe("session/created", created)

        async def after_tool(call, downstream):
            result = await downstream(call)
            if call.name == "research":
                die("child-end")
            return result

        runtime.hooks.wrap("tools/execute", after_tool)
        session = await runtime.sessions.open_or_create("job")
        agent = runtime.agent(session, model="demo/parent", system="parent")
        if FIRST:
            print(await agent.run_turn("Research x, then report."))
        else:
            print(await agent.resume() or "nothing")


asyncio.run(main())
