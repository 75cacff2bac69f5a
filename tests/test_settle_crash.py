"""Settlement after real SIGKILLs: an agent process (``tests/settle_child.py``) dies at every
failpoint, with its ``pay`` tool of every effect class, on every store; later processes resume
it and finish the job. The outbox (the outside world, keyed by call id) and the log must
show what settlement promises."""

from __future__ import annotations

import signal
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from agent_session import open_store
from agent_session.interchange.export import check_transcript
from tests.backends import fresh_database
from tests.forkserver import run_module

pytestmark = pytest.mark.process

POINTS = ["request", "midstream", "tool-before", "tool-after", "parallel", "post-step", "settle"]
EFFECTS = ["read", "idempotent", "unsafe-probe", "unsafe"]


def child(
    store: str, outbox: Path, effect: str, die: str, *extra: str
) -> subprocess.CompletedProcess[str]:
    return run_module(
        "tests.settle_child", store, str(outbox), "--effect", effect, "--die", die, *extra
    )


def killed_then_finished(
    run: Callable[[], subprocess.CompletedProcess[str]],
) -> tuple[subprocess.CompletedProcess[str], int]:
    """Run a job that dies by SIGKILL, then resume it until a run finishes (a kill during
    settlement needs two); the finishing run, and how many runs it took."""
    killed = run()
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    runs = 1
    while True:
        done = run()
        runs += 1
        if done.returncode != -signal.SIGKILL:
            break
        assert runs < 4
    assert done.returncode == 0, done.stderr
    return done, runs


def store_of(kind: str, tmp_path: Path) -> str:
    if kind == "jsonl":
        return str(tmp_path / "sessions")
    if kind == "sqlite":
        return f"sqlite:///{tmp_path}/sessions.db"
    return fresh_database()


@pytest.mark.sweep(share=0.25)
@pytest.mark.parametrize("kind", ["jsonl", "sqlite", "postgres"])
@pytest.mark.parametrize("effect", EFFECTS)
@pytest.mark.parametrize("point", POINTS)
async def test_a_killed_job_is_finished_with_each_effect_at_most_once(
    tmp_path: Path, kind: str, effect: str, point: str
) -> None:
    store, outbox = store_of(kind, tmp_path), tmp_path / "outbox"
    done, runs = killed_then_finished(lambda: child(store, outbox, effect, point))
    assert done.stdout.strip() == "{'kind': 'completed'}"
    reruns = effect in ("read", "idempotent")  # a body that runs again while settling
    assert runs == (3 if point == "settle" and reruns else 2)

    effects = outbox.read_text().splitlines()
    pays = effects.count("pay c-pay")
    if effect in ("unsafe", "unsafe-probe"):
        assert pays <= 1  # an unsafe effect at most once
    if effect == "unsafe-probe" or point in ("request", "midstream", "post-step"):
        assert pays == 1  # exactly once where a probe answered, or nothing was in doubt
    if point == "tool-before" and effect in ("unsafe-probe", "unsafe"):
        assert pays == (1 if effect == "unsafe-probe" else 0)
    assert effects.count("notify c-notify") == 1  # never started before: dispatched once

    backend = open_store(store)
    try:
        log = (await backend.load("job")).events
    finally:
        await backend.aclose()
    visible = _visible_results(log)
    assert sorted(visible) == ["c-look-1", "c-look-2", "c-notify", "c-pay"]
    unknown = {id for id, code in visible.items() if code == "TOOL_OUTCOME_UNKNOWN"}
    in_doubt = point in ("tool-after", "tool-before", "settle")
    assert unknown == ({"c-pay"} if effect == "unsafe" and in_doubt else set())
    ends = [e.data["reason"]["kind"] for e in log if e.type == "turn/end"]
    assert ends[-1] == "completed"
    answers = [e for e in log if e.type == "assistant/message"]
    assert answers[-1].data["message"]["content"] == [{"type": "text", "text": "Done."}]


def _visible_results(log: object) -> dict[str, object]:
    """Each call's model-visible result's error code (``None`` for its own result), checking
    on the way that the history is one a provider accepts."""
    from agent_session.session import Session

    session = Session.create("check", seed=log)  # type: ignore[arg-type]
    messages = session.derive_messages()
    check_transcript(messages)
    by_id = {}
    for event in log:  # type: ignore[attr-defined]
        if event.type == "tool/result" and event.seq in session.surface.nodes:
            code = (event.data.get("error") or {}).get("code")
            by_id[event.data["message"]["source"]["callId"]] = code
    return by_id


@pytest.mark.parametrize("effect", ["idempotent", "unsafe"])
def test_every_export_of_a_settled_log_is_provider_valid(tmp_path: Path, effect: str) -> None:
    from tests.test_cli import cli

    store, outbox = str(tmp_path / "sessions"), tmp_path / "outbox"
    assert child(store, outbox, effect, "tool-after").returncode == -signal.SIGKILL
    assert child(store, outbox, effect, "tool-after").returncode == 0
    for format in ("openai", "anthropic", "pydantic-ai"):
        exported = cli("export", store, "job", "--format", format, "--json")
        assert exported.stdout.count("c-pay") >= 2, format  # the call and its one result
    shown = cli("show", store, "job").stdout
    how = "re-run" if effect == "idempotent" else "unknown, TOOL_OUTCOME_UNKNOWN"
    assert f"tool c-pay [SETTLED: {how}]" in shown
    assert "tool c-notify [SETTLED: dispatched]" in shown
    assert "(settling the calls a crash interrupted, asked again:)" in shown
