"""An OpenAI Agents SDK run killed inside a tool body (a real process, the real ``Runner``, a
scripted model) is finished by ``resume_run``: each declared effect class settles ``pay`` as
promised, the call after it runs once, and the run ends on the model's answer, on every
store."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from agent_session import open_store
from agent_session.integrations.openai_agents import declare
from tests.forkserver import run_module
from tests.test_settle_crash import _visible_results, killed_then_finished, store_of

pytestmark = pytest.mark.process


def child(store: str, outbox: Path, effect: str, die: str) -> subprocess.CompletedProcess[str]:
    options = ["--effect", effect, "--die", die]
    return run_module("tests.sdk_settle_child", store, str(outbox), *options, server="frameworks")


@pytest.mark.sweep(share=0.25)
@pytest.mark.parametrize("kind", ["jsonl", "sqlite", "postgres"])
@pytest.mark.parametrize("effect", ["read", "idempotent", "unsafe-probe", "unsafe"])
@pytest.mark.parametrize("point", ["tool-before", "tool-after", "settle"])
async def test_a_killed_run_is_finished_by_resume_run(
    tmp_path: Path, kind: str, effect: str, point: str
) -> None:
    store, outbox = store_of(kind, tmp_path), tmp_path / "outbox"
    done, runs = killed_then_finished(lambda: child(store, outbox, effect, point))
    assert done.stdout.strip() == "Done."
    reruns = effect in ("read", "idempotent")
    assert runs == (3 if point == "settle" and reruns else 2)
    effects = outbox.read_text().splitlines()
    pays = effects.count("pay call-pay")
    if effect.startswith("unsafe"):
        assert pays <= 1
    if effect == "unsafe-probe":
        assert pays == 1
    assert effects.count("notify call-notify") == 1
    backend = open_store(store)
    try:
        log = (await backend.load("job")).events
    finally:
        await backend.aclose()
    visible = _visible_results(log)
    assert sorted(visible) == ["call-notify", "call-pay"]
    stays_unknown = effect == "unsafe"
    assert (visible["call-pay"] == "TOOL_OUTCOME_UNKNOWN") is stays_unknown
    settled = [
        (e.data.get("meta") or {}).get("settlement")
        for e in log
        if e.type == "tool/result" and e.data["message"]["source"]["callId"] == "call-pay"
    ]
    expected = {
        "read": "re-run",
        "idempotent": "re-run",
        "unsafe": "unknown",
        "unsafe-probe": "reconciled" if point != "tool-before" else "run-after-probe",
    }[effect]
    assert settled[-1] == expected


def test_declare_checks_its_classes() -> None:
    from agents import function_tool

    @function_tool
    def noop() -> str:
        """Nothing."""
        return ""

    async def probe(call: object) -> object:
        return None

    assert declare(noop, "read") is noop
    with pytest.raises(ValueError, match="a read tool needs no reconcile probe"):
        declare(noop, "read", reconcile=probe)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="effect must be one of"):
        declare(noop, "often")  # type: ignore[arg-type]


async def test_a_run_left_open_is_finished_where_it_stopped(tmp_path: Path) -> None:
    """A run that stopped at max turns (no crash) leaves its turn open; ``resume_run``
    closes it as a restart would, keeps its results, and finishes the job."""
    from agents import Agent, Runner, function_tool, set_tracing_disabled
    from agents.exceptions import MaxTurnsExceeded
    from agents.testing import ScriptedModel, assistant_message, function_call

    from agent_session import DurableRunHooks, EventLogSession
    from agent_session.integrations.openai_agents import resume_run

    set_tracing_disabled(True)
    ran: list[str] = []

    @function_tool
    async def look(q: str) -> str:
        """Look up."""
        ran.append(q)
        return f"found {q}"

    model = ScriptedModel(
        [[function_call("look", {"q": "a"}, call_id="call-look")], [assistant_message("Done.")]]
    )
    agent = Agent(name="a", model=model, tools=[declare(look, "read")])
    async with await EventLogSession.open(str(tmp_path / "s"), "job") as session:
        hooks = DurableRunHooks(session)
        with pytest.raises(MaxTurnsExceeded):
            await Runner.run(agent, "look a up", session=session, hooks=hooks, max_turns=1)
        result = await resume_run(agent, session)
        assert result is not None
        assert result.final_output == "Done."
        assert ran == ["a"]  # kept, not run again
        items = await session.get_items()
        outputs = [i for i in items if i.get("type") == "function_call_output"]
        assert [o["call_id"] for o in outputs] == ["call-look"]
        assert await resume_run(agent, session) is None  # nothing left to finish
