"""A process that archives a store's sessions, or resumes one (``python -m
tests.archive_child STORE URL archive|resume [ID]``); a test kills it at a failpoint of the
cold tier (``AGENT_SESSION_FAILPOINT``)."""

from __future__ import annotations

import asyncio
import sys

from agent_session import AgentRuntime, open_store
from agent_session.cold import archive_store


async def main() -> None:
    store, url, what, *rest = sys.argv[1:]
    if what == "archive":
        for item in await archive_store(store, url, older_than_ms=0):
            print(item.id, item.action, item.detail, flush=True)
        return
    async with AgentRuntime() as runtime:
        runtime.install(open_store(store))
        session = await runtime.sessions.resume(rest[0])
        print("resumed", session.id, len(session.events), flush=True)


asyncio.run(main())
