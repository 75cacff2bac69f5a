"""A writer process for the writer-lock tests.

``python -m tests.lock_child STORE ID COUNT GO_FILE [--die]``: waits until ``GO_FILE`` exists,
then appends ``COUNT`` events to session ``ID`` one small batch at a time, continuing the log
from whatever is stored. Prints ``acked <seq>`` per acknowledged event and ``refused <msg>``
when another writer owns the session. With ``--die`` it SIGKILLs itself after its first
acknowledged batch (holding the lock); with ``--hold`` it sleeps holding the lock until killed.
``STORE`` is a JSONL root or ``sqlite:///path.db`` (where the events are not marked
``ignorable``, which SQLite rows cannot keep; the type is registered here).
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time

from agent_session.session import (
    SessionCollisionError,
    SessionError,
    SessionNotFoundError,
    register_event_type,
)
from agent_session.stores import parse_store

register_event_type("plugin/write")


async def main(
    root: str, id: str, count: int, go: str, die: bool, hold: bool, turn: bool = False
) -> None:
    while not os.path.exists(go):
        time.sleep(0.001)
    backend = parse_store(root).open()
    ignorable = {} if root.startswith("sqlite:") else {"ignorable": True}
    try:
        cursor = len(await backend.read_from(id, 0))
    except SessionCollisionError as e:  # (SQLite: the other writer kept the database busy)
        print(f"refused {e}", flush=True)
        return
    except SessionNotFoundError:
        cursor = 0
        try:
            await backend.create({"version": 0, "id": id, "createdAt": 1, "delegationDepth": 0})
        except SessionCollisionError as e:  # the other writer materialized it first
            print(f"refused {e}", flush=True)
            return
    for _ in range(count):
        event: dict[str, object] = {
            "type": "plugin/write",
            "seq": cursor,
            "time": 1,
            "data": {"pid": os.getpid(), "n": cursor},
            **ignorable,
        }
        if turn and cursor == 0:
            event = {"type": "turn/start", "seq": 0, "time": 1, "data": {"turn": 1}}
        try:
            await backend.append(id, [event])
        except SessionCollisionError as e:
            print(f"refused {e}", flush=True)
            return
        except SessionError as e:  # the other writer moved the log on before we got the lock
            print(f"refused {e}", flush=True)
            return
        print(f"acked {cursor}", flush=True)
        cursor += 1
        if die:
            os.kill(os.getpid(), signal.SIGKILL)
        if hold:
            print("holding", flush=True)
            time.sleep(600)
    await backend.aclose()


if __name__ == "__main__":
    args = sys.argv[1:]
    asyncio.run(
        main(
            args[0],
            args[1],
            int(args[2]),
            args[3],
            "--die" in args,
            "--hold" in args,
            "--turn" in args,
        )
    )
