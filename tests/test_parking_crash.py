"""Parked approvals across real processes, on every store: an agent (``tests/park_child.py``)
parks its ``pay`` call and is SIGKILLed (or exits); ``agent-session`` lists and decides it from
another process; a third process resumes the agent. Kills in every window around the ask, the
decision and the approved body. The outbox (the outside world: every tool effect and every
model request) and the log must show: an approved call runs at most once and only after an
``allowed-once``; no model request is repeated; a parked call is never answered
``TOOL_OUTCOME_UNKNOWN``; the reference loads every log."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import pytest

from agent_session import arguments_digest, open_store
from agent_session.interchange.export import check_transcript
from agent_session.session import Session
from agent_session.session.persistence.failpoints import FAILPOINT_ENV
from tests.forkserver import Child, run_cli, run_module, start_module
from tests.test_cli import cli
from tests.test_reference_interop import run_reference
from tests.test_settle_crash import store_of
from tests.together import let_go_together, started

pytestmark = pytest.mark.process

KINDS = ["jsonl", "sqlite", "postgres"]
ROOT = Path(__file__).parent.parent
DIGEST = arguments_digest('{"amount": 5}')


def child(store: str, outbox: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return run_module("tests.park_child", store, str(outbox), *args)


def effects(outbox: Path) -> list[str]:
    return outbox.read_text().splitlines() if outbox.exists() else []


async def stored(store: str) -> list[Any]:
    """The log as a cold load returns it (repairing it if it needs it)."""
    backend = open_store(store)
    try:
        return list((await backend.load("job")).events)
    finally:
        await backend.aclose()


def results(log: list[Any]) -> dict[str, Any]:
    """Each call's model-visible result (its error code, else its text), checking on the way
    that the history is one a provider accepts."""
    session = Session.create("check", seed=log)
    check_transcript(session.derive_messages())
    out: dict[str, Any] = {}
    for event in log:
        if event.type == "tool/result" and event.seq in session.surface.nodes:
            block = event.data["message"]["content"][0]
            code = (event.data.get("error") or {}).get("code")
            out[block["toolCallId"]] = code or block["content"][0]["text"]
    return out


def check_invariants(log: list[Any], outbox: Path, store: str) -> None:
    """What no window may break: ``pay`` ran at most once, and only after an ``allowed-once``;
    it is answered ``TOOL_OUTCOME_UNKNOWN`` only if its approved body had started (its
    ``tool/call`` was recorded again after the decision); the reference loads the log as it
    is (a JSONL or SQLite store)."""
    reference_agrees(store, log)
    pays = effects(outbox).count("pay c-pay")
    assert pays <= 1
    decided = [e for e in log if e.type == "approval/decided"]
    allowed = [e.seq for e in decided if e.data["outcome"] == "allowed-once"]
    if pays:
        assert allowed, "pay ran without an allowed-once"
    for event in log:
        if event.type != "tool/result" or event.data["message"]["source"]["callId"] != "c-pay":
            continue
        if (event.data.get("error") or {}).get("code") == "TOOL_OUTCOME_UNKNOWN":
            starts = [
                e.seq
                for e in log
                if e.type == "tool/call" and e.data["callId"] == "c-pay" and e.seq < event.seq
            ]
            assert allowed, "an unapproved parked call was answered TOOL_OUTCOME_UNKNOWN"
            assert starts[-1] > allowed[0]


def reference_agrees(store: str, log: list[Any]) -> None:
    """The reference loads the stored session (on a copy: its load may write) with exactly
    the events ``log`` holds."""
    if store.startswith("postgresql://"):
        return  # (the reference has no PostgreSQL backend)
    with tempfile.TemporaryDirectory() as scratch:
        if store.startswith("sqlite:///"):
            copy = Path(scratch, "sessions.db")
            shutil.copy(store.removeprefix("sqlite:///"), copy)
            theirs = run_reference("load-sqlite.mjs", str(copy), "job")
        else:
            shutil.copytree(store, Path(scratch, "s"))
            theirs = run_reference("load.mjs", str(Path(scratch, "s")), "job", "none")
    assert "error" not in theirs, theirs["error"]
    assert theirs["events"] == [e.to_json() for e in log]


def park(store: str, outbox: Path, die: str, *extra: str) -> None:
    run = child(store, outbox, "--die", die, *extra)
    if die == "none":
        assert run.returncode == 0, run.stderr
        reason = json.loads(run.stdout)
        assert reason["kind"] == "awaiting-approval"
        assert [a["callId"] for a in reason["approvals"]] == ["c-pay"]
    else:
        assert run.returncode == -signal.SIGKILL, run.stderr


def resume(store: str, outbox: Path, *extra: str) -> Any:
    run = child(store, outbox, *extra)
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout)


@pytest.mark.parametrize("kind", KINDS)
async def test_killed_while_parked_listed_approved_elsewhere_and_resumed_in_a_third(
    tmp_path: Path, kind: str
) -> None:
    store, outbox = store_of(kind, tmp_path), tmp_path / "outbox"
    park(store, outbox, "parked")
    assert effects(outbox) == ["request 0", "lookup c-look"]

    listed = [json.loads(line) for line in cli("ls", store, "--json").stdout.splitlines()]
    assert [row["state"] for row in listed] == ["awaiting-approval"]
    verified = cli("verify", store, "job").stdout
    assert "job: awaiting-approval — " in verified
    assert f'call "c-pay" (tool "pay", arguments {DIGEST}) awaits approval: moves money' in verified
    assert "awaiting-approval" in cli("show", store, "job").stdout
    [pending] = [json.loads(line) for line in cli("approvals", store, "--json").stdout.splitlines()]
    assert pending["sessionId"] == "job"
    assert (pending["callId"], pending["toolName"]) == ("c-pay", "pay")
    assert (pending["reason"], pending["argumentsDigest"]) == ("moves money", DIGEST)
    cli("recover", store)  # nothing to repair: the parked turn stays parked
    assert "awaiting-approval" in cli("verify", store).stdout

    by = ["--by", "alice", "--reason", "checked"]
    assert "decided" in cli("approve", store, "job", "c-pay", "--digest", DIGEST, *by).stdout
    assert "already decided" in cli("reject", store, "job", "c-pay", check_rc=3).stderr
    assert "decided allowed-once" in cli("approvals", store).stdout

    assert resume(store, outbox) == {"kind": "completed"}
    assert effects(outbox) == [
        "request 0",
        "lookup c-look",
        "pay c-pay",
        "notify c-notify",
        "request 1",  # the one request after the results: none repeated
    ]
    assert resume(store, outbox) is None  # nothing left to do
    log = await stored(store)
    check_invariants(log, outbox, store)
    assert results(log) == {"c-look": "found a", "c-pay": "paid 5", "c-notify": "notified"}
    [decision] = [e.data for e in log if e.type == "approval/decided"]
    assert (decision["decidedBy"], decision["reason"]) == ("alice", "checked")
    assert decision["argumentsDigest"] == DIGEST
    assert cli("approvals", store).stdout.strip() == "no tool call waits for approval"


@pytest.mark.parametrize("kind", KINDS)
async def test_parked_at_a_clean_exit_rejected_elsewhere_and_resumed(
    tmp_path: Path, kind: str
) -> None:
    store, outbox = store_of(kind, tmp_path), tmp_path / "outbox"
    park(store, outbox, "none")
    cli("reject", store, "job", "c-pay", "--reason", "wrong account")
    assert resume(store, outbox) == {"kind": "completed"}
    assert effects(outbox) == ["request 0", "lookup c-look", "notify c-notify", "request 1"]
    log = await stored(store)
    check_invariants(log, outbox, store)
    assert results(log)["c-pay"] == 'Error: the user rejected tool "pay"'


@pytest.mark.parametrize("kind", KINDS)
async def test_a_passed_deadline_is_cancelled_and_the_body_never_runs(
    tmp_path: Path, kind: str
) -> None:
    store, outbox = store_of(kind, tmp_path), tmp_path / "outbox"
    park(store, outbox, "parked", "--expires", "0.001")
    refused = cli("approve", store, "job", "c-pay", check_rc=4)
    assert "expired" in refused.stderr
    assert "decided cancelled" in cli("approvals", store).stdout
    assert resume(store, outbox) == {"kind": "completed"}
    log = await stored(store)
    check_invariants(log, outbox, store)
    assert "pay c-pay" not in effects(outbox)
    assert results(log)["c-pay"] == 'Error: approval for tool "pay" was cancelled'


@pytest.mark.parametrize("kind", KINDS)
async def test_two_deciders_at_once_one_wins_and_the_other_is_told(
    tmp_path: Path, kind: str
) -> None:
    store, outbox = store_of(kind, tmp_path), tmp_path / "outbox"
    park(store, outbox, "parked")
    racers = [
        start_module("agent_session", verb, store, "job", "c-pay", stdin=subprocess.DEVNULL)
        for verb in ("approve", "reject")
    ]
    finished = [(racer.wait(timeout=120), *racer.communicate()) for racer in racers]
    codes = sorted(code for code, _, _ in finished)
    assert codes[0] == 0
    assert codes[1] in (2, 3), finished  # already decided, or a writer held it meanwhile
    log = await stored(store)
    [decision] = [e.data for e in log if e.type == "approval/decided"]
    assert resume(store, outbox) == {"kind": "completed"}
    check_invariants(await stored(store), outbox, store)
    won = "approve" if finished[0][0] == 0 else "reject"
    assert decision["outcome"] == ("allowed-once" if won == "approve" else "rejected")
    assert effects(outbox).count("pay c-pay") == (1 if won == "approve" else 0)


def holding(store: str, outbox: Path) -> Child:
    """An agent process that parked the job and stays alive, its live writer."""
    agent = started("tests.park_child", store, str(outbox), "--hold")
    assert agent.stdout is not None
    assert json.loads(agent.stdout.readline())["kind"] == "awaiting-approval"  # parked, alive
    return agent


def let_go(agent: Child) -> None:
    assert agent.stdin is not None
    agent.stdin.write("exit\n")
    agent.stdin.flush()
    assert agent.wait(timeout=120) == 0, agent.communicate()


@pytest.mark.parametrize("kind", KINDS)
async def test_every_command_that_writes_leaves_a_session_a_live_agent_holds_alone(
    tmp_path: Path, kind: str
) -> None:
    """The single-writer rule for each command that writes: ``rm`` and ``convert`` exit 2,
    ``copy`` says the source is live and copies nothing, ``recover`` leaves it untouched; the
    log is what the agent wrote, and the agent goes on."""
    store, outbox = store_of(kind, tmp_path), tmp_path / "outbox"
    agent = holding(store, outbox)
    before = [e.to_json() for e in await stored(store)]
    assert "being written by another writer" in cli("rm", store, "job", check_rc=2).stderr
    if kind == "jsonl":
        cli("convert", store, "job", "--to", "zstd", check_rc=2)
    target = str(tmp_path / "copy")
    copied = cli("copy", store, target, check_rc=2).stdout
    assert "job: live — " in copied
    assert "copied 0 session(s)" in copied
    recovered = cli("recover", store).stdout
    assert "0 repaired" in recovered
    assert [e.to_json() for e in await stored(store)] == before
    let_go(agent)
    cli("reject", store, "job", "c-pay")
    assert resume(store, outbox) == {"kind": "completed"}
    check_invariants(await stored(store), outbox, store)


@pytest.mark.parametrize("kind", KINDS)
async def test_no_decision_is_written_while_the_parking_agent_is_alive(
    tmp_path: Path, kind: str
) -> None:
    """``approve`` and ``reject`` under a live writer exit 2 and write nothing; once the agent
    exits, the decision lands and the next resume carries it out."""
    store, outbox = store_of(kind, tmp_path), tmp_path / "outbox"
    agent = holding(store, outbox)
    for verb in ("approve", "reject"):
        refused = cli(verb, store, "job", "c-pay", check_rc=2)
        assert "a live process holds the session" in refused.stderr
    listed = json.loads(cli("approvals", store, "--json").stdout)
    assert "decided" not in listed  # nothing was written under the live writer
    let_go(agent)
    cli("approve", store, "job", "c-pay", "--digest", DIGEST[:19])  # the prefix it lists
    again = cli("approve", store, "job", "c-pay", check_rc=3)
    assert "already decided allowed-once by " in again.stderr
    assert " UTC" in again.stderr
    assert resume(store, outbox) == {"kind": "completed"}
    check_invariants(await stored(store), outbox, store)
    assert effects(outbox).count("pay c-pay") == 1


@pytest.mark.parametrize("kind", KINDS)
async def test_two_resumers_of_an_approved_call_run_it_once_and_record_what_it_did(
    tmp_path: Path, kind: str
) -> None:
    """Two processes let go at once to carry out one approval: the body runs once, and the
    log tells the model what it did (never that it was refused)."""
    store, outbox = store_of(kind, tmp_path), tmp_path / "outbox"
    park(store, outbox, "parked")
    cli("approve", store, "job", "c-pay")
    answers = let_go_together("tests.park_child", store, str(outbox), "--barrier")
    assert {"kind": "completed"} in answers, answers
    assert effects(outbox).count("pay c-pay") == 1
    log = await stored(store)
    assert results(log)["c-pay"] == "paid 5"
    check_invariants(log, outbox, store)


@pytest.mark.parametrize("kind", KINDS)
async def test_a_kill_before_the_ask_is_durable_never_runs_the_call(
    tmp_path: Path, kind: str
) -> None:
    store, outbox = store_of(kind, tmp_path), tmp_path / "outbox"
    park(store, outbox, "before-ask")
    assert cli("approvals", store).stdout.strip() == "no tool call waits for approval"
    reason = resume(store, outbox)  # settles the crash: pay is asked again, fails closed
    assert reason == {"kind": "completed"}
    log = await stored(store)
    check_invariants(log, outbox, store)
    assert "pay c-pay" not in effects(outbox)
    assert effects(outbox).count("notify c-notify") == 1


@pytest.mark.parametrize("kind", KINDS)
async def test_a_kill_while_an_answerer_in_process_thinks_leaves_the_call_parked(
    tmp_path: Path, kind: str
) -> None:
    store, outbox = store_of(kind, tmp_path), tmp_path / "outbox"
    park(store, outbox, "in-answerer")
    [pending] = [json.loads(line) for line in cli("approvals", store, "--json").stdout.splitlines()]
    assert pending["callId"] == "c-pay"
    cli("approve", store, "job", "c-pay")
    assert resume(store, outbox) == {"kind": "completed"}
    check_invariants(await stored(store), outbox, store)
    assert effects(outbox).count("pay c-pay") == 1
    assert [e for e in effects(outbox) if e.startswith("request")] == ["request 0", "request 1"]


FAILPOINTS = {
    "jsonl": "append:after-write",
    "sqlite": "sqlite:append:before-commit",
    "postgres": "postgres:append:before-commit",
}


@pytest.mark.parametrize("kind", KINDS)
async def test_a_decider_killed_while_appending_leaves_one_decision_or_none(
    tmp_path: Path, kind: str
) -> None:
    store, outbox = store_of(kind, tmp_path), tmp_path / "outbox"
    park(store, outbox, "parked")
    env = {**os.environ, FAILPOINT_ENV: FAILPOINTS[kind]}
    killed = run_cli("approve", store, "job", "c-pay", env=env)
    assert killed.returncode == -signal.SIGKILL
    again = cli("approve", store, "job", "c-pay", check_rc=None)
    assert again.returncode in (0, 3), again.stderr  # decided now, or the first one landed
    assert resume(store, outbox) == {"kind": "completed"}
    log = await stored(store)
    check_invariants(log, outbox, store)
    assert len([e for e in log if e.type == "approval/decided"]) == 1
    assert effects(outbox).count("pay c-pay") == 1


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("die", ["mark", "effect"])
async def test_a_kill_while_carrying_out_an_approval_never_runs_it_twice(
    tmp_path: Path, kind: str, die: str
) -> None:
    store, outbox = store_of(kind, tmp_path), tmp_path / "outbox"
    park(store, outbox, "parked")
    cli("approve", store, "job", "c-pay")
    killed = child(store, outbox, "--die", die)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert cli("approvals", store).stdout.strip() == "no tool call waits for approval"
    assert resume(store, outbox) == {"kind": "completed"}  # settles: pay is unsafe
    log = await stored(store)
    check_invariants(log, outbox, store)
    assert effects(outbox).count("pay c-pay") == (1 if die == "effect" else 0)
    assert results(log)["c-pay"] == "TOOL_OUTCOME_UNKNOWN"
    assert [e for e in effects(outbox) if e.startswith("request")] == ["request 0", "request 1"]


@pytest.mark.parametrize("answer", ["allowed-once", "rejected"])
async def test_an_answer_in_process_writes_the_reference_s_pair(
    tmp_path: Path, answer: str
) -> None:
    store, outbox = str(tmp_path / "sessions"), tmp_path / "outbox"
    assert resume(store, outbox, "--answer", answer) == {"kind": "completed"}
    log = await stored(store)
    [decision] = [e.data for e in log if e.type == "approval/decided"]
    assert list(decision) == ["id", "outcome"]  # no digest: decided in the asking process
    [asked] = [e.data for e in log if e.type == "approval/asked"]
    assert list(asked) == ["id", "toolName", "callId", "reason", "argumentsDigest"]
    assert effects(outbox).count("pay c-pay") == (1 if answer == "allowed-once" else 0)


@pytest.mark.parametrize("kind", ["jsonl", "sqlite"])
async def test_the_reference_loads_parked_and_resumed_logs(tmp_path: Path, kind: str) -> None:
    """The reference reads a parked turn as one a crash interrupted: it closes it as its crash
    repair does (the parked call ``TOOL_OUTCOME_UNKNOWN``, the calls after it
    ``TOOL_NOT_STARTED``); a decided and resumed log loads unchanged."""
    store, outbox = store_of(kind, tmp_path), tmp_path / "outbox"
    park(store, outbox, "parked")

    def reference_load() -> dict[str, Any]:
        copy = tmp_path / "copy"
        shutil.rmtree(copy, ignore_errors=True)
        if kind == "jsonl":
            shutil.copytree(tmp_path / "sessions", copy)
            return run_reference("load.mjs", str(copy), "job", "none")
        copy.mkdir()
        shutil.copy(tmp_path / "sessions.db", copy / "sessions.db")
        return run_reference("load-sqlite.mjs", str(copy / "sessions.db"), "job")

    ours = [e.to_json() for e in await stored(store)]
    theirs = reference_load()
    assert "error" not in theirs, theirs["error"]
    assert theirs["events"][: len(ours)] == ours
    closing = theirs["events"][len(ours) :]
    assert [e["type"] for e in closing] == ["tool/result", "tool/result", "step/end", "turn/end"]
    assert [e["data"]["error"]["code"] for e in closing[:2]] == [
        "TOOL_OUTCOME_UNKNOWN",
        "TOOL_NOT_STARTED",
    ]
    cli("approve", store, "job", "c-pay")
    assert resume(store, outbox) == {"kind": "completed"}
    ours = [e.to_json() for e in await stored(store)]
    theirs = reference_load()
    assert theirs["events"] == ours
