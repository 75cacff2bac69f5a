"""A writer for the kill matrix; the failpoint comes from the environment. The store is the
JSONL root ``ROOT`` (``none``/``zstd`` logs), or with ``sqlite`` the database
``ROOT/sessions.db``.

``python -m tests.kill_child ROOT SEED write``: create session ``k`` and append up to five
batches of random sizes (seeded), printing ``acked <n>`` (events durable so far) after each.
``python -m tests.kill_child ROOT SEED repair``: cold-load session ``k`` (which the parent
left interrupted with a torn tail), which repairs it.
"""

from __future__ import annotations

import asyncio
import os
import random
import sys

from persistence_jsonl import JsonlPersistence
from persistence_sqlite import SqlitePersistence
from session import Session
from session.persistence.coordinator import PersistenceCoordinator


def open_backend(root: str, compression: str) -> PersistenceCoordinator:
    """The kill matrix's store: JSONL logs of ``compression``, or ``sqlite``."""
    if compression == "sqlite":
        return SqlitePersistence(os.path.join(root, "sessions.db"))
    return JsonlPersistence(root, new_session_compression=compression)


def events(seed: int) -> list[list[object]]:
    """Deterministic batches: turns with chunks, calls and results, cut at random sizes."""
    rng = random.Random(seed)
    session = Session.create("k", clock=lambda: 7)
    for turn in range(1, 4):
        session.append("turn/start", {"turn": turn})
        session.append("step/start", {"turn": turn, "step": 1})
        for i in range(rng.randint(1, 12)):
            session.append(
                "assistant/chunk",
                {
                    "turn": turn,
                    "step": 1,
                    "chunk": {"type": "text-delta", "index": 0, "text": f"t{i} "},
                },
            )
        session.append("step/end", {"turn": turn, "step": 1})
        session.append("turn/end", {"turn": turn, "reason": {"kind": "completed"}})
    flat = list(session.events)
    batches: list[list[object]] = []
    while flat and len(batches) < 5:
        size = rng.randint(1, max(1, len(flat) // 2))
        batches.append(list(flat[:size]))
        flat = flat[size:]
    if flat:
        batches.append(list(flat))
    return batches


async def main(root: str, seed: int, action: str, compression: str = "none") -> None:
    backend = open_backend(root, compression)
    if action == "write":
        await backend.create({"version": 0, "id": "k", "createdAt": 1, "delegationDepth": 0})
        acked = 0
        for batch in events(seed):
            await backend.append("k", batch)  # type: ignore[arg-type]
            acked += len(batch)
            print(f"acked {acked}", flush=True)
    else:
        await backend.load("k")
        print("repaired", flush=True)
    await backend.aclose()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], int(sys.argv[2]), sys.argv[3], *sys.argv[4:]))
