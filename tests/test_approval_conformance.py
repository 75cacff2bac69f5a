"""Every case of the reference's approval corpus (``conformance/upstream-approval-v0.jsonl``,
copied gzipped to ``tests/data``) through ``JsonlPersistence``: ``inspect`` and ``load`` return
the reference's header and events (so the approval events keep their data and key order), the
file after ``load`` is byte-identical to what the reference left, and the policy fold over the
loaded events is the reference's ``effectiveApprovalPolicy``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agent_session.agent_loop.approval import effective_policy
from agent_session.persistence_jsonl import JsonlPersistence
from tests.corpus import case_id, cases

CASES = cases("upstream-approval-v0")


def _plant(root: Path, case: dict[str, Any]) -> Path:
    path = root / case["path"]
    path.parent.mkdir(parents=True)
    path.write_bytes(b"".join(line.encode() + b"\n" for line in case["log_lines"]))
    return path


def _as_json(stored: Any) -> dict[str, Any]:
    return {"meta": stored.header.to_json(), "events": [e.to_json() for e in stored.events]}


def test_the_corpus_has_every_scenario() -> None:
    assert len(CASES) == 16
    assert {c["scenario"] for c in CASES} == {
        "approve",
        "reject",
        "unavailable",
        "never",
        "cancel",
        "crash-pending",
        "switch",
        "no-service",
    }


@pytest.mark.parametrize("case", CASES, ids=case_id)
async def test_each_case_loads_as_the_reference_loads_it(
    tmp_path: Path, case: dict[str, Any]
) -> None:
    inspected_root, loaded_root = tmp_path / "a", tmp_path / "b"
    _plant(inspected_root, case)
    path = _plant(loaded_root, case)
    backend = JsonlPersistence(inspected_root)
    assert _as_json(await backend.inspect(case["session_id"])) == case["inspect"]
    await backend.aclose()
    backend = JsonlPersistence(loaded_root)
    loaded = await backend.load(case["session_id"])
    await backend.aclose()
    assert _as_json(loaded) == case["load"]
    after = [line.decode() for line in path.read_bytes().split(b"\n")[:-1]]
    assert after == case["file_after_load_lines"]
    assert effective_policy(loaded.events) == case["policy_after_load"]
    # the approval events keep the reference's key order through our load (the equality of
    # the dicts above cannot see the order)
    ours = [list(e.to_json()["data"]) for e in loaded.events if e.type.startswith("approval/")]
    theirs = [list(e["data"]) for e in case["load"]["events"] if e["type"].startswith("approval/")]
    assert ours == theirs


def _events(scenario: str, case: str = "as-written") -> list[dict[str, Any]]:
    row = next(c for c in CASES if (c["scenario"], c["case"]) == (scenario, case))
    return [json.loads(line) for line in row["log_lines"][1:]]


def _result_text(events: list[dict[str, Any]], call_id: str) -> tuple[str, bool, Any]:
    (result,) = [
        e
        for e in events
        if e["type"] == "tool/result" and e["data"]["message"]["source"]["callId"] == call_id
    ]
    block = result["data"]["message"]["content"][0]
    return block["content"][0]["text"], block["isError"], result["data"].get("error")


@pytest.mark.parametrize(
    ("scenario", "outcome"),
    [("reject", "rejected"), ("unavailable", "unavailable"), ("never", "rejected")],
)
def test_the_denial_texts_are_the_reference_s(scenario: str, outcome: Any) -> None:
    from agent_session.agent_loop.approval import denial

    text, is_error, error = _result_text(_events(scenario), "call-a-2")
    assert (text, is_error, error) == (f"Error: {denial(outcome, 'write_file')}", True, None)
    decided = [e["data"]["outcome"] for e in _events(scenario) if e["type"] == "approval/decided"]
    assert decided == [outcome]


def test_no_service_refuses_with_the_ask_s_reason_and_no_audit_events() -> None:
    from agent_session.agent_loop.approval import unsupported

    events = _events("no-service")
    assert (
        _result_text(events, "call-a-2")[0]
        == f"Error: {unsupported('write_file', 'writes to the workspace')}"
    )
    assert not [e for e in events if e["type"].startswith("approval/")]
    assert not [
        e for e in events if e["type"] == "user/message" and e["data"]["source"]["kind"] == "plugin"
    ]


@pytest.mark.parametrize(("scenario", "policy"), [("approve", "ask"), ("never", "never")])
def test_the_runtime_context_message_is_the_reference_s(scenario: str, policy: Any) -> None:
    from agent_session.agent_loop.approval import runtime_context

    (context,) = [
        e["data"]
        for e in _events(scenario)
        if e["type"] == "user/message" and e["data"]["source"].get("form") == "snapshot"
    ]
    assert {k: v for k, v in context.items() if k != "id"} == runtime_context(policy)
    assert list(context) == [*runtime_context(policy), "id"]  # the key order too


def test_the_policy_change_notice_is_the_reference_s() -> None:
    from agent_session.agent_loop.approval import policy_notice

    (notice,) = [
        e["data"]
        for e in _events("switch")
        if e["type"] == "user/message"
        and e["data"]["source"] == {"kind": "plugin", "plugin": "user-approval"}
    ]
    assert {k: v for k, v in notice.items() if k != "id"} == policy_notice("ask", "never")
