"""Forks and rewinds on every store (JSONL plain and compressed, SQLite, PostgreSQL): a fork
holds its parent's events up to the boundary byte for byte, then its own ``session/end-seed``,
its header names the parent and the seed length, the parent is never written, and the
reference loads the fork with the same events; a fork continues as any session; the
boundaries the reference refuses are refused with its codes, before anything is written; and
a real process SIGKILLed at each of a rewind's writes leaves the store with no half-made
session: the fork whole or absent, the current branch the old one or the whole fork."""

from __future__ import annotations

import json
import signal
from pathlib import Path
from typing import Any

import pytest

from agent_session import (
    AgentRuntime,
    ScriptedModel,
    ScriptedStep,
    SessionForkError,
    current_branch,
    fork_session,
    open_store,
    rewind_session,
)
from agent_session.session.persistence.failpoints import FAILPOINT_ENV
from tests.backends import fresh_database
from tests.forkserver import run_module
from tests.test_cli import cli
from tests.test_reference_interop import reference_load, reference_load_sqlite

pytestmark = pytest.mark.process

KINDS = ["jsonl", "zstd", "sqlite", "postgres"]


def _store(kind: str, tmp_path: Path) -> str:
    if kind == "postgres":
        return fresh_database()
    return f"sqlite:///{tmp_path}/s.db" if kind == "sqlite" else str(tmp_path / "s")


def _demo(store: str, kind: str, id: str, crash: str = "tool") -> None:
    packed = ["--compression", "zstd"] if kind == "zstd" else []
    cli("demo", "--store", store, "--session-id", id, "--crash", crash, "--turns", "3", *packed)


async def _stored(store: str, id: str) -> Any:
    backend = open_store(store)
    try:
        return await backend.inspect(id)
    finally:
        await backend.aclose()


async def _raw(store: str, id: str) -> bytes:
    backend = open_store(store)
    try:
        raw = await backend.read_raw(id)
        return b"" if raw is None else raw.content
    finally:
        await backend.aclose()


@pytest.mark.parametrize("kind", KINDS)
async def test_a_fork_holds_the_prefix_and_the_reference_loads_it(
    tmp_path: Path, kind: str
) -> None:
    store = _store(kind, tmp_path)
    _demo(store, kind, "p", crash="none")
    parent_before = await _raw(store, "p")
    parent = await _stored(store, "p")
    forks = {
        "after-1": await fork_session(store, "p", turn=1, new_id="after-1"),
        "before-3": await fork_session(store, "p", before_turn=3, new_id="before-3"),
        "whole": await fork_session(store, "p", new_id="whole"),
    }
    turn_ends = [e.seq for e in parent.events if e.type == "turn/end"]
    assert forks["after-1"].seed_length == turn_ends[0] + 1
    assert forks["whole"].seed_length == len(parent.events)
    for id, forked in forks.items():
        child = await _stored(store, id)
        assert child.header.parent_session == "p"
        assert child.header.seed_length == forked.seed_length
        seeded = [e.encode() for e in child.events[: forked.seed_length]]
        assert seeded == [e.encode() for e in parent.events[: forked.seed_length]]
        assert [e.type for e in child.events[forked.seed_length :]] == ["session/end-seed"]
    assert await _raw(store, "p") == parent_before  # the parent is only read
    written = [e.type for e in (await _stored(store, "after-1")).events]
    if kind in ("jsonl", "zstd"):
        loaded = reference_load(Path(store), "after-1", "zstd" if kind == "zstd" else "none")
    elif kind == "sqlite":
        loaded = reference_load_sqlite(Path(store.removeprefix("sqlite:///")), "after-1")
    else:
        return  # (the reference has no PostgreSQL store)
    assert "error" not in loaded, loaded
    assert [e["type"] for e in loaded["events"]] == written


async def test_a_crash_cut_turn_is_forked_with_its_closers_and_the_fork_goes_on(
    tmp_path: Path,
) -> None:
    store = str(tmp_path / "s")
    cli("demo", "--store", store, "--session-id", "p", "--crash", "tool", "--no-recover")
    before = await _raw(store, "p")
    forked = await fork_session(store, "p", new_id="f")  # the whole log, cut turn included
    assert await _raw(store, "p") == before  # (not repaired: only read)
    child = await _stored(store, "f")
    closers = child.events[forked.seed_length - 3 : forked.seed_length]
    assert [e.type for e in closers] == ["tool/result", "step/end", "turn/end"]
    assert closers[0].data["error"]["code"] == "TOOL_OUTCOME_UNKNOWN"
    assert closers[2].data["reason"] == {"kind": "interrupted"}
    async with AgentRuntime() as runtime:  # a fork continues as any session
        runtime.install(open_store(store))
        runtime.models.register("m", ScriptedModel([ScriptedStep(text=["Again."])]))
        session = await runtime.sessions.resume("f")
        assert await runtime.agent(session, model="m/x").run_turn("Go on.") == {"kind": "completed"}
    turns = [e.data["turn"] for e in (await _stored(store, "f")).events if e.type == "turn/start"]
    assert turns == [1, 2, 3]
    loaded = reference_load(Path(store), "f", "none")
    assert "error" not in loaded, loaded


