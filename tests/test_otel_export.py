"""``agent-session export-otel`` against an in-process OTLP/HTTP receiver: the span trees of the
conformance corpus's runs (the reference wrote them; the crashed ones included), stable ids,
the cursor that makes the export at least once, and a receiver that fails, hangs or is gone."""

from __future__ import annotations

import asyncio
import json
import shutil
import signal
import socket
import sqlite3
import subprocess
from pathlib import Path
from typing import Any

import pytest

from agent_session.cli import main
from agent_session.cli.exits import IO_ERROR
from tests.corpus import case_bytes, cases
from tests.forkserver import run_module, start_module
from tests.otlp_receiver import receiver

REPO = Path(__file__).resolve().parent.parent
INTERNAL, CLIENT = 1, 3  # the OTLP span kinds
UNSET, ERROR = 0, 2  # the OTLP status codes


def _plant(root: Path, scenario: str, case: str | None = None) -> str:
    """The scenario's longest prefix (its whole log as written), or the case named."""
    chosen = [c for c in cases() if c["scenario"] == scenario and c["case"].startswith("prefix")]
    if case is None:
        found = max(chosen, key=lambda c: int(c["case"].split("-")[1]))
    else:
        found = next(c for c in chosen if c["case"] == case)
    path = root / found["path"]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(case_bytes(found))
    return str(found["session_id"])


def _export(store: Path | str, url: str, *extra: str) -> int:
    return main(["export-otel", str(store), "--endpoint", url, "--attempts", "2", *extra])


def _tree(spans: list[dict[str, Any]], session: str) -> list[list[tuple[Any, ...]]]:
    """Per trace, in time order: (name, kind, status code, error.type) of the root, then of
    each child; each child's parent is that trace's root."""
    mine = [s for s in spans if s["attributes"].get("gen_ai.conversation.id") == session]
    trees = []
    for root in sorted(mine, key=lambda s: s["start"]):
        children = [s for s in spans if s["trace_id"] == root["trace_id"] and s is not root]
        assert all(c["parent_id"] == root["span_id"] for c in children)
        trees.append(
            [
                (s["name"], s["kind"], s["status"][0], s["attributes"].get("error.type"))
                for s in [root, *sorted(children, key=lambda s: (s["start"], s["name"]))]
            ]
        )
    return trees


def test_the_corpus_runs_become_these_span_trees(tmp_path: Path) -> None:
    for scenario in ("complete:2", "tool:1", "parallel-tool:1", "request:1"):
        _plant(tmp_path, scenario)
    with receiver() as got:
        assert _export(tmp_path, got.url) == 0
    spans = got.spans
    assert all(s["end"] >= s["start"] for s in spans)
    assert {s["service"] for s in spans} == {"agent-session"}
    done = [
        ("invoke_agent", INTERNAL, UNSET, None),
        ("chat scripted-1", CLIENT, UNSET, None),
        ("execute_tool read_file", INTERNAL, UNSET, None),
        ("execute_tool write_file", INTERNAL, UNSET, None),
        ("chat scripted-1", CLIENT, UNSET, None),
    ]
    assert _tree(spans, "upstream-complete") == [done, done]
    assert _tree(spans, "upstream-tool") == [
        [
            ("invoke_agent", INTERNAL, ERROR, "interrupted"),
            ("chat scripted-1", CLIENT, UNSET, None),
            ("execute_tool write_file", INTERNAL, ERROR, "TOOL_OUTCOME_UNKNOWN"),
        ]
    ]
    assert _tree(spans, "upstream-parallel-tool") == [
        [
            ("invoke_agent", INTERNAL, ERROR, "interrupted"),
            ("chat scripted-1", CLIENT, UNSET, None),
            ("execute_tool read_file", INTERNAL, UNSET, None),
            ("execute_tool write_file", INTERNAL, ERROR, "TOOL_OUTCOME_UNKNOWN"),
        ]
    ]
    assert _tree(spans, "upstream-request") == [
        [
            ("invoke_agent", INTERNAL, ERROR, "interrupted"),
            ("chat scripted-1", CLIENT, ERROR, "interrupted"),
        ]
    ]
    assert len({s["trace_id"] for s in spans}) == 5  # one trace per turn
    assert len({s["span_id"] for s in spans}) == len(spans) == 10 + 3 + 4 + 2


