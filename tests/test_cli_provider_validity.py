"""``verify`` judges what a provider accepts, not only turn brackets, and ``recover`` repairs
what appending can honestly repair (the adversary's D10); ``show`` and ``export`` answer a
tool-call block of another SDK's shape with one line, never a traceback (D13)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from agent_session.persistence_jsonl import JsonlPersistence
from agent_session.session import Runtime, Session
from tests.test_cli import cli

pytestmark = pytest.mark.process

CALL = {"type": "tool-call", "id": "c1", "name": "t", "arguments": "{}"}
FOREIGN = {"type": "tool-call", "toolCallId": "c1", "toolName": "t", "input": {}}


def assistant(content: list[dict[str, Any]]) -> dict[str, Any]:
    source = {"kind": "model", "provider": "p", "model": "m"}
    message = {"id": "a1", "role": "assistant", "source": source, "content": content}
    return {"turn": 1, "step": 1, "message": message}


def result(call: str, id: str) -> dict[str, Any]:
    block = {
        "type": "tool-result",
        "toolCallId": call,
        "isError": False,
        "content": [{"type": "text", "text": "ok"}],
    }
    source = {"kind": "tool", "callId": call}
    message = {"id": id, "role": "user", "source": source, "content": [block]}
    return {"turn": 1, "step": 1, "message": message}


def write(root: Path, id: str, case: str) -> None:
    """One closed turn whose history breaks a provider rule in the way ``case`` names."""

    async def run() -> None:
        runtime, backend = Runtime(), JsonlPersistence(str(root))
        runtime.install(backend)
        s: Session = runtime.sessions.create(id)
        s.append("turn/start", {"turn": 1})
        s.append("step/start", {"turn": 1, "step": 1})
        s.append(
            "assistant/message",
            assistant([FOREIGN if case == "foreign" else CALL]),
            surface_op="append",
        )
        if case == "unanswered":
            s.append(
                "tool/call", {"turn": 1, "step": 1, "callId": "c1", "name": "t", "arguments": "{}"}
            )
        elif case in ("twice", "orphan"):
            s.append("tool/result", result("c1", "r1"), surface_op="append")
            s.append(
                "tool/result", result("c1" if case == "twice" else "c9", "r2"), surface_op="append"
            )
        elif case == "reused":  # a second step asks for c1 again (each answered once)
            s.append("tool/result", result("c1", "r1"), surface_op="append")
            s.append("step/end", {"turn": 1, "step": 1})
            s.append("step/start", {"turn": 1, "step": 2})
            again = assistant([CALL])
            again["step"], again["message"]["id"] = 2, "a2"
            s.append("assistant/message", again, surface_op="append")
            s.append("tool/result", {**result("c1", "r2"), "step": 2}, surface_op="append")
        s.append("step/end", {"turn": 1, "step": 1})
        s.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
        await runtime.sessions.flush(s)
        await backend.aclose()

    asyncio.run(run())


@pytest.mark.parametrize(
    ("case", "problem"),
    [
        ("unanswered", "tool call c1 has 0 results"),
        ("twice", "tool call c1 has 2 results"),
        ("orphan", "tool result for c9 answers no open tool call"),
        ("foreign", "not this format's tool-call shape"),
        ("reused", "tool call id c1 is asked for twice (history messages 0 and 2)"),
    ],
)
def test_verify_reports_a_history_no_provider_accepts(
    tmp_path: Path, case: str, problem: str
) -> None:
    write(tmp_path, "s", case)
    out = cli("verify", str(tmp_path), check_rc=2).stdout
    assert out.startswith("s: invalid — "), out
    assert problem in out, out


def test_recover_answers_the_unanswered_call_and_the_history_exports(tmp_path: Path) -> None:
    write(tmp_path, "s", "unanswered")
    out = cli("recover", str(tmp_path)).stdout
    assert out.startswith("s: repaired (invalid)"), out
    assert cli("verify", str(tmp_path)).stdout.startswith("s: balanced"), out
    exported = json.loads(cli("export", str(tmp_path), "s", "--format", "openai").stdout)
    tool = [m for m in exported["messages"] if m["role"] == "tool"]
    assert [m["tool_call_id"] for m in tool] == ["c1"]
    assert "outcome is unknown" in tool[0]["content"]
    assert cli("recover", str(tmp_path)).stdout.startswith("0 repaired, 1 healthy"), out


@pytest.mark.parametrize("case", ["twice", "orphan", "foreign", "reused"])
def test_recover_says_what_it_cannot_repair_and_writes_nothing(tmp_path: Path, case: str) -> None:
    write(tmp_path, "s", case)
    log = tmp_path / "_no-cwd" / "s" / "session.jsonl"
    before = log.read_bytes()
    out = cli("recover", str(tmp_path), check_rc=2).stdout
    assert out.startswith("s: not repaired (invalid)"), out
    assert log.read_bytes() == before


def test_show_and_export_answer_a_foreign_tool_call_block_in_one_line(tmp_path: Path) -> None:
    write(tmp_path, "s", "foreign")
    shown = cli("show", str(tmp_path), "s")
    assert "(a tool-call block of another shape)" in shown.stdout
    assert "toolCallId" in shown.stdout
    exported = cli("export", str(tmp_path), "s", "--format", "anthropic", check_rc=None)
    assert exported.returncode != 0
    assert "Traceback" not in exported.stderr
    assert len(exported.stderr.strip().splitlines()) == 1, exported.stderr
    assert "not this format's tool-call shape" in exported.stderr


@pytest.mark.parametrize("format", ["openai", "anthropic", "pydantic-ai"])
def test_export_never_prints_a_request_with_a_reused_call_id(tmp_path: Path, format: str) -> None:
    write(tmp_path, "s", "reused")
    exported = cli("export", str(tmp_path), "s", "--format", format, check_rc=None)
    assert exported.returncode != 0
    assert exported.stdout == ""
    assert "tool call id c1 is asked for twice" in exported.stderr
