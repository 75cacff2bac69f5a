"""A LangGraph worker for the tests, in a process of its own: ``python -m
tests.langgraph_child STORE THREAD MODE [N]``.

- ``count N``: runs (or resumes) the counting graph (:func:`graph`) on the thread with
  ``durability="sync"``, printing ``acked <checkpoint id> <count>`` each time the saver's
  ``put`` returned (what a crash may no longer lose), then ``done``.
- ``hold``: writes one checkpoint of the thread, prints ``held``, and keeps the thread until
  its stdin closes.
- ``writes N``: writes a checkpoint, then N pending writes from N threads at once, then the
  next checkpoint; prints ``acked`` when that ``put`` returned and SIGKILLs itself.
"""

from __future__ import annotations

import operator
import os
import signal
import sys
from concurrent.futures import ThreadPoolExecutor
from typing import Annotated, Any, TypedDict

from langgraph.graph import END, START, StateGraph

from agent_session.integrations.langgraph import EventLogSaver


class State(TypedDict):
    count: int
    seen: Annotated[list[int], operator.add]


def graph(saver: Any, limit: int) -> Any:
    """A graph whose one node adds one to ``count`` (and appends the new count to ``seen``)
    until ``count`` reaches ``limit``: one checkpoint per step."""

    def step(state: State) -> dict[str, Any]:
        return {"count": state["count"] + 1, "seen": [state["count"] + 1]}

    def more(state: State) -> str:
        return "step" if state["count"] < limit else END

    builder = StateGraph(State)
    builder.add_node("step", step)
    builder.add_edge(START, "step")
    builder.add_conditional_edges("step", more)
    return builder.compile(checkpointer=saver)


class Acking(EventLogSaver):
    """Prints each checkpoint once its ``put`` returned."""

    def put(self, config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> Any:
        stored = super().put(config, checkpoint, metadata, new_versions)
        count = (checkpoint.get("channel_values") or {}).get("count")
        print("acked", checkpoint["id"], count, flush=True)
        return stored


def config(thread: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread}, "recursion_limit": 10_000}


def main() -> None:
    store, thread, mode, *rest = sys.argv[1:]
    if mode == "count":
        saver = Acking(store)
        run = graph(saver, int(rest[0]))
        started = saver.get_tuple(config(thread)) is not None
        run.invoke(None if started else {"count": 0, "seen": []}, config(thread), durability="sync")
        saver.close()
        print("done", flush=True)
    elif mode == "hold":
        saver = EventLogSaver(store)
        graph(saver, 1).invoke({"count": 0, "seen": []}, config(thread), durability="sync")
        print("held", flush=True)
        sys.stdin.read()
        saver.close()
    elif mode == "writes":
        saver = EventLogSaver(store)
        first = saver.put(
            config(thread) | {"configurable": {"thread_id": thread, "checkpoint_ns": ""}},
            _checkpoint("1"),
            {"step": 0},
            {},
        )
        with ThreadPoolExecutor(8) as pool:
            list(
                pool.map(
                    lambda i: saver.put_writes(first, [(f"ch{i}", i)], f"task-{i}"),
                    range(int(rest[0])),
                )
            )
        saver.put(first, _checkpoint("2"), {"step": 1}, {})
        print("acked", flush=True)
        os.kill(os.getpid(), signal.SIGKILL)


def _checkpoint(id: str) -> Any:
    return {
        "v": 1,
        "id": id,
        "ts": "2026-12-04T00:00:00+00:00",
        "channel_values": {},
        "channel_versions": {},
        "versions_seen": {},
        "updated_channels": None,
    }


if __name__ == "__main__":
    main()
