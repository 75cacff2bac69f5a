"""``agent-session stats`` on real stores: the reference's figures for a crashed session, and
what they do not count (the crash point and what repair answered, settled calls, approvals)."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest

from tests.test_cli import cli
from tests.test_parking_crash import child as park_child
from tests.test_settle_crash import child as settle_child

pytestmark = pytest.mark.process


def stats(store: str, id: str) -> dict:
    return json.loads(cli("stats", store, id, "--json").stdout)


def test_a_crashed_session_shows_its_crash_point_and_repair(tmp_path: Path) -> None:
    store = str(tmp_path / "s")
    cli("demo", "--store", store, "--session-id", "c", "--crash", "tool", "--no-recover")
    shown = stats(store, "c")
    events = [json.loads(line) for line in cli("show", store, "c", "--events").stdout.splitlines()]
    assert shown["sessionStats"]["steps"] == sum(e["type"] == "step/end" for e in events)
    assert shown["asOfSeq"] == events[-1]["seq"]
    [crash] = shown["crashes"]
    stored = len(cli("show", store, "c", "--json").stdout.splitlines()) - 1 - 3  # 3 closers
    assert crash["lastDurableSeq"] == stored - 1
    assert crash["outcomeUnknown"] == ["call-2-1"]
    text = cli("stats", store, "c").stdout
    assert "crash: turn 2 cut after seq" in text
    assert "repair answered 1 TOOL_OUTCOME_UNKNOWN" in text


def test_a_settled_job_shows_how_its_calls_were_settled(tmp_path: Path) -> None:
    store, outbox = str(tmp_path / "s"), tmp_path / "outbox"
    assert settle_child(store, outbox, "unsafe-probe", "tool-after").returncode == -signal.SIGKILL
    assert settle_child(store, outbox, "unsafe-probe", "tool-after").returncode == 0
    shown = stats(store, "job")
    assert shown["settled"] == {"reconciled": 1, "dispatched": 1}
    assert "settled on resume: 1 dispatched, 1 reconciled" in cli("stats", store, "job").stdout


def test_a_parked_session_shows_its_approvals(tmp_path: Path) -> None:
    store, outbox = str(tmp_path / "s"), tmp_path / "outbox"
    assert park_child(store, outbox, "--die", "parked").returncode == -signal.SIGKILL
    assert stats(store, "job")["approvals"] == {"asked": 1, "decided": {}, "parked": 1}
    cli("approve", store, "job", "c-pay")
    assert park_child(store, outbox).returncode == 0
    assert stats(store, "job")["approvals"] == {
        "asked": 1,
        "decided": {"allowed-once": 1},
        "parked": 0,
    }


def test_show_says_when_each_turn_started_and_how_long_steps_and_calls_took(
    tmp_path: Path,
) -> None:
    import datetime
    import re

    store = str(tmp_path / "s")
    cli("demo", "--store", store, "--session-id", "c", "--crash", "none", "--turns", "1")
    events = [json.loads(line) for line in cli("show", store, "c", "--events").stdout.splitlines()]
    shown = cli("show", store, "c").stdout.splitlines()
    first = events[0]["time"]
    start = next(e for e in events if e["type"] == "turn/start")
    moment = datetime.datetime.fromtimestamp(start["time"] / 1000, tz=datetime.UTC)
    stamp = f"{moment:%Y-%m-%d %H:%M:%S}.{start['time'] % 1000:03d} UTC"
    assert shown[0] == f"── turn 1 ── {stamp}, +{(start['time'] - first) / 1000:.3f} s"
    step = next(e for e in events if e["type"] == "step/start")
    answer = next(e for e in events if e["type"] == "assistant/message")
    token = next(
        e
        for e in events
        if e["type"] == "assistant/chunk" and e["data"]["chunk"]["type"].endswith("-delta")
    )
    usage = answer["data"]["usage"]
    assert (
        f"  (model {answer['time'] - step['time']} ms, first token {token['time'] - step['time']} ms, "
        f"{usage['inputTokens']} in / {usage['outputTokens']} out tokens)"
    ) in shown
    calls = {e["data"]["callId"]: e["time"] for e in events if e["type"] == "tool/call"}
    for result in (e for e in events if e["type"] == "tool/result"):
        call = result["data"]["message"]["source"]["callId"]
        line = next(s for s in shown if s.startswith(f"tool {call} "))
        assert re.fullmatch(rf"tool {call} \[ok\] \({result['time'] - calls[call]} ms\)", line)


@pytest.mark.parametrize("kind", ["jsonl", "sqlite", "postgres"])
def test_ls_counts_the_turns_of_every_kind_of_store(tmp_path: Path, kind: str) -> None:
    from tests.test_settle_crash import store_of

    store = store_of(kind, tmp_path)
    cli("demo", "--store", store, "--session-id", "t", "--crash", "none", "--turns", "2")
    [row] = [json.loads(line) for line in cli("ls", store, "--json").stdout.splitlines()]
    assert row["turns"] == 3  # two turns, and the one the demo runs after its recovery


@pytest.mark.parametrize("crash", ["none", "request", "tool", "parallel-tool", "midstream"])
def test_the_checkpoints_the_log_shows_are_the_ones_the_agent_made(
    tmp_path: Path, crash: str
) -> None:
    """The demo's agent reports every flush that returned; the log, read afterwards, must
    account for each of them."""
    store = str(tmp_path / "s")
    ran = cli(
        "demo", "--store", store, "--session-id", "c", "--crash", crash, "--no-recover", "--json"
    )
    made = json.loads(ran.stdout.splitlines()[-1])["checkpoints"]
    assert stats(store, "c")["checkpoints"]["total"] == made