def test_a_completed_turn_carries_the_conventions_attributes(tmp_path: Path) -> None:
    session = _plant(tmp_path, "complete:2")
    with receiver() as got:
        assert _export(tmp_path, got.url) == 0
    first = [s for s in got.spans if s["trace_id"] == got.spans[0]["trace_id"]]
    turn = next(s for s in first if s["name"] == "invoke_agent")
    assert turn["attributes"]["gen_ai.operation.name"] == "invoke_agent"
    assert turn["attributes"]["gen_ai.conversation.id"] == session
    assert turn["attributes"]["agent_session.turn"] == 1
    chat = min((s for s in first if s["kind"] == CLIENT), key=lambda s: s["start"])
    assert chat["attributes"]["gen_ai.operation.name"] == "chat"
    assert chat["attributes"]["gen_ai.provider.name"] == "scripted"
    assert chat["attributes"]["gen_ai.request.model"] == "scripted-1"
    assert chat["attributes"]["gen_ai.usage.input_tokens"] == 100
    assert chat["attributes"]["gen_ai.usage.output_tokens"] == 20
    # (the reference's "tool-calls", as the conventions name it)
    assert chat["attributes"]["gen_ai.response.finish_reasons"] == ["tool_call"]
    assert chat["attributes"]["gen_ai.response.time_to_first_chunk"] >= 0
    tools = sorted(
        (s for s in first if s["name"].startswith("execute_tool")), key=lambda s: s["start"]
    )
    assert [t["attributes"]["gen_ai.tool.call.id"] for t in tools] == ["call-1", "call-2"]
    assert [t["attributes"]["gen_ai.tool.name"] for t in tools] == ["read_file", "write_file"]
    assert all(t["attributes"]["gen_ai.operation.name"] == "execute_tool" for t in tools)
    assert not any(
        k.startswith("gen_ai.input") or k.endswith(".ref") for s in first for k in s["attributes"]
    )


def test_a_crash_ends_the_turn_in_error_at_its_last_durable_event(tmp_path: Path) -> None:
    _plant(tmp_path, "tool:1", "prefix-13-lines")  # cut while the model was streaming
    with receiver() as got:
        assert _export(tmp_path, got.url) == 0
    turn = next(s for s in got.spans if s["name"] == "invoke_agent")
    chat = next(s for s in got.spans if s["kind"] == CLIENT)
    assert turn["status"][0] == chat["status"][0] == ERROR
    assert "the process died" in turn["status"][1]
    assert chat["attributes"]["error.type"] == "interrupted"
    assert turn["end"] == chat["end"] >= chat["start"]  # the last text chunk's time


def test_ids_are_the_same_in_two_exports_and_the_cursor_sends_each_turn_once(
    tmp_path: Path,
) -> None:
    _plant(tmp_path, "complete:2")
    with receiver() as got:
        assert _export(tmp_path, got.url) == 0
        first = sorted((s["trace_id"], s["span_id"]) for s in got.spans)
        assert _export(tmp_path, got.url) == 0  # the cursor: nothing new to send
        assert len(got.spans) == len(first)
    with receiver() as other:  # another receiver has its own cursor, and gets the same ids
        assert _export(tmp_path, other.url) == 0
        assert sorted((s["trace_id"], s["span_id"]) for s in other.spans) == first
    cursor = json.loads((tmp_path / ".agent-session-otel-cursors.json").read_bytes())
    assert len(cursor["sinks"]) == 2


