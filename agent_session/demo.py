"""``agent-session demo``: the whole stack surviving a real crash, told as a short story.

A child process runs the reference stack (JSONL backend, checkpoint policy, reference loop,
scripted model, a read-only tool and a side-effecting one) and is SIGKILLed at a failpoint
during its last turn. The parent shows what was on disk, recovers the session, resumes it,
runs one more turn, and prints the transcript with the repaired tool results marked.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import uuid
from typing import Any, TextIO

from agent_loop.scripted import ScriptedCall, ScriptedStep
from agent_session.stack import MODEL, SYSTEM, open_stack
from agent_session.transcript import render
from persistence_jsonl import JsonlPersistence
from session import SessionEvent
from session.events.outcomes import TOOL_OUTCOME_UNKNOWN
from session.events.turns import brackets, next_turn_number
from session.events.types import TOOL_RESULT
from session.persistence.coordinator import Examination

__all__ = ["CRASH_MODES", "run_demo"]

CRASH_MODES = {
    "none": "no crash",
    "request": "inside the model adapter, after the request checkpoint, before any output",
    "tool": "inside the write_file tool body, after the tool checkpoint (the side effect may "
    "or may not have happened)",
    "parallel-tool": "inside the second of two tool bodies (read_file had completed)",
    "midstream": "in the middle of the model's answer, after the batching window had written "
    "some of its chunks",
}


class _Narrator:
    """Prints the demo's story (unless ``--json``) and collects its JSON report."""

    def __init__(self, out: TextIO, as_json: bool, report: dict[str, Any]) -> None:
        self.out, self.as_json, self.report = out, as_json, report

    def __call__(self, text: str = "") -> None:
        if not self.as_json:
            print(text, file=self.out)

    def done(self) -> int:
        if self.as_json:
            print(json.dumps(self.report, ensure_ascii=False), file=self.out)
        return 0


async def run_demo(
    out: TextIO,
    *,
    root: str,
    crash: str,
    turns: int,
    session_id: str | None,
    recover: bool,
    as_json: bool,
) -> int:
    """Run the demo; return the exit code."""
    root = os.path.abspath(root)
    session_id = session_id or f"demo-{uuid.uuid4().hex[:8]}"
    say = _Narrator(out, as_json, {"root": root, "session_id": session_id, "crash": crash})
    if await JsonlPersistence(root).storage.revision(session_id) is not None:
        raise ValueError(
            f'session "{session_id}" already exists in {root}; pick another --session-id or --root'
        )
    say(f"Session {session_id!r} in {root}")
    say(
        f"A scripted agent runs {turns} turn(s); each asks for read_file and write_file, then "
        "answers."
    )
    say(
        "The log is a JSONL file; the checkpoint policy makes it durable before every model "
        "request, before every tool body and after every step."
    )
    say()
    if not _run_child(say, root, session_id, crash, turns):
        return 2
    backend = JsonlPersistence(root)
    examined = await backend.examine(session_id)
    _show_disk(say, examined)
    if not recover:
        say()
        say(f"Left as the crash left it. Check it with: agent-session verify {root}")
        await backend.aclose()
        return say.done()
    await backend.load(session_id)  # the cold load commits the repair durably
    await backend.aclose()
    say()
    say(
        "3. Recovery (a cold load) appended those closers and fsynced the log. Nothing that "
        "was durable was changed."
    )
    await _resume(say, root, session_id, examined)
    return say.done()


def _run_child(say: _Narrator, root: str, session_id: str, crash: str, turns: int) -> bool:
    """Run the agent in a child process that is SIGKILLed at the ``crash`` point; tell what
    it did. ``False`` when it was not killed as expected."""
    child = [sys.executable, "-m", "agent_session.child", root, session_id]
    child += ["--mode", crash, "--turns", str(turns - 1)]
    result = subprocess.run(child, capture_output=True, text=True, timeout=300, check=False)
    durable = [
        int(line.split()[1]) for line in result.stdout.splitlines() if line.startswith("durable ")
    ]
    killed = result.returncode == -signal.SIGKILL
    report = say.report
    report.update(
        killed=killed, checkpoints=len(durable), durable_events=durable[-1] if durable else 0
    )
    if crash != "none" and not killed:
        print(
            f"agent-session: error: the child was expected to be killed but exited with "
            f"{result.returncode}: {result.stderr.strip()[-500:]}",
            file=sys.stderr,
        )
        return False
    if killed:
        say(f"1. The agent process ran turn(s) 1..{turns - 1} and started turn {turns}.")
        say(f"   It was killed with SIGKILL {CRASH_MODES[crash]}.")
        say(
            f"   Before dying it had passed {len(durable)} checkpoints; the last one made "
            f"{report['durable_events']} events durable."
        )
    else:
        say(f"1. The agent process ran {turns} turn(s) to completion ({len(durable)} checkpoints).")
    return True


