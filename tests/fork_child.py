"""A child that rewinds conversation ``p`` of a store to the end of its turn 1 as ``p-b``
(a fork, then the current-branch pointer), for the crash tests to SIGKILL at a failpoint
of those writes (``AGENT_SESSION_FAILPOINT``)."""

from __future__ import annotations

import asyncio
import sys

from agent_session.lineage.rewind import rewind_session


async def main(store: str) -> None:
    await rewind_session(store, "p", turn=1, new_id="p-b")
    print("rewound", flush=True)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