async def test_refused_boundaries_write_nothing(tmp_path: Path) -> None:
    store = str(tmp_path / "s")
    _demo(store, "jsonl", "p", crash="none")
    parent = await _stored(store, "p")
    inside = next(e.seq for e in parent.events if e.type == "step/start")
    refused = {
        "OPEN_TURN": {"at": inside},
        "INVALID_BOUNDARY": {"at": len(parent.events)},
    }
    for code, where in refused.items():
        with pytest.raises(SessionForkError) as caught:
            await fork_session(store, "p", new_id="x", **where)
        assert caught.value.code == code
    with pytest.raises(SessionForkError, match="has no turn 9 \\(turns 1 to [0-9]\\)"):
        await fork_session(store, "p", turn=9, new_id="x")
    with pytest.raises(SessionForkError, match="at one place"):
        await fork_session(store, "p", turn=1, at=3, new_id="x")
    with pytest.raises(SessionForkError) as missing:
        await fork_session(store, "nope", new_id="x")
    assert missing.value.code == "SESSION_NOT_FOUND"
    await fork_session(store, "p", turn=1, new_id="x")
    with pytest.raises(SessionForkError) as again:
        await fork_session(store, "p", turn=2, new_id="x")
    assert again.value.code == "SESSION_ALREADY_EXISTS"
    assert (await _stored(store, "x")).header.seed_length == parent.events.index(
        next(e for e in parent.events if e.type == "turn/end")
    ) + 1  # (the first fork, untouched by the refused one)
    listed = [json.loads(line)["id"] for line in cli("ls", store, "--json").stdout.splitlines()]
    assert sorted(listed) == ["p", "x"]


JSONL_POINTS = [
    "materialize:after-temp-write",
    "materialize:after-link",
    "materialize:after-dir-fsync",
    "rewind:before-point",
]
REWIND_POINTS = {
    "jsonl": JSONL_POINTS,
    "zstd": JSONL_POINTS,  # (the fork is written compressed, as its parent is)
    "sqlite": ["sqlite:append:before-commit", "sqlite:append:after-commit", "rewind:before-point"],
    "postgres": [
        "postgres:append:before-commit",
        "postgres:append:after-commit",
        "rewind:before-point",
    ],
}


@pytest.mark.parametrize(
    ("kind", "point"), [(kind, point) for kind, points in REWIND_POINTS.items() for point in points]
)
async def test_a_rewind_killed_at_any_write_leaves_no_half_made_session(
    tmp_path: Path, kind: str, point: str
) -> None:
    store = _store(kind, tmp_path)
    _demo(store, kind, "p", crash="none")
    parent = await _stored(store, "p")
    done = run_module("tests.fork_child", store, env={FAILPOINT_ENV: point}, timeout=60)
    assert done.returncode == -signal.SIGKILL, done.stdout + done.stderr
    verified = cli("verify", store, check_rc=None)
    assert verified.returncode == 0, verified.stdout + verified.stderr  # every session whole
    listed = {json.loads(line)["id"] for line in cli("ls", store, "--json").stdout.splitlines()}
    assert listed in ({"p"}, {"p", "p-b"})
    if "p-b" in listed:  # the fork is whole: the parent's first turn, then its end-seed
        child = await _stored(store, "p-b")
        kept = child.header.seed_length
        assert [e.encode() for e in child.events[:kept]] == [
            e.encode() for e in parent.events[:kept]
        ]
        assert [e.type for e in child.events[kept:]] == ["session/end-seed"]
    current = current_branch(store, "p")
    assert current == "p" or (current == "p-b" and "p-b" in listed)
    again = await rewind_session(store, "p", turn=1)  # and the next rewind goes through
    assert current_branch(store, "p") == again.id


async def test_a_turn_another_writer_is_running_is_open_not_crashed(tmp_path: Path) -> None:
    from agent_session import Runtime

    async with Runtime() as runtime:  # a live writer, its second turn running
        runtime.install(open_store(str(tmp_path)))
        live = runtime.sessions.create("p")
        live.append("turn/start", {"turn": 1})
        live.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
        live.append("turn/start", {"turn": 2})
        await runtime.sessions.flush(live)
        with pytest.raises(SessionForkError) as refused:  # (no closers: it is not a crash)
            await fork_session(str(tmp_path), "p", new_id="x")
        assert refused.value.code == "OPEN_TURN"
        forked = await fork_session(str(tmp_path), "p", turn=1, new_id="y")
        assert forked.seed_length == 2


def test_rm_keeps_a_parent_of_forks_unless_forced_and_a_current_branch(tmp_path: Path) -> None:
    store = str(tmp_path / "s")
    cli("demo", "--store", store, "--session-id", "p", "--crash", "none", "--turns", "1")
    cli("fork", store, "p", "--turn", "1", "--new-id", "f")
    cli("rewind", store, "p", "--turn", "1", "--new-id", "b")
    refused = cli("rm", store, "p", check_rc=4)
    assert "p has 2 fork(s) in" in refused.stderr
    assert "(b, f)" in refused.stderr
    current = cli("rm", store, "b", "--force", check_rc=4)
    assert "b is the current branch of p" in current.stderr
    cli("rm", store, "p", "--force")
    listed = {json.loads(line)["id"] for line in cli("ls", store, "--json").stdout.splitlines()}
    assert listed == {"b", "f"}  # (each fork keeps its own copy of its prefix)
    assert cli("verify", store).returncode == 0


async def test_view_and_serve_say_where_a_fork_branched(tmp_path: Path) -> None:
    from tests.browser import chromium
    from tests.test_serve import get, serving
    from tests.test_view import opened

    store = str(tmp_path / "s")
    _demo(store, "jsonl", "p", crash="none")
    await fork_session(store, "p", turn=1, new_id="f")
    out = tmp_path / "f.html"
    cli("view", store, "f", "-o", str(out))
    async with chromium() as browser:
        tab, errors = await opened(browser, out)
        said = await tab.locator("#head .fork").inner_text()
        assert said.startswith("forked from session p after its first ")
        assert f"agent-session view {store} p" in said
        assert errors == []
    with serving(store, tmp_path / "audit") as base:  # serve's page of it links to the parent
        served = get(f"{base}/session/f")
    assert '"parentUrl":"/session/p"' in served
    assert '"parent":"p"' in served
