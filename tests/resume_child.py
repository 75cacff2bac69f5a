"""An agent whose crashed turn is resumed under attack, as a real process:
``python -m tests.resume_child STORE OUTBOX ROLE [--effect E] [--probe P] [--barrier]``.

- ``ROLE=crash``: the model asks for ``pay`` (call ``c1``); its body SIGKILLs the process
  before its effect, so the outside world has no trace of it.
- ``ROLE=resume``: ``agent.resume()``, with ``pay`` of effect class ``E`` (``unsafe``, with a
  probe, or ``idempotent``) and its probe behaving as ``P``:

  - ``good``: answers from the outbox (``Applied`` when the effect is there, else
    ``NotApplied``);
  - ``object``: answers ``Applied(object())``, a value no log can hold;
  - ``raise``: raises ``RuntimeError``;
  - ``interrupt``: raises ``KeyboardInterrupt`` (the process ends as Ctrl-C ends it);
  - ``hang``: never answers; the resume is cancelled once the probe is waiting, as
    ``asyncio.wait_for`` cancels it at its timeout;
  - ``cancel-body``: (with ``--effect idempotent``) the settled body never returns; the resume
    is cancelled once the body is running.

  ``--no-policy``: without the checkpoint policy (nothing is flushed before the body runs).
  ``--barrier``: print ``ready`` and wait for a line on stdin before opening the session, so a
  test can start two resumers at the same instant.

Every effect of ``pay`` goes to ``OUTBOX`` as ``pay <call id> <pid>``. Prints one JSON line:
``{"result": ..., "pid": ...}`` or ``{"error": "<type>: <message>", "pid": ...}``.
"""

import asyncio
import json
import os
import signal
import sys

from agent_session import AgentRuntime, checkpoint_policy, open_store
from agent_session.agent_loop.effects import Applied, NotApplied
from agent_session.agent_loop.scripted import ScriptedCall, ScriptedStep, chunks
from agent_session.session import SessionError
from tests import outbox
from tests.together import wait_for_go

STORE, OUTBOX, ROLE = sys.argv[1], sys.argv[2], sys.argv[3]


def option(name: str, default: str) -> str:
    return sys.argv[sys.argv.index(name) + 1] if name in sys.argv else default


EFFECT = option("--effect", "unsafe")
PROBE = option("--probe", "good")
PID = str(os.getpid())


class Model:
    """Asks for ``pay`` when the history ends with the user's message, else answers."""

    async def stream(self, request):
        last = request.messages[-1]
        asks = last["role"] == "user" and last["source"]["kind"] == "user"
        step = ScriptedStep(calls=[ScriptedCall("c1", "pay", ["{}"])]) if asks else DONE
        for chunk in chunks(step):
            yield chunk


DONE = ScriptedStep(text=["Done."])


async def main() -> dict[str, object]:
    waiting = asyncio.Event()  # the probe (hang) or the body (cancel-body) is waiting

    async def pay(args, call):
        if ROLE == "crash":
            os.kill(os.getpid(), signal.SIGKILL)
        if PROBE == "cancel-body":
            waiting.set()
            await asyncio.Event().wait()
        outbox.record(OUTBOX, f"pay {call.call_id} {PID}")
        return "paid"

    async def probe(call):
        if PROBE == "object":
            return Applied(object())
        if PROBE == "raise":
            raise RuntimeError("the provider's status page is down")
        if PROBE == "interrupt":
            raise KeyboardInterrupt
        if PROBE == "hang":
            waiting.set()
            await asyncio.Event().wait()
        if any(line.startswith(f"pay {call.call_id} ") for line in outbox.effects(OUTBOX)):
            return Applied("paid (found at the provider)")
        return NotApplied()

    async with AgentRuntime() as runtime:
        runtime.install(open_store(STORE))
        if "--no-policy" not in sys.argv:
            runtime.install(checkpoint_policy)
        reconcile = probe if EFFECT == "unsafe" else None
        runtime.tools.register(
            "pay", "Pay.", {"type": "object"}, pay, effect=EFFECT, reconcile=reconcile
        )
        runtime.models.register("demo", Model())
        wait_for_go()
        try:
            session = await runtime.sessions.open_or_create("job")
        except SessionError as e:
            return {"error": f"{type(e).__name__}: {e}"}
        agent = runtime.agent(session, model="demo/scripted")
        if ROLE == "crash":
            return {"result": await agent.run_turn("Pay.")}
        task = asyncio.ensure_future(agent.resume())
        if PROBE in ("hang", "cancel-body"):
            done, _ = await asyncio.wait(
                [task, asyncio.ensure_future(waiting.wait())],
                return_when=asyncio.FIRST_COMPLETED,
            )
            if task not in done:
                task.cancel()
        try:
            return {"result": await task}
        except asyncio.CancelledError:
            return {"result": "cancelled"}
        except SessionError as e:
            return {"error": f"{type(e).__name__}: {e}"}


print(json.dumps({**asyncio.run(main()), "pid": PID}), flush=True)
