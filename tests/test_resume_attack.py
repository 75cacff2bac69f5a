"""Settlement under attack, with real processes on every store (``tests/resume_child.py``):
two resumers started at the same instant, and probes and bodies that misbehave. An unsafe
body runs at most once, the log is never left in a state ``verify`` calls invalid, and a
later resume with a good probe finishes the job."""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.forkserver import run_module
from tests.test_cli import cli
from tests.test_settle_crash import _visible_results, store_of
from tests.together import let_go_together

pytestmark = pytest.mark.process

ROOT = Path(__file__).parent.parent
KINDS = ["jsonl", "sqlite", "postgres"]


def run(store: str, outbox: Path, role: str, *extra: str) -> subprocess.CompletedProcess[str]:
    return run_module("tests.resume_child", store, str(outbox), role, *extra)


def answer(done: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def crashed(tmp_path: Path, kind: str, *extra: str) -> tuple[str, Path]:
    store, box = store_of(kind, tmp_path), tmp_path / "outbox"
    assert run(store, box, "crash", *extra).returncode == -signal.SIGKILL
    return store, box


def pays(box: Path) -> list[str]:
    return list(box.read_text().splitlines()) if box.exists() else []


def verified(store: str) -> str:
    """``verify``'s line for the job: it must never call the log invalid."""
    out = cli("verify", store, check_rc=None).stdout
    line = next(line for line in out.splitlines() if line.startswith("job:"))
    assert "invalid" not in line, out
    return line


async def finished(store: str) -> list[Any]:
    """The job's log, which must end with a completed turn answered ``Done.`` and be a
    history a provider accepts."""
    from agent_session import open_store

    backend = open_store(store)
    try:
        log = (await backend.load("job")).events
    finally:
        await backend.aclose()
    _visible_results(log)  # (checks the transcript)
    ends = [e.data["reason"]["kind"] for e in log if e.type == "turn/end"]
    assert ends[-1] == "completed", ends
    return list(log)


@pytest.mark.sweep(share=0.5)
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("policy", ["checkpoints", "no-policy"])
@pytest.mark.parametrize("round_", range(2))
async def test_two_resumers_started_together_run_an_unsafe_body_once(
    tmp_path: Path, kind: str, policy: str, round_: int
) -> None:
    """The second resumer is refused when it opens the session (the first holds it), or
    finds the job finished: with the checkpoint policy or without it, the body runs once."""
    store, box = crashed(tmp_path, kind)
    extra = ("--no-policy",) if policy == "no-policy" else ()
    answers = let_go_together("tests.resume_child", store, str(box), "resume", "--barrier", *extra)
    assert len(pays(box)) == 1, (pays(box), answers)  # the probe found nothing: run once
    completed = [a for a in answers if a.get("result") == {"kind": "completed"}]
    others = [a for a in answers if a not in completed]
    assert len(completed) == 1, answers
    for other in others:  # refused before settling anything, or found nothing left to do
        refused = str(other.get("error", "")).startswith("SessionCollisionError")
        assert refused or other.get("result") is None, answers
    verified(store)
    log = await finished(store)
    calls = [e for e in log if e.type == "tool/call" and e.data["callId"] == "c1"]
    assert len(calls) == 2  # the crashed turn's and one settlement's


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("probe", ["object", "raise", "hang", "interrupt"])
async def test_a_misbehaving_probe_leaves_a_log_the_next_resume_finishes(
    tmp_path: Path, kind: str, probe: str
) -> None:
    store, box = crashed(tmp_path, kind)
    done = run(store, box, "resume", "--probe", probe)
    if probe == "interrupt":
        assert done.returncode != 0
        assert "KeyboardInterrupt" in done.stderr
    else:
        result = answer(done)["result"]
        if probe == "hang":
            assert result == "cancelled"
        else:  # a probe that cannot tell: the model reads the call's unknown outcome
            assert result == {"kind": "completed"}, result
    assert pays(box) == []  # nothing ran on a probe that did not answer
    verified(store)
    assert answer(run(store, box, "resume"))["result"] in ({"kind": "completed"}, None)
    log = await finished(store)
    assert len(pays(box)) <= 1
    visible = _visible_results(log)
    if probe in ("hang", "interrupt"):  # settled again by the good probe: it ran once
        assert visible == {"c1": None}
        assert len(pays(box)) == 1
    else:
        assert visible == {"c1": "TOOL_OUTCOME_UNKNOWN"}
        assert pays(box) == []


@pytest.mark.parametrize("kind", KINDS)
async def test_a_cancelled_settled_body_is_settled_again_by_the_next_resume(
    tmp_path: Path, kind: str
) -> None:
    store, box = crashed(tmp_path, kind, "--effect", "idempotent")
    cancelled = run(store, box, "resume", "--effect", "idempotent", "--probe", "cancel-body")
    assert answer(cancelled)["result"] == "cancelled"
    verified(store)
    again = run(store, box, "resume", "--effect", "idempotent")
    assert answer(again)["result"] == {"kind": "completed"}
    log = await finished(store)
    assert _visible_results(log) == {"c1": None}
    assert len(pays(box)) == 1