def test_a_refusing_receiver_gets_retried_then_a_clear_error_and_the_cursor_stays(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _plant(tmp_path, "complete:2")
    with receiver() as got:
        got.answer = "500"
        assert _export(tmp_path, got.url, "--json") == IO_ERROR
        assert got.requests == 2  # --attempts 2
        error = capsys.readouterr().err
        assert "did not take" in error
        assert "500" in error
        got.answer = "ok"
        assert _export(tmp_path, got.url, "--json") == 0
        assert len({s["trace_id"] for s in got.spans}) == 2  # both turns, none lost


def test_a_header_value_a_receiver_quotes_back_never_reaches_the_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _plant(tmp_path, "request:1")
    with receiver() as got:
        got.answer = "echo"
        headers = "Authorization=Bearer s3cr3t-token"
        assert _export(tmp_path, got.url, "--headers", headers) == IO_ERROR
    error = capsys.readouterr().err
    assert "did not take" in error
    assert "reason: ***" in error  # the receiver did quote it back, masked
    assert "s3cr3t-token" not in error


def test_a_redirect_is_refused_and_the_headers_never_reach_its_target(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _plant(tmp_path, "request:1")
    with receiver() as got, receiver() as elsewhere:
        got.answer = f"redirect {elsewhere.url}"
        headers = "Authorization=Bearer s3cr3t-token"
        assert _export(tmp_path, got.url, "--headers", headers) == IO_ERROR
        assert elsewhere.requests == 0
    error = capsys.readouterr().err
    assert "did not take" in error
    assert "303" in error


def test_a_hanging_receiver_times_out_and_a_gone_one_is_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _plant(tmp_path, "request:1")
    with receiver() as got:
        got.answer = "hang"
        assert _export(tmp_path, got.url, "--timeout", "0.3") == IO_ERROR
        assert "did not take" in capsys.readouterr().err
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]
    assert (
        _export(tmp_path, f"http://user:hunter2@127.0.0.1:{port}/v1/traces", "--timeout", "0.5")
        == IO_ERROR
    )
    error = capsys.readouterr().err
    assert "did not take" in error
    assert "hunter2" not in error


def test_content_refs_and_full_put_references_or_redacted_messages_on_the_spans(
    tmp_path: Path,
) -> None:
    session = _plant(tmp_path, "complete:2")
    with receiver() as got:
        assert _export(tmp_path, got.url, "--content", "refs") == 0
    tools = [s for s in got.spans if s["name"] == "execute_tool read_file"]
    assert tools[0]["attributes"]["agent_session.input.ref"].startswith(f"{session}#")
    with receiver() as full:
        assert _export(tmp_path, full.url, "--content", "full") == 0
    tool = next(s for s in full.spans if s["name"] == "execute_tool read_file")
    assert json.loads(tool["attributes"]["gen_ai.tool.call.arguments"])["path"] == "/tmp/f1.txt"
    assert "ok read_file" in tool["attributes"]["gen_ai.tool.call.result"]


def test_full_content_puts_what_each_request_sent_in_the_conventions_shape(
    tmp_path: Path,
) -> None:
    """Under ``--content full`` each ``chat`` span carries the system prompt, the tools and
    the history its request was sent, read back from the reference's own log, and the answer
    with its finish reason; under the default, none of it."""
    from agent_session.session.events.requests import logged_requests
    from agent_session.stores import open_store

    session = _plant(tmp_path, "complete:2")
    with receiver() as full:
        assert _export(tmp_path, full.url, "--content", "full") == 0
    chats = sorted((s for s in full.spans if s["kind"] == CLIENT), key=lambda s: s["start"])
    loaded = asyncio.run(open_store(str(tmp_path)).load(session))
    sent = logged_requests(loaded.events)
    assert len(chats) == len(sent) == 4
    system = "You are an AI agent powered by DeepSeek Harness."
    for chat, request in zip(chats, sent, strict=True):
        attributes = chat["attributes"]
        assert json.loads(attributes["gen_ai.system_instructions"]) == [
            {"type": "text", "content": system}
        ]
        tools = json.loads(attributes["gen_ai.tool.definitions"])
        assert [t["name"] for t in tools] == ["read_file", "write_file"]
        history = json.loads(attributes["gen_ai.input.messages"])
        assert len(history) == len(request.messages)
        assert [m["role"] for m in history] == [
            "tool" if m["source"]["kind"] == "tool" else m["role"] for m in request.messages
        ]
        assert history[0]["parts"][0]["type"] == "text"
    first, second = (json.loads(c["attributes"]["gen_ai.input.messages"]) for c in chats[:2])
    assert second[: len(first)] == first  # (the next request sends the history so far ...)
    assert second[len(first)]["role"] == "assistant"  # (... then the answer it got)
    calls = [p for p in second[len(first)]["parts"] if p["type"] == "tool_call"]
    assert calls[0]["name"] == "read_file"
    assert calls[0]["arguments"]["path"] == "/tmp/f1.txt"  # (parsed from the streamed text)
    response = second[len(first) + 1]
    assert response["role"] == "tool"
    assert response["parts"][0]["id"] == calls[0]["id"]
    assert "ok read_file" in response["parts"][0]["response"]
    (answer,) = json.loads(chats[0]["attributes"]["gen_ai.output.messages"])
    assert answer["role"] == "assistant"
    assert answer["finish_reason"] == "tool_call"
    with receiver() as default:
        assert _export(tmp_path, default.url) == 0
    for span in default.spans:
        assert not {"gen_ai.input.messages", "gen_ai.system_instructions"} & set(span["attributes"])


def _many(root: Path, count: int) -> list[str]:
    """``count`` sessions with the corpus's two complete turns, each under its own id."""
    log = case_bytes(
        max(
            (
                c
                for c in cases()
                if c["scenario"] == "complete:2" and c["case"].startswith("prefix")
            ),
            key=lambda c: int(c["case"].split("-")[1]),
        )
    )
    ids = [f"s-{n:03}" for n in range(count)]
    for id in ids:
        path = root / "_no-cwd" / id / "session.jsonl"
        path.parent.mkdir(parents=True)
        path.write_bytes(log.replace(b'"id":"upstream-complete"', f'"id":"{id}"'.encode(), 1))
    return ids


def _cli(store: Path, url: str) -> subprocess.Popen[str]:
    return start_module("agent_session", "export-otel", str(store), "--endpoint", url, stdin=None)


@pytest.mark.process
@pytest.mark.parametrize(
    ("kill_at", "acknowledged"),
    [(1, False), (7, False), (23, False), (4, True), (19, True)],
    ids=["1-in-flight", "7-in-flight", "23-in-flight", "4-acknowledged", "19-acknowledged"],
)
def test_an_exporter_killed_mid_export_sends_every_span_with_its_id_on_the_next_run(
    tmp_path: Path, kill_at: int, acknowledged: bool
) -> None:
    """Killed while a request is in flight, or right after the receiver acknowledged one
    (before or after the cursor moved: either way the next run completes the export)."""
    store = tmp_path / "store"
    ids = _many(store, 20)
    clean = tmp_path / "clean"
    shutil.copytree(store, clean)
    with receiver() as expected:
        assert _export(clean, expected.url) == 0
    assert len({s["trace_id"] for s in expected.spans}) == 2 * len(ids)
    with receiver() as got:
        got.stop_at = kill_at  # request kill_at is held (or acknowledged) until the kill
        got.acknowledge_held = acknowledged
        child = _cli(store, got.url)
        assert got.reached.wait(60)
        child.send_signal(signal.SIGKILL)
        assert child.wait(60) == -signal.SIGKILL
        got.stop_at = None
        got.release.set()
        finish = _cli(store, got.url)
        _, err = finish.communicate(timeout=120)
        assert finish.returncode == 0, err
        received = got.spans
    want = {s["span_id"]: s for s in expected.spans}
    assert {s["span_id"] for s in received} == set(want)  # every span, and no other id
    for span in received:  # each copy of a span says what the clean export's says
        assert {k: span[k] for k in ("trace_id", "name", "start", "end", "attributes")} == {
            k: want[span["span_id"]][k] for k in ("trace_id", "name", "start", "end", "attributes")
        }


@pytest.mark.process
def test_the_live_exporter_sends_the_turn_its_process_died_in_at_the_next_start(
    tmp_path: Path,
) -> None:
    store = str(tmp_path / "store")

    def child(phase: str) -> subprocess.CompletedProcess[str]:
        return run_module("tests.otel_child", store, got.url, phase)

    with receiver() as got:
        crash = child("crash")
        assert crash.returncode == -signal.SIGKILL, crash.stderr
        assert "turn 1 sent" in crash.stdout
        assert "dying" in crash.stdout
        sent_live = {s["trace_id"] for s in got.spans}
        assert len(sent_live) == 1  # the completed turn, while the agent ran
        restart = child("restart")
        assert restart.returncode == 0, restart.stderr
        assert "caught up" in restart.stdout
        spans = got.spans
    turns = sorted((s for s in spans if s["name"] == "invoke_agent"), key=lambda s: s["start"])
    assert [t["status"][0] for t in turns] == [UNSET, ERROR]
    crashed = [s for s in spans if s["trace_id"] == turns[1]["trace_id"]]
    write = next(s for s in crashed if s["name"] == "execute_tool write_file")
    assert write["attributes"]["error.type"] == "TOOL_OUTCOME_UNKNOWN"
    assert write["status"][0] == ERROR


def test_the_reference_still_loads_a_store_that_holds_export_cursors(tmp_path: Path) -> None:
    from tests.test_reference_interop import reference_load, reference_load_sqlite

    session = _plant(tmp_path / "jsonl", "complete:2")
    database = tmp_path / "sessions.db"
    assert main(["copy", str(tmp_path / "jsonl"), f"sqlite:///{database}"]) == 0
    with receiver() as got:
        assert _export(tmp_path / "jsonl", got.url) == 0
        assert _export(f"sqlite:///{database}", got.url) == 0
    assert (tmp_path / "jsonl" / ".agent-session-otel-cursors.json").exists()
    with sqlite3.connect(database) as db:
        assert db.execute("SELECT count(*) FROM agent_session_otel_cursor").fetchone() == (1,)
    for loaded in (
        reference_load(tmp_path / "jsonl", session, "none"),
        reference_load_sqlite(database, session),
    ):
        assert "error" not in loaded, loaded
        assert len(loaded["events"]) == 92


def test_every_store_kind_keeps_the_cursor_and_sends_each_turn_once(
    tmp_path: Path, store: str
) -> None:
    source = tmp_path / "source"
    _plant(source, "complete:2")
    target = store if "://" in store else str(tmp_path / "target")
    assert main(["copy", str(source), target]) == 0
    with receiver() as got:
        assert _export(target, got.url) == 0
        assert _export(target, got.url) == 0
        assert got.requests == 2  # one per turn, the second run sent nothing
        assert len({s["trace_id"] for s in got.spans}) == 2


def test_the_reference_shape_is_one_log_record_per_event_with_its_keys(tmp_path: Path) -> None:
    session = _plant(tmp_path, "tool:1")
    with receiver() as got:
        base = got.url.removesuffix("/v1/traces")
        assert _export(tmp_path, base, "--shape", "records") == 0
        assert _export(tmp_path, base, "--shape", "records") == 0  # its own cursor: nothing new
        assert got.spans == []
        records = got.records
    seqs = [r["attributes"]["event.seq"] for r in records]
    assert seqs == sorted(set(seqs))  # each event once, in order
    assert {r["attributes"]["session.id"] for r in records} == {session}
    types = [r["attributes"]["event.type"] for r in records]
    assert types.count("assistant/chunk") == 1  # a step's first chunk only
    assert types[-1] == "turn/end"
    errors = {r["attributes"]["event.type"] for r in records if r["severity"] == 17}  # ERROR
    assert errors == {"tool/result", "turn/end"}  # the repaired call, the interrupted turn
    assert all(r["severity"] in (9, 17) for r in records)  # INFO or ERROR
    assert (
        len(
            {
                r["trace_id"]
                for r in records
                if r["attributes"]["event.type"] != "agent/inbox/spliced"
            }
        )
        == 1
    )


def test_since_leaves_out_the_turns_that_ended_before_it(tmp_path: Path) -> None:
    _plant(tmp_path, "complete:2")  # its turns ended on 2026-11-29 (UTC)
    with receiver() as got:
        assert _export(tmp_path, got.url, "--since", "2026-11-30") == 0
        assert got.spans == []
        assert _export(tmp_path, got.url, "--since", "2026-11-29T00:00:00") == 0
        assert len({s["trace_id"] for s in got.spans}) == 2


async def test_the_live_exporter_puts_full_content_through_the_redaction_hook(
    tmp_path: Path,
) -> None:
    from agent_session import (
        Runtime,
        assistant_message,
        open_store,
        otel_exporter,
        step_end,
        step_start,
        tool_call,
        tool_call_block,
        tool_result,
        turn_end,
        turn_start,
    )

    store = str(tmp_path / "store")
    with receiver() as got:
        runtime = Runtime()
        backend = open_store(store)
        runtime.install(backend)
        exporter = otel_exporter(
            store, got.url, content="full", redact=lambda text: text.replace("secret", "[x]")
        )
        runtime.install(exporter)
        session = runtime.sessions.create("chat-1")
        session.append("turn/start", turn_start(1))
        session.append("step/start", step_start(1, 1))
        block = tool_call_block("c1", "f", '{"k":"secret"}')
        answer = assistant_message(1, 1, provider="p", model="m", calls=[block])
        session.append("assistant/message", answer, surface_op="append", source_event_seqs=[])
        call = session.append("tool/call", tool_call(1, 1, "c1", "f", '{"k":"secret"}'))
        result = tool_result(1, 1, "c1", "done")
        session.append("tool/result", result, surface_op="append", source_event_seqs=[call.seq])
        session.append("step/end", step_end(1, 1))
        session.append("turn/end", turn_end(1))
        await exporter.drain()
        await backend.aclose()
    tool = next(s for s in got.spans if s["name"] == "execute_tool f")
    assert tool["attributes"]["gen_ai.tool.call.arguments"] == '{"k":"[x]"}'


async def test_the_live_exporter_sends_a_forks_own_turns_linked_to_its_parent(
    tmp_path: Path,
) -> None:
    from agent_session import Runtime, open_store, otel_exporter, turn_end, turn_start

    store = str(tmp_path / "store")
    with receiver() as got:
        runtime = Runtime()
        backend = open_store(store)
        runtime.install(backend)
        exporter = otel_exporter(store, got.url)
        runtime.install(exporter)
        parent = runtime.sessions.create("parent")
        parent.append("turn/start", turn_start(1))
        parent.append("turn/end", turn_end(1))
        child = runtime.sessions.fork(parent, child_id="child")
        child.append("turn/start", turn_start(2))
        child.append("turn/end", turn_end(2))
        child.append("turn/start", turn_start(3))
        child.append("turn/end", turn_end(3))
        await exporter.drain()
        await backend.aclose()
    turns = {
        (s["attributes"]["gen_ai.conversation.id"], s["attributes"]["agent_session.turn"]): s
        for s in got.spans
    }
    assert sorted(turns) == [("child", 2), ("child", 3), ("parent", 1)]  # no seeded copy
    parent_turn = turns[("parent", 1)]
    assert turns[("child", 2)]["links"] == [(parent_turn["trace_id"], parent_turn["span_id"])]
    assert turns[("child", 3)]["links"] == []
