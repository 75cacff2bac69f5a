"""The user's front door: one import (``agent_session``), one way to open a store
(``open_store``), the crash-state API (``Session.interrupted``), the warning for a
half-installed stack, and the named error leaves."""

from __future__ import annotations

import copy
import logging
import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import agent_session
from agent_session import (
    AgentRuntime,
    JsonlPersistence,
    MemoryPersistence,
    MemoryStore,
    ScriptedCall,
    ScriptedModel,
    ScriptedStep,
    SessionBackendStateError,
    SessionError,
    SessionPersistence,
    SessionSeqError,
    SqlitePersistence,
    checkpoint_policy,
    open_store,
)
from agent_session.recovery import closers
from tests.agents import stack

ROOT = Path(__file__).resolve().parent.parent

EXPORTED = [
    "AWAITING_APPROVAL",
    "AWAITING_BUDGET",
    "Agent",
    "AgentRuntime",
    "Applied",
    "ApprovalError",
    "ApprovalExpiredError",
    "ApprovalMismatchError",
    "ApprovalNotPendingError",
    "ApprovalPendingError",
    "BudgetError",
    "BudgetExceededError",
    "BudgetPendingError",
    "CompactionPolicy",
    "DurableRunHooks",
    "EventLogSaver",
    "EventLogSession",
    "EventLogSessionService",
    "EventLogSessionStore",
    "Forked",
    "Interruption",
    "JsonValueError",
    "JsonlPersistence",
    "Keyring",
    "LoggedRequest",
    "MemoryPersistence",
    "MemoryStore",
    "ModelRequest",
    "ModelUnavailableError",
    "NotApplied",
    "ParkedCall",
    "PendingApproval",
    "PostgresPersistence",
    "PriceTableError",
    "RequestSettings",
    "Runtime",
    "STORE_ENV",
    "ScriptedCall",
    "ScriptedModel",
    "ScriptedStep",
    "Session",
    "SessionBackendStateError",
    "SessionBusyError",
    "SessionChangedError",
    "SessionCollisionError",
    "SessionCopyError",
    "SessionDataError",
    "SessionDurabilityError",
    "SessionErasedError",
    "SessionError",
    "SessionEvent",
    "SessionEventError",
    "SessionForkError",
    "SessionFormatUnsupportedError",
    "SessionHeader",
    "SessionHeaderError",
    "SessionHeldError",
    "SessionLogTooLargeError",
    "SessionNotFoundError",
    "SessionNotHeldError",
    "SessionNotLiveError",
    "SessionOpenTurnError",
    "SessionPersistence",
    "SessionPersistenceCorruptionError",
    "SessionReentrancyError",
    "SessionReplayError",
    "SessionSealError",
    "SessionSeqError",
    "SessionStoreEntryError",
    "SigningError",
    "SqlitePersistence",
    "TOOL_NOT_STARTED",
    "TOOL_OUTCOME_UNKNOWN",
    "ToolCall",
    "ToolResult",
    "TraceExportError",
    "TraceSettingsError",
    "Unknown",
    "approve",
    "arguments_digest",
    "assistant_message",
    "budget_report",
    "check_store_log",
    "checkpoint_policy",
    "current_branch",
    "decide",
    "effect_of_mcp",
    "fork_session",
    "hold_live",
    "labels_of",
    "logged_requests",
    "model_message",
    "new_key",
    "open_store",
    "otel_exporter",
    "pending_approvals",
    "place_hold",
    "purge_store",
    "redaction",
    "reject",
    "release_hold",
    "rewind_session",
    "session_stats",
    "set_approval_policy",
    "set_budget",
    "set_labels",
    "set_stored_budget",
    "set_stored_labels",
    "sign_anchors",
    "spend_windows",
    "step_end",
    "step_start",
    "tool_call",
    "tool_call_block",
    "tool_result",
    "tool_result_message",
    "turn_end",
    "turn_start",
    "user_approval",
    "user_message",
]


def test_the_exported_names_are_pinned_and_each_resolves() -> None:
    assert agent_session.__all__ == EXPORTED
    for name in EXPORTED:
        assert getattr(agent_session, name) is not None, name
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        agent_session.Nope  # noqa: B018


def test_importing_the_package_loads_nothing_it_exports() -> None:
    code = (
        "import sys, agent_session; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'agents' or "
        "m.split('.')[:2] in ([f'agent_session', p] for p in "
        "('agent_loop', 'persistence_jsonl', 'persistence_sqlite', 'recovery'))))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT
    )
    assert out.stdout.strip() == "[]"


