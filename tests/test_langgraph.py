"""``EventLogSaver`` on every store kind: LangGraph's own conformance suite for savers
(``langgraph-checkpoint-conformance``), real graphs beside LangGraph's ``InMemorySaver``, and
what no LangGraph saver has: a second worker refused, writes durable as a prefix of the
checkpoint after them, graph runs SIGKILLed at random instants that resume with nothing
acknowledged lost; the operator commands and the reference on a thread's log."""

from __future__ import annotations

import shutil
import signal
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.checkpoint.conformance.capabilities import BASE_CAPABILITIES
from langgraph.checkpoint.memory import InMemorySaver

from agent_session.integrations.langgraph import EventLogSaver
from agent_session.integrations.langgraph.records import log_id
from agent_session.session.errors import SessionCollisionError
from tests.backends import fresh_database
from tests.forkserver import run_module, start_module
from tests.langgraph_child import config, graph
from tests.sweeps import sample
from tests.test_cli import cli

SUITE_BASE = 58
"""The suite's clauses for the base capabilities (put, put_writes, get_tuple, list,
delete_thread), as its version 0.0.2 has them."""
SUITE_COPY = 8


def _fresh(kind: str, tmp_path: Path) -> str:
    """A new empty store of ``kind`` under ``tmp_path``."""
    if kind == "postgres":
        return fresh_database()
    place = Path(tmp_path, f"s{len(list(tmp_path.iterdir()))}")
    place.mkdir()
    return str(place) if kind == "jsonl" else f"sqlite:///{place}/sessions.db"


@pytest.mark.parametrize("kind", ["jsonl", "sqlite", "postgres"])
async def test_langgraph_s_own_conformance_suite_passes_every_base_clause_and_copy_thread(
    kind: str, tmp_path: Path
) -> None:
    @checkpointer_test(name=f"EventLogSaver-{kind}")
    async def saver() -> Any:
        opened = EventLogSaver(_fresh(kind, tmp_path))  # (a fresh store per capability)
        yield opened
        await opened.aclose()

    report = await validate(saver)
    results = report.results
    failures = {cap: r.failures for cap, r in results.items() if r.failures}
    assert not failures, failures
    base = [results[cap.value] for cap in BASE_CAPABILITIES]
    assert all(r.passed for r in base)
    assert sum(r.tests_passed for r in base) == SUITE_BASE
    assert results["copy_thread"].passed
    assert results["copy_thread"].tests_passed == SUITE_COPY
    # not offered on an append-only log (docs/langgraph.md says why)
    assert results["prune"].detected is False
    assert results["delete_for_runs"].detected is False


def _history(saver: Any, thread: str) -> list[tuple[Any, ...]]:
    return [
        (s.values, s.next, s.metadata.get("step"), s.metadata.get("source"))
        for s in graph(saver, 4).get_state_history(config(thread))
    ]


async def test_a_graph_on_the_log_holds_what_it_holds_on_langgraph_s_in_memory_saver(
    store: str,
) -> None:
    memory = InMemorySaver()
    graph(memory, 4).invoke({"count": 0, "seen": []}, config("t"))
    with EventLogSaver(store) as saver:
        run = graph(saver, 4)
        assert await run.ainvoke({"count": 0, "seen": []}, config("t")) == {
            "count": 4,
            "seen": [1, 2, 3, 4],
        }
        assert _history(saver, "t") == _history(memory, "t")
    with EventLogSaver(store) as again:  # another process's view: the log
        assert _history(again, "t") == _history(memory, "t")
        assert len(_history(again, "t")) == 6  # the input, then one per step


@pytest.mark.process
def test_a_second_worker_is_refused_while_the_first_holds_the_thread(store: str) -> None:
    holder = start_module("tests.langgraph_child", store, "t", "hold", server="langgraph")
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline().strip() == "held"
        with EventLogSaver(store) as second:
            with pytest.raises(SessionCollisionError, match="LangGraph thread 't' is written by"):
                graph(second, 3).update_state(config("t"), {"count": 2})
            state = graph(second, 3).get_state(config("t"))  # reading takes nothing
            assert state.values == {"count": 1, "seen": [1]}
            assert holder.poll() is None
            holder.communicate("")  # (the first worker ends: its thread is free)
            assert holder.returncode == 0
            graph(second, 3).update_state(config("t"), {"count": 2})
            assert graph(second, 3).get_state(config("t")).values["count"] == 2
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.communicate()


def test_a_worker_that_let_a_thread_go_learns_at_its_next_write_that_another_took_it(
    store: str,
) -> None:
    first, second = EventLogSaver(store), EventLogSaver(store)
    try:
        graph(first, 2).invoke({"count": 0, "seen": []}, config("t"), durability="sync")
        with pytest.raises(SessionCollisionError):
            second.put_writes(
                graph(second, 2).get_state(config("t")).config, [("count", 9)], "task"
            )
        first.release("t")
        graph(second, 2).update_state(config("t"), {"count": 5})
        with pytest.raises(SessionCollisionError, match="written by another process"):
            graph(first, 2).update_state(config("t"), {"count": 7})
        assert graph(first, 2).get_state(config("t")).values["count"] == 5  # nothing spliced
    finally:
        first.close()
        second.close()


@pytest.mark.process
def test_every_write_acknowledged_before_a_checkpoint_is_durable_with_it(store: str) -> None:
    done = run_module("tests.langgraph_child", store, "t", "writes", "16", server="langgraph")
    assert done.returncode == -signal.SIGKILL, done.stderr
    assert done.stdout.split() == ["acked"]  # (killed as soon as the put returned)
    with EventLogSaver(store) as saver:
        first = saver.get_tuple({"configurable": {"thread_id": "t", "checkpoint_id": "1"}})
        assert first is not None
        assert sorted(first.pending_writes or []) == sorted(
            (f"task-{i}", f"ch{i}", i) for i in range(16)
        )
        latest = saver.get_tuple(config("t"))
        assert latest is not None
        assert latest.checkpoint["id"] == "2"