def _show_disk(say: _Narrator, examined: Examination) -> None:
    """Tell what is on disk and what recovery will append."""
    inspected, stored_events = examined.session, examined.stored_events
    closers = inspected.events[stored_events:]
    say.report.update(
        stored_events=stored_events,
        torn_tail=examined.torn_tail,
        closers=[c.to_json() for c in closers],
    )
    say()
    say(
        f"2. On disk: {stored_events} events"
        + (", plus a torn final fragment" if examined.torn_tail else "")
        + "."
    )
    if closers:
        last_start = brackets(inspected.events).start_index
        tail = [e.type for e in inspected.events[last_start:stored_events]]
        say(f"   The last turn is open: {_runs(tail)}")
        say(
            f"   Recovery will close it with {len(closers)} event(s): "
            + ", ".join(_describe(c) for c in closers)
        )
    else:
        say("   Every turn is closed; nothing to repair.")


async def _resume(say: _Narrator, root: str, session_id: str, examined: Examination) -> None:
    """Resume the repaired session and run one more turn, which checks the write whose
    outcome is unknown."""
    inspected = examined.session
    closers = inspected.events[examined.stored_events :]
    next_turn = next_turn_number(inspected.events)
    unknown = [
        e
        for e in closers
        if e.type == TOOL_RESULT and e.data["error"]["code"] == TOOL_OUTCOME_UNKNOWN
    ]
    check = ""
    if unknown:  # the resumed model verifies the write whose outcome is unknown
        call = inspected.events[unknown[0].source_event_seqs[0]]  # type: ignore[index]
        check = json.loads(call.data["arguments"]).get("path", "")
    stack = open_stack(root, resume_script(next_turn, check))
    session = await stack.runtime.sessions.resume(session_id)
    agent = stack.runtime.agent(session, model=MODEL, system=SYSTEM)
    reason = await agent.run_turn(
        "Please check whether the interrupted write happened, then continue."
    )
    await stack.close()
    say.report.update(resumed_turn=next_turn, resumed_reason=reason, events=len(session.events))
    say(
        f"4. Resumed the session and ran turn {next_turn}: {reason['kind']}. The model saw the "
        "repaired results and was told not to retry blindly."
    )
    say()
    say("Transcript:")
    say(render(session.events))


def resume_script(turn: int, check: str) -> list[ScriptedStep]:
    """The resumed turn: read the file whose write has an unknown outcome, then answer."""
    path = check or "notes-1-2.txt"
    return [
        ScriptedStep(
            text=["The last write was interrupted; ", "checking it first."],
            calls=[ScriptedCall(f"call-{turn}-1", "read_file", ['{"path":"', path, '"}'])],
            usage=(150, 12),
        ),
        ScriptedStep(text=["Checked ", f"{path}; ", "continuing from there."], usage=(170, 9)),
    ]


def _runs(types: list[str]) -> str:
    """``a, b x3, c``: consecutive repeats folded."""
    parts: list[tuple[str, int]] = []
    for kind in types:
        if parts and parts[-1][0] == kind:
            parts[-1] = (kind, parts[-1][1] + 1)
        else:
            parts.append((kind, 1))
    return ", ".join(kind if n == 1 else f"{kind} x{n}" for kind, n in parts)


def _describe(event: SessionEvent) -> str:
    if event.type == TOOL_RESULT:
        call = str(event.data["message"]["source"]["callId"])
        code = str(event.data["error"]["code"])
        return f"tool/result {call} ({code})"
    return str(event.type)
