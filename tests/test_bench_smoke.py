"""The benchmark code paths on a tiny workload: correctness only (the events written are the
events loaded), no timing assertions."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from agent_session import open_store
from agent_session.persistence_jsonl import JsonlPersistence
from agent_session.session import Runtime
from bench.__main__ import (
    backend_big_step,
    big_step,
    bound_figures,
    checkpoint_round,
    empty_flush_us,
    raw_fsync_ms,
    raw_fsync_paced_ms,
    sqlite_checkpoints,
    stack,
    step_checkpoints,
    zstd_big_step,
)
from bench.listing import ls_10k_sessions
from bench.many import Many, many_sessions
from bench.postgres import bare_insert_commit, bare_insert_commit_async
from bench.reference import reference_figures
from bench.resume import resume_100k
from bench.shards import sharded_checkpoints
from bench.workload import append_step, run_steps


async def test_workload_writes_exactly_what_it_loads(tmp_path: Path) -> None:
    runtime = Runtime()
    backend = JsonlPersistence(tmp_path)
    runtime.install(backend)
    session = runtime.sessions.create("w")
    _, flushes = await run_steps(runtime, session, steps=5, chunks=7)
    assert len(flushes) == 5
    await backend.aclose()
    loaded = await JsonlPersistence(tmp_path).inspect("w")
    stored = loaded.events[: len(session.events)]
    assert [e.encode() for e in stored] == [e.encode() for e in session.events]
    assert len(session.events) == 1 + 5 * (7 + 3)


async def test_every_figure_runs_on_a_tiny_workload(tmp_path: Path) -> None:
    for index, measure in enumerate([raw_fsync_ms, raw_fsync_paced_ms, sqlite_checkpoints]):
        assert measure(str(tmp_path / f"s{index}"), 3, 4) > 0  # type: ignore[operator]
    (tmp_path / "a").mkdir()
    assert (await step_checkpoints(str(tmp_path / "a"), 3, 4))[1] > 0
    (tmp_path / "b").mkdir()
    many = await many_sessions(lambda: stack(str(tmp_path / "b")), 2, 2, 3)
    assert many.per_second > 0
    assert 0 < many.p50_ms <= many.p99_ms
    assert 0 < many.p99_later_ms <= many.p99_ms  # (one flush fewer per session)
    assert many.busy > 0
    (tmp_path / "c").mkdir()
    append_rate, load_rate, ratio = await big_step(str(tmp_path / "c"), chunks=50)
    assert append_rate > 0
    assert load_rate > 0
    assert ratio > 0
    (tmp_path / "d").mkdir()
    assert await empty_flush_us(str(tmp_path / "d"), rounds=10) > 0
    assert all(figure > 0 for figure in await checkpoint_round(str(tmp_path / "e"), 3, 4))
    load_rate, bytes_ratio = await zstd_big_step(str(tmp_path / "f"), chunks=500)
    assert load_rate > 0
    assert 0 < bytes_ratio < 0.5  # repetitive deltas compress well
    (tmp_path / "g").mkdir()
    assert (await step_checkpoints(str(tmp_path / "g"), 3, 4, "sqlite"))[1] > 0
    (tmp_path / "h").mkdir()
    assert (await many_sessions(lambda: stack(str(tmp_path / "h"), "sqlite"), 2, 2, 3)).busy > 0
    (tmp_path / "i").mkdir()
    assert await backend_big_step(str(tmp_path / "i"), chunks=50) > 0
    (tmp_path / "j").mkdir()
    assert bare_insert_commit(str(tmp_path / "j"), 3, 4) > 0  # on the test server
    assert await bare_insert_commit_async(str(tmp_path / "j2"), 3, 4) > 0
    assert (await step_checkpoints(str(tmp_path / "j"), 3, 4, "postgres"))[1] > 0
    assert (await many_sessions(lambda: stack(str(tmp_path / "k"), "postgres"), 2, 2, 3)).busy > 0
    assert await backend_big_step(str(tmp_path / "l"), chunks=50, kind="postgres") > 0
    jsonl_seconds, sqlite_seconds = await ls_10k_sessions(str(tmp_path), count=5)
    assert jsonl_seconds > 0
    assert sqlite_seconds > 0


def test_append_step_shape() -> None:
    from agent_session.session import Session

    session = Session.create("s")
    append_step(session, 1, 3)
    assert [e.type for e in session.events] == ["step/start"] + ["assistant/chunk"] * 3 + [
        "assistant/message",
        "step/end",
    ]


async def test_the_resume_figure_runs_on_a_tiny_workload(tmp_path: Path) -> None:
    resume_ms, vs_parse = await resume_100k(str(tmp_path / "r"), events=200)
    assert resume_ms > 0
    assert vs_parse > 0


@pytest.mark.process
def test_the_reference_figures_run_on_a_tiny_workload(tmp_path: Path) -> None:
    figures = reference_figures(str(tmp_path / "ref"), steps=4, chunks=3, sessions=2, bulk=50)
    assert sorted(figures) == [
        "ref_append_events_per_s",
        "ref_checkpoint_p99_ms_16",
        "ref_checkpoint_p99_ms_16_later",
        "ref_checkpoints_per_s_1",
        "ref_checkpoints_per_s_16",
    ]
    assert all(value > 0 for value in figures.values())


async def test_the_scale_figures_run_on_a_tiny_workload(tmp_path: Path) -> None:
    from bench.scale import grown_log, idle_rss_per_session

    assert await idle_rss_per_session(str(tmp_path / "idle"), count=200) > 0
    load_ms, append_us = await grown_log(str(tmp_path / "grown"), events=100)
    assert load_ms > 0
    assert append_us > 0


def test_bound_figures_follow_from_the_loops_busy_share() -> None:
    # 1,000 checkpoints/s with the loop busy half the time: 500 us of its CPU each, so at
    # most 2,000/s had it never waited, 5x the one-session 400/s; a session checkpoints every
    # 16 ms (16 sessions at 1,000/s in all).
    figures: dict[str, list[float]] = {}
    bound_figures(figures, "pg_", "pg_16_vs_1", [Many(1000.0, 9.0, 30.0, 20.0, 0.5)], [400.0])
    assert figures == {
        "pg_loop_us_per_checkpoint_16": [pytest.approx(500.0)],
        "pg_16_vs_1_ceiling": [pytest.approx(5.0)],
        "pg_checkpoint_p50_ms_16": [9.0],
        "pg_cycle_ms_16": [pytest.approx(16.0)],
    }


async def test_the_sdk_session_figures_compare_the_same_histories(tmp_path: Path) -> None:
    from bench.sdk_sessions import sdk_session_figures

    figures = await sdk_session_figures(str(tmp_path), sizes=(2_000,))
    assert sorted(figures) == [
        "sdk_add_items_ms_2k",
        "sdk_add_items_vs_sqlite_session_2k",
        "sdk_get_items_10_ms_2k",
        "sdk_get_items_10_vs_sqlite_session_2k",
        "sdk_reopen_get_items_10_ms_2k",
        "sdk_reopen_get_items_10_vs_sqlite_session_2k",
        "sdk_reopen_get_items_all_ms_2k",
        "sdk_reopen_get_items_all_vs_sqlite_session_2k",
    ]


async def test_the_adk_session_figures_compare_the_same_sessions(tmp_path: Path) -> None:
    from bench.adk_sessions import adk_session_figures

    figures = await adk_session_figures(str(tmp_path), events=40)
    names = [
        "again_get_20_ms",
        "again_get_20_vs_sqlite",
        "append_event_ms",
        "append_event_vs_sqlite",
        "first_get_20_ms",
        "first_get_20_vs_sqlite",
        "first_get_all_ms",
        "first_get_all_vs_sqlite",
    ]
    assert sorted(figures) == sorted(f"{p}_{n}" for p in ("adk", "adk_sqlite") for n in names)
    assert all(value > 0 for value in figures.values())


@pytest.mark.process
def test_sharded_workers_write_every_session_of_theirs(tmp_path: Path) -> None:
    """Two worker processes on one store root, 2 sessions each: every session's log holds
    its workload, none collided."""
    assert sharded_checkpoints(str(tmp_path), 2, sessions=4, steps=3) > 0
    ids = sorted(p.name for p in (tmp_path / "_no-cwd").iterdir())
    assert ids == ["shard0-0", "shard0-1", "shard1-0", "shard1-1"]
    for session in ids:
        lines = (tmp_path / "_no-cwd" / session / "session.jsonl").read_text().splitlines()
        assert len(lines) == 1 + 1 + 3 * 4  # header, turn/start, per step 3 events and a row


@pytest.mark.process
def test_against_pairs_every_figure_of_each_round_and_removes_its_worktree(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from bench.against import FIGURES, HERE, main

    assert (
        main(["HEAD", "--rounds", "2", "--steps", "3", "--sessions", "2", "--dir", str(tmp_path)])
        == 0
    )
    out = capsys.readouterr().out
    assert out.count("round ") == 2
    summary = out.split("over the rounds")[1].splitlines()[1:]
    assert [line.split()[0] for line in summary] == list(FIGURES)
    for line in summary:
        low, middle, high = map(float, line.split()[1:])
        assert 0 < low <= middle <= high
    worktrees = subprocess.run(
        ["git", "-C", str(HERE), "worktree", "list"], capture_output=True, text=True, check=True
    ).stdout
    assert "bench-against-" not in worktrees


def test_against_refuses_what_is_neither_a_tree_nor_a_commit(tmp_path: Path) -> None:
    from bench.against import main

    with pytest.raises(SystemExit, match="cannot check out 'no-such-rev'"):
        main(["no-such-rev", "--rounds", "1", "--dir", str(tmp_path)])


async def test_ablation_measures_each_variant(tmp_path: Path) -> None:
    from bench.ablation import VARIANTS, loop_us_per_step

    for variant in VARIANTS:
        assert await loop_us_per_step(variant, str(tmp_path), sessions=2, steps=3) > 0
    assert list(tmp_path.iterdir()) == []  # each variant's logs removed


async def test_the_governance_figures_run_on_a_tiny_workload(tmp_path: Path) -> None:
    from bench.governance import budget_figures, chain_figures, window_figures

    chain = await chain_figures(tmp_path, 1, 3)
    assert {"jsonl", "sqlite", "postgres"} <= set(chain)  # (the PostgreSQL rows too, in CI)
    assert all(f["flushRatio"] > 0 and f["stepRatio"] > 0 for f in chain.values())
    assert (await budget_figures(1, 2))["ratio"] > 0
    windows = await window_figures(tmp_path, 4, 2)
    # 4 sessions, tenants t0..t3: t3 has one session of 2 responses
    assert all(f["responsesInWindow"] == 2 for f in windows.values())


async def test_the_retention_figures_run_on_a_tiny_workload(tmp_path: Path) -> None:
    from bench.retention import delete_figures, purge_figures, sealing_figures

    sealing = await sealing_figures(tmp_path, 1, 3)
    assert {"jsonl", "sqlite", "postgres"} <= set(sealing)  # (the PostgreSQL rows too, in CI)
    assert all(f["flushRatio"] > 0 for f in sealing.values())
    assert (await delete_figures(tmp_path, 3, 2, 2))["ratio"] > 0
    assert all(ms > 0 for ms in (await purge_figures(tmp_path, 2)).values())


async def test_the_compaction_figures_resume_from_the_boundary(tmp_path: Path) -> None:
    from bench.compaction import resume_after_boundary

    for every in (5, -1):
        store = str(tmp_path / f"every-{every}")
        figures = await resume_after_boundary(store, 400, 60, 2, every)
        assert figures["compactedMs"] > 0
        assert figures["smallMs"] > 0
        backend = open_store(store)
        try:
            long = await backend.inspect("long")
        finally:
            await backend.aclose()
        kinds = [e.type for e in long.events]
        compactions = kinds.count("context/compacted")
        assert compactions == 1 if every < 0 else compactions > 2
        last = len(kinds) - 1 - kinds[::-1].index("context/compacted")
        assert len(kinds) - last > 50  # (about the 60 events after the last one)
