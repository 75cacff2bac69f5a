"""A child process for the Google ADK tests: ``python -m tests.adk_child STORE MODE ...``.

- ``crash SESSION MARKER``: a runner whose model calls ``write_file(MARKER)``; the tool body
  prints ``in-tool`` and waits on a pipe that never gets data (the parent kills it there).
- ``hold SESSION``: reads the session (so this process writes it), appends one turn, prints
  ``holding`` and waits until its stdin closes.
"""

from __future__ import annotations

import asyncio
import os
import sys

from agent_session.integrations.google_adk import EventLogSessionService
from tests.adk_kit import APP, call, runner, say, text


async def main(store: str, mode: str, session_id: str, *rest: str) -> None:
    async with EventLogSessionService(store) as service:
        if await service.get_session(app_name=APP, user_id="u", session_id=session_id) is None:
            await service.create_session(app_name=APP, user_id="u", session_id=session_id)
        if mode == "crash":
            read, _ = os.pipe()
            os.environ["ADK_TEST_HOLD"] = str(read)
            run, _ = runner(service, [[call("write_file", path=rest[0])], [text("done")]])
            await say(run, "u", session_id, "write it")
        else:
            run, _ = runner(service, [[text("mine")]])
            await say(run, "u", session_id, "hello")
            print("holding", flush=True)
            await asyncio.to_thread(sys.stdin.read)


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:]))