@pytest.mark.process
@pytest.mark.parametrize("kind", ["jsonl", "sqlite", "postgres"])
def test_graph_runs_killed_at_random_instants_resume_with_nothing_acknowledged_lost(
    kind: str, tmp_path: Path
) -> None:
    steps = 30
    # each case: the run is killed once this many checkpoints were acknowledged, while the
    # child goes on at its own pace, so the kill lands anywhere in what follows (a seeded
    # share of the cases; make test-exhaustive runs all of them)
    for wanted in sample(range(1, steps), 0.1, name=f"langgraph-kill-{kind}"):
        store = _fresh(kind, tmp_path)
        acked: list[tuple[str, int]] = []
        child = start_module(
            "tests.langgraph_child", store, "t", "count", str(steps), server="langgraph"
        )
        assert child.stdout is not None
        while len(acked) < wanted:
            line = child.stdout.readline().split()
            assert line[:1] == ["acked"], (wanted, child.communicate())
            acked.append((line[1], -1 if line[2] == "None" else int(line[2])))
        child.send_signal(signal.SIGKILL)
        child.communicate()
        assert child.returncode == -signal.SIGKILL
        with EventLogSaver(store) as saver:
            for checkpoint_id, count in acked:  # every acknowledged checkpoint is there
                found = saver.get_tuple(
                    {"configurable": {"thread_id": "t", "checkpoint_id": checkpoint_id}}
                )
                assert found is not None, (wanted, checkpoint_id)
                assert found.checkpoint["channel_values"].get("count", -1) == count
        resumed = run_module(
            "tests.langgraph_child", store, "t", "count", str(steps), server="langgraph"
        )
        assert resumed.returncode == 0, resumed.stderr
        assert resumed.stdout.split()[-1] == "done"
        with EventLogSaver(store) as saver:
            state = graph(saver, steps).get_state(config("t"))
            assert state.values == {"count": steps, "seen": list(range(1, steps + 1))}, wanted
            assert state.next == ()


@pytest.mark.process
def test_the_operator_commands_work_on_a_thread(tmp_path: Path) -> None:
    store = tmp_path / "store"
    with EventLogSaver(store) as saver:
        graph(saver, 2).invoke({"count": 0, "seen": []}, config("t/1"))
    lid = log_id("t/1")
    assert lid in cli("ls", str(store)).stdout
    assert "1 balanced" in cli("verify", str(store)).stdout
    shown = cli("show", str(store), lid).stdout
    with EventLogSaver(store) as saver:
        ids = [t.checkpoint["id"] for t in saver.list(config("t/1"))]
    assert all(f"langgraph: checkpoint {cid}" in shown for cid in ids)
    assert "step 2, source loop" in shown
    assert "channels: count (msgpack," in shown
    assert "writes of task" in shown
    copy = f"sqlite:///{tmp_path}/copy.db"
    cli("copy", str(store), copy)
    with EventLogSaver(copy) as saver:
        assert graph(saver, 2).get_state(config("t/1")).values == {"count": 2, "seen": [1, 2]}
    cli("rm", str(store), lid)
    with EventLogSaver(store) as saver:
        assert saver.get_tuple(config("t/1")) is None


@pytest.mark.process
async def test_the_reference_loads_a_thread_s_log(tmp_path: Path) -> None:
    from tests.test_reference_interop import reference_load

    store = tmp_path / "store"
    with EventLogSaver(store) as saver:
        graph(saver, 2).invoke({"count": 0, "seen": []}, config("t"))
    theirs = tmp_path / "theirs"
    shutil.copytree(store, theirs)
    loaded = reference_load(theirs, log_id("t"), "none")
    assert "error" not in loaded, loaded
    assert len(loaded["events"]) == 7
    assert {e["type"] for e in loaded["events"]} == {"langgraph/checkpoint", "langgraph/writes"}
    assert all(e["ignorable"] is True for e in loaded["events"])


def test_hostile_thread_ids_round_trip(tmp_path: Path) -> None:
    ids = ["../up", "a:b", "ünï", "sp ace", "%41", "x" * 100, "/"]
    with EventLogSaver(tmp_path) as saver:
        for thread in ids:
            graph(saver, 1).invoke({"count": 0, "seen": []}, config(thread))
    with EventLogSaver(tmp_path) as saver:
        listed = {t.config["configurable"]["thread_id"] for t in saver.list(None)}
        assert listed == set(ids)
    assert not (tmp_path.parent / "up").exists()


async def test_a_damaged_checkpoint_event_is_named_not_guessed(tmp_path: Path) -> None:
    from agent_session.session import Runtime
    from agent_session.session.errors import SessionPersistenceCorruptionError
    from agent_session.session.events.types import LANGGRAPH_CHECKPOINT
    from agent_session.stores import open_store

    async with Runtime() as runtime:
        runtime.install(open_store(tmp_path))
        session = runtime.sessions.create(log_id("t"))
        session.append(LANGGRAPH_CHECKPOINT, {"ns": "", "id": "1", "parent": None})
        session.append(
            LANGGRAPH_CHECKPOINT,
            {
                "ns": "",
                "id": "2",
                "parent": "1",
                "blobs": [],
                "metadata": {},
                "checkpoint": ["msgpack", "%%"],
            },
        )
        await runtime.sessions.flush(session)
    async with EventLogSaver(tmp_path) as saver:
        with pytest.raises(SessionPersistenceCorruptionError, match="seq 0: a langgraph/che"):
            await saver.aget_tuple(config("t"))