# --- open_store ---------------------------------------------------------------------------------


def test_open_store_opens_each_kind(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert isinstance(open_store(tmp_path / "logs"), JsonlPersistence)
    assert isinstance(open_store(f"sqlite:///{tmp_path}/s.db"), SqlitePersistence)
    monkeypatch.setenv("AGENT_SESSION_STORE", f"sqlite:///{tmp_path}/env.db")
    assert isinstance(open_store(), SqlitePersistence)
    monkeypatch.delenv("AGENT_SESSION_STORE")
    with pytest.raises(ValueError, match="no store given, and AGENT_SESSION_STORE is not set"):
        open_store()


def test_open_store_forwards_the_options_its_backend_takes(tmp_path: Path) -> None:
    assert isinstance(open_store(tmp_path / "logs", max_log_bytes=1000), JsonlPersistence)
    with pytest.raises(TypeError, match="max_log_bytes must be a positive safe integer"):
        open_store(tmp_path / "logs", max_log_bytes=0)  # it reached the backend
    with pytest.raises(TypeError, match="write_batch_max_delay_ms"):
        open_store(f"sqlite:///{tmp_path}/s.db", write_batch_max_delay_ms=-1)
    with pytest.raises(ValueError, match=r"journal_mode: not an option of a JSONL store"):
        open_store(tmp_path / "logs", journal_mode="wal")
    with pytest.raises(ValueError, match=r"max_log_bytes: not an option of a SQLite store"):
        open_store(f"sqlite:///{tmp_path}/s.db", max_log_bytes=5)


@pytest.mark.parametrize(
    ("given", "meant"),
    [
        ("sessions.db", "sqlite:///sessions.db"),
        ("sqlite:/sessions.db", "sqlite:///sessions.db"),
        ("sqlite://sessions.db", "sqlite:///sessions.db"),
        ("postgresql:/db", "postgresql://db"),
        ("postgres:db", "postgres://db"),
    ],
)
def test_a_near_miss_says_what_was_probably_meant(
    given: str, meant: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match=f"did you mean '{meant}'"):
        open_store(given)


def test_an_existing_database_file_is_not_taken_for_a_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    sqlite3.connect("chat").close()  # no suffix, but a SQLite file all the same
    Path("chat").write_bytes(b"SQLite format 3\0" + bytes(100))
    with pytest.raises(ValueError, match="did you mean 'sqlite:///chat'"):
        open_store("chat")
    os.mkdir("logs.db")  # a directory may be named anything
    assert isinstance(open_store("logs.db"), JsonlPersistence)


def test_an_unknown_scheme_names_the_kinds_there_are() -> None:
    with pytest.raises(ValueError, match="give a directory of JSONL logs, a sqlite:///"):
        open_store("redis://localhost/0")


def test_a_missing_extra_gives_the_install_command() -> None:
    code = (
        "import sys; sys.modules['agent_session.persistence_postgres'] = None\n"
        "from agent_session import open_store\n"
        "try:\n    open_store('postgresql://u:canary-pw@h/db')\n"
        "except ValueError as e:\n    print(e)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT
    )
    assert "a PostgreSQL store needs the postgres extra: pip install" in out.stdout
    assert "agent-session-runtime[postgres]" in out.stdout
    assert "canary-pw" not in out.stdout


# --- Session.interrupted ------------------------------------------------------------------------


def _killed_mid_step() -> list[ScriptedStep]:
    calls = [
        ScriptedCall("call-sent", "write_file", ['{"path":"a"}']),
        ScriptedCall("call-never", "write_file", ['{"path":"b"}']),
    ]
    return [ScriptedStep(calls=calls), ScriptedStep(text=["ok"])]


async def test_interrupted_names_the_turn_and_how_each_call_was_answered() -> None:
    store = MemoryStore()
    runtime, session, agent, _, _ = stack(_killed_mid_step())
    backend = MemoryPersistence(store, repair=closers)
    runtime.install(backend)
    runtime.install(checkpoint_policy)

    class Crash(BaseException):
        pass

    on_disk = MemoryStore()

    async def crash(call: Any, downstream: Any) -> Any:
        # the process dies inside the first body: what is stored then is all a restart finds
        on_disk.logs = copy.deepcopy(store.logs)
        raise Crash

    runtime.hooks.wrap("tools/execute", crash)  # inside the policy's checkpoint
    assert session.interrupted is None
    with pytest.raises(Crash):
        await agent.run_turn("go")
    async with AgentRuntime() as later:
        later.install(MemoryPersistence(on_disk, repair=closers))
        resumed = await later.sessions.resume(session.id)
        found = resumed.interrupted
        assert found is not None
        assert (found.turn, found.outcome_unknown, found.not_started) == (
            1,
            ("call-sent",),
            ("call-never",),
        )
        model = ScriptedModel([ScriptedStep(text=["Checked."])])
        later.models.register("scripted", model)
        assert await later.agent(resumed, model="scripted/m").run_turn("and?") == {
            "kind": "completed"
        }
        assert resumed.interrupted is None  # the last turn is no longer the interrupted one


# --- a half-installed stack warns once ------------------------------------------------------------


async def _one_turn(caplog: pytest.LogCaptureFixture, **options: Any) -> list[str]:
    caplog.clear()
    runtime = AgentRuntime(**options)
    runtime.install(MemoryPersistence(repair=closers))
    if options.pop("policy", False):
        runtime.install(checkpoint_policy)
    runtime.models.register("scripted", ScriptedModel([ScriptedStep(text=["a"])] * 2))
    session = runtime.sessions.create("s")
    agent = runtime.agent(session, model="scripted/m")
    with caplog.at_level(logging.WARNING, logger="agent_loop"):
        await agent.run_turn("one")
        await agent.run_turn("two")
    await runtime.__aexit__(None, None, None)
    return [r.getMessage() for r in caplog.records if r.name == "agent_loop"]


async def test_turns_over_a_store_without_the_policy_warn_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    warned = await _one_turn(caplog)
    assert len(warned) == 1
    assert "without the checkpoint policy" in warned[0]
    assert "runtime.install(checkpoint_policy)" in warned[0]
    assert "warn_without_checkpoints=False" in warned[0]


async def test_the_policy_or_the_opt_out_silences_the_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    runtime = AgentRuntime()
    runtime.install(MemoryPersistence(repair=closers))
    dispose = runtime.install(checkpoint_policy)
    assert runtime.checkpoints == 1
    dispose()
    assert runtime.checkpoints == 0
    caplog.clear()
    runtime = AgentRuntime()
    runtime.install(MemoryPersistence(repair=closers))
    runtime.install(checkpoint_policy)
    runtime.models.register("scripted", ScriptedModel([ScriptedStep(text=["a"])]))
    with caplog.at_level(logging.WARNING, logger="agent_loop"):
        await runtime.agent(runtime.sessions.create("s"), model="scripted/m").run_turn("x")
    await runtime.__aexit__(None, None, None)
    assert [r for r in caplog.records if r.name == "agent_loop"] == []
    assert await _one_turn(caplog, warn_without_checkpoints=False) == []


# --- error leaves ---------------------------------------------------------------------------------


async def test_each_condition_has_its_own_error_leaf() -> None:
    backend: SessionPersistence = MemoryPersistence(repair=closers)
    runtime = AgentRuntime()
    runtime.install(backend)
    with pytest.raises(SessionBackendStateError, match="already installed in another runtime"):
        AgentRuntime().install(backend)
    await backend.create({"version": 0, "id": "s", "createdAt": 1, "delegationDepth": 0})
    session = runtime.sessions.create("x")
    event = session.append("turn/start", {"turn": 1})
    with pytest.raises(SessionSeqError, match=r'append seq mismatch for "s": expected 0'):
        await backend.append("s", [event.to_json() | {"seq": 3}])
    await runtime.__aexit__(None, None, None)
    with pytest.raises(SessionBackendStateError, match="is closed"):
        await backend.load("s")
    assert issubclass(agent_session.JsonValueError, SessionError)
    assert issubclass(agent_session.JsonValueError, TypeError)


async def test_steering_reaches_the_next_step_of_the_running_turn() -> None:
    steps = [
        ScriptedStep(calls=[ScriptedCall("c1", "read_file", ['{"path":"x"}'])]),
        ScriptedStep(text=["Noted."]),
    ]
    runtime, session, agent, model, _ = stack(steps)

    async def steer_while_the_tool_runs(call: Any, downstream: Any) -> Any:
        agent.steer("also check y")
        return await downstream(call)

    runtime.hooks.wrap("tools/execute", steer_while_the_tool_runs)
    assert await agent.run_turn("check x") == {"kind": "completed"}
    second = model.requests[1].messages
    assert second[-1]["role"] == "user"
    assert second[-1]["content"] == [{"type": "text", "text": "also check y"}]
    splices = [e.data["target"] for e in session.events if e.type == "agent/inbox/spliced"]
    assert splices.count("next-step") == 2  # queued, then claimed by step 2
