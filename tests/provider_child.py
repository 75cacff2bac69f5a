"""An agent on a real provider adapter (its SDK client over recorded SSE replies, no network),
as a real process: ``python -m tests.provider_child STORE LOG ADAPTER [--die POINT]``.

The first run asks "Pay 5."; the provider answers with one ``pay`` call (unsafe, no probe),
and after its result with "Paid.". ``POINT``: ``request`` (SIGKILL when the first request
reaches the provider), ``midstream`` (after the first streamed delta is logged), ``tool``
(inside ``pay``'s body, after its effect). A later run resumes with ``agent.resume()``. Every
request body the provider receives is appended to ``LOG`` as a JSON line."""

import asyncio
import json
import os
import signal
import sys

import anthropic
import openai

from agent_session import AgentRuntime, checkpoint_policy, open_store
from agent_session.providers import AnthropicModel, OpenAIChatModel, OpenAIResponsesModel
from tests import test_provider_anthropic as an
from tests import test_provider_openai_chat as oc
from tests import test_provider_openai_responses as orp
from tests.providers import Reply, Served

STORE, LOG, ADAPTER = sys.argv[1], sys.argv[2], sys.argv[3]
DIE = sys.argv[sys.argv.index("--die") + 1] if "--die" in sys.argv else "none"
FIRST = not os.path.exists(LOG)


def die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def replies() -> list[Reply]:
    """A call to ``pay``, then a text answer (one per request after the first run)."""
    if ADAPTER == "anthropic":
        call = [an.start(), *an.tool_use(0, "toolu_pay", '{"amount": 5}'), *an.end("tool_use", 9)]
        call[1][1]["content_block"]["name"] = "pay"
        done = [an.start(), *an.text(0, "Pa", "id."), *an.end("end_turn", 2)]
        return [Reply(call, done=False), Reply(done, done=False)] * 2
    if ADAPTER == "openai-responses":
        call = [
            *orp.function_call(0, "call_pay", '{"amount": 5}'),
            orp.completed([], orp.counts(9, 9)),
        ]
        call[0][1]["item"]["name"] = call[-2][1]["item"]["name"] = "pay"
        done = [*orp.message(0, "Pa", "id."), orp.completed([], orp.counts(9, 2))]
        return [Reply(call, done=False), Reply(done, done=False)] * 2
    call = [
        oc.chunk(
            {"role": "assistant", "tool_calls": [oc.call(0, "call_pay", "pay", '{"amount": 5}')]},
            "tool_calls",
        ),
        oc.usage(9, 9),
    ]
    done = [oc.chunk({"role": "assistant", "content": "Pa"}), oc.chunk({"content": "id."}, "stop")]
    return [Reply(call), Reply(done)] * 2


class Recording(Served):
    def handle(self, request):
        with open(LOG, "a") as log:
            log.write(request.content.decode() + "\n")
        if FIRST and DIE == "request":
            die()
        return super().handle(request)


async def main() -> None:
    served = Recording(replies() if FIRST else replies()[1:])
    if ADAPTER == "anthropic":
        client = anthropic.AsyncAnthropic(
            api_key="k", base_url="http://provider", http_client=served.client()
        )
        model = AnthropicModel(client)
    else:
        client = openai.AsyncOpenAI(
            api_key="k", base_url="http://provider/v1", http_client=served.client()
        )
        kind = OpenAIResponsesModel if ADAPTER == "openai-responses" else OpenAIChatModel
        model = kind(client)
    async with AgentRuntime() as runtime:
        runtime.install(open_store(STORE))
        runtime.install(checkpoint_policy)
        runtime.models.register("provider", model)

        @runtime.tools.tool(description="Pay.")
        async def pay(args, call):
            if FIRST and DIE == "tool":
                die()
            return f"paid {args['amount']}"

        def observe(session, event):
            chunk = event.data.get("chunk") if event.type == "assistant/chunk" else None
            if FIRST and DIE == "midstream" and chunk and chunk["type"].endswith("-delta"):
                die()

        runtime.hooks.observe("session/event", observe)
        session = await runtime.sessions.open_or_create("job")
        agent = runtime.agent(session, model="provider/test-model", system="Be brief.")
        reason = await (agent.run_turn("Pay 5.") if FIRST else agent.resume())
        print(json.dumps(reason))


asyncio.run(main())
