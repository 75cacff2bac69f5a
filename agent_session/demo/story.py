"""``agent-session demo``: the whole stack surviving a real crash, told as a short story.

A child process runs the reference stack (JSONL backend, checkpoint policy, reference loop,
scripted model, a read-only tool and a side-effecting one) and is SIGKILLed at a failpoint
during its last turn. The parent shows what was on disk, recovers the session, resumes it,
runs one more turn, and prints the transcript with the repaired tool results marked.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import uuid
from typing import IO, Any, TextIO

from agent_session.agent_loop.scripted import ScriptedCall, ScriptedStep
from agent_session.cli.commands import check_exists, open_backend
from agent_session.cli.exits import CORRUPT, INTERRUPTED, IO_ERROR, UserError
from agent_session.cli.output import Progress
from agent_session.demo.real_model import real_adapter
from agent_session.demo.stack import MODEL, SYSTEM, open_stack
from agent_session.see.transcript import render
from agent_session.session import SessionEvent
from agent_session.session.events.outcomes import TOOL_OUTCOME_UNKNOWN
from agent_session.session.events.turns import brackets, next_turn_number
from agent_session.session.events.types import TOOL_RESULT
from agent_session.session.persistence.api import Diagnosis
from agent_session.session.persistence.redaction import mask_store, scrub
from agent_session.stores import parse_store

__all__ = ["CHILD_TIMEOUT_S", "CRASH_MODES", "run_demo"]

CHILD_TIMEOUT_S = 300
"""How long the agent child may run before the demo gives up on it."""

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
    compression: str = "none",
    model: str | None = None,
) -> int:
    """Run the demo (its log written plain or compressed; ``model``: a real model instead of
    the script); return the exit code."""
    if model is not None:
        real_adapter(model)  # a missing key or extra is said before anything runs
    store = parse_store(root)
    if os.path.exists(store.path):
        check_exists(store)  # a file as a JSONL root, a directory as a database
    if store.kind != "jsonl":
        compression = store.kind  # (a database has no per-log encoding)
    root, named = store.url, store.named  # the second, without a password, for output
    if session_id is None:
        session_id = f"demo-{uuid.uuid4().hex[:8]}"
    report = {
        "root": named,
        "sessionId": session_id,
        "crash": crash,
        "backend": store.kind,
        "compression": compression if store.kind == "jsonl" else None,
    }
    say = _Narrator(out, as_json, report)
    probe = open_backend(store)
    try:
        exists = await probe.storage.revision(session_id) is not None
    finally:
        await probe.aclose()
    if exists:
        raise ValueError(
            f'session "{session_id}" already exists in {named}; pick another --session-id '
            "or --store"
        )
    say(f"Session {session_id!r} in {named}")
    who = "A scripted agent" if model is None else f"An agent on {model}"
    say(f"{who} runs {turns} turn(s); each asks for read_file and write_file, then answers.")
    kind = {
        "none": "a JSONL file",
        "zstd": "a zstd-compressed JSONL file",
        "sqlite": "one row per event in a SQLite database",
        "postgres": "one row per JSONL line in a PostgreSQL database",
    }[compression]
    say(
        f"The log is {kind}; the checkpoint policy makes it durable before every model "
        "request, before every tool body and after every step."
    )
    say()
    try:
        _run_child(say, root, session_id, crash, turns, compression, model)
    except KeyboardInterrupt:
        print(
            f"agent-session: interrupted; the agent child was stopped and session "
            f"{session_id!r} is left as it was (check it with: agent-session verify {named})",
            file=sys.stderr,
        )
        return INTERRUPTED
    backend = open_backend(store, read_only=not recover)  # left as the crash left it, -wal and all
    examined = await backend.diagnose(session_id)
    _show_disk(say, examined)
    if not recover:
        say()
        say(f"Left as the crash left it. Check it with: {_command()} verify {named}")
        await backend.aclose()
        return say.done()
    await backend.load(session_id)  # the cold load commits the repair durably
    await backend.aclose()
    say()
    if examined.closers or examined.torn_tail:
        say(
            "3. Recovery (a cold load) appended those closers and fsynced the log. Nothing "
            "that was durable was changed."
        )
    else:
        say("3. Nothing to recover: a cold load found every turn closed and wrote nothing.")
    await _resume(say, root, session_id, examined, model)
    command, shown = _command(), store.shown
    say()
    say("Next, look at what was written:")
    say(f"  {command} ls {shown}")
    say(f"  {command} show {shown} {session_id}")
    say(f"  {command} verify {shown}")
    return say.done()


def _command() -> str:
    """How this command was run, as a user can type it again in the same directory (the
    path to the venv's script when it was run by path, so no venv needs activating)."""
    script = sys.argv[0]
    if os.path.basename(script) != "agent-session":
        return "python -m agent_session"
    on_path = shutil.which("agent-session")
    if on_path is not None and os.path.exists(script) and os.path.samefile(on_path, script):
        return "agent-session"
    relative = os.path.relpath(script)
    return os.path.abspath(script) if relative.startswith("..") else relative


def _run_child(
    say: _Narrator,
    root: str,
    session_id: str,
    crash: str,
    turns: int,
    compression: str,
    model: str | None,
) -> None:
    """Run the agent in a child process that is SIGKILLed at the ``crash`` point, with a
    progress line on a terminal; tell what it did. Raises :class:`UserError` with the
    child's own error when it failed otherwise, and ``KeyboardInterrupt`` (the child
    stopped) on Ctrl-C."""
    durable = _checkpoints(say, root, session_id, crash, turns, compression, model)
    killed = durable.returncode == -signal.SIGKILL
    if durable.missed and not killed:
        raise UserError(
            f"the model never reached the {crash!r} failpoint (it did not call write_file, or "
            f"never streamed text), so nothing crashed; session {session_id!r} is complete. "
            "Try --crash request"
        )
    report = say.report
    report.update(
        killed=killed,
        checkpoints=len(durable.counts),
        durableEvents=durable.counts[-1] if durable.counts else 0,
    )
    if not killed and (durable.returncode != 0 or crash != "none"):
        failed = f"the agent child failed (exit {durable.returncode}): {durable.cause}"
        raise UserError(failed, code=IO_ERROR if "Error: [Errno" in durable.cause else CORRUPT)
    if killed:
        say(f"1. The agent process ran turn(s) 1..{turns - 1} and started turn {turns}.")
        say(f"   It was killed with SIGKILL {CRASH_MODES[crash]}.")
        say(
            f"   Before dying it had passed {len(durable.counts)} checkpoints; the last one "
            f"made {report['durableEvents']} events durable."
        )
    else:
        say(
            f"1. The agent process ran {turns} turn(s) to completion "
            f"({len(durable.counts)} checkpoints)."
        )


class _ChildRun:
    """What the agent child reported: the event count after every checkpoint, its exit
    status and (when it failed) the last line of its error output."""

    def __init__(self) -> None:
        self.counts: list[int] = []
        self.returncode = 0
        self.cause = ""
        self.missed = False
        """The last turn ended without reaching the failpoint (a real model's choice)."""


def _checkpoints(
    say: _Narrator,
    root: str,
    session_id: str,
    crash: str,
    turns: int,
    compression: str,
    model: str | None,
) -> _ChildRun:
    with tempfile.TemporaryFile("w+") as errors:  # a file, not a pipe: it never fills up
        run = _watch_child(say, root, session_id, crash, turns, compression, model, errors)
        errors.seek(0)
        run.cause = scrub(_cause(errors.read()), root) or f"exit status {run.returncode}"
    return run


def _cause(stderr: str) -> str:
    """The exception line of the last traceback in ``stderr`` (``OSError: [Errno ...]``),
    else its last line."""
    lines = stderr.splitlines()
    starts = [i for i, line in enumerate(lines) if line.startswith("Traceback (most recent")]
    if starts:
        after = lines[starts[-1] + 1 :]
        found = next((line for line in after if line and not line[0].isspace()), None)
        if found is not None:
            return found.strip()
    rest = [line.strip() for line in lines if line.strip()]
    return rest[-1] if rest else ""


def _watch_child(
    say: _Narrator,
    root: str,
    session_id: str,
    crash: str,
    turns: int,
    compression: str,
    model: str | None,
    errors: IO[str],
) -> _ChildRun:
    command = [sys.executable, "-m", "agent_session.demo.child", root, session_id]
    command += ["--mode", crash, "--turns", str(turns - 1)]
    if model is not None:
        command += ["--model", model]
    if compression in ("none", "zstd"):  # (a database has no per-log encoding)
        command += ["--compression", compression]
    run = _ChildRun()
    progress = Progress(turns, "turns run", threshold=5 if not say.as_json else 1 << 30)
    child = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=errors, text=True, bufsize=1)
    stopped: list[str] = []

    def stop(why: str) -> None:
        stopped.append(why)
        child.kill()

    timer = threading.Timer(CHILD_TIMEOUT_S, stop, ["timeout"])
    previous = signal.signal(signal.SIGINT, lambda *_: stop("interrupt"))
    timer.start()
    try:
        assert child.stdout is not None
        for line in child.stdout:
            if line.startswith("durable "):
                run.counts.append(int(line.split()[1]))
            elif line.startswith("turn "):
                progress.step(int(line.split()[1]))
            elif line.startswith("failpoint-missed"):
                run.missed = True
        run.returncode = child.wait()
    finally:
        timer.cancel()
        signal.signal(signal.SIGINT, previous)
        child.kill()  # a no-op once it ended
        child.wait()
        progress.clear()
    if "interrupt" in stopped or run.returncode == -signal.SIGINT:
        raise KeyboardInterrupt
    if stopped:
        raise UserError(
            f"the agent child did not finish within {CHILD_TIMEOUT_S} s and was stopped; "
            f"session {session_id!r} is left as it was (check it with: agent-session verify "
            f"{mask_store(root)})"
        )
    return run


def _show_disk(say: _Narrator, examined: Diagnosis) -> None:
    """Tell what is on disk and what recovery will append."""
    inspected, stored_events = examined.session, examined.stored_events
    closers = inspected.events[stored_events:]
    say.report.update(
        storedEvents=stored_events,
        tornTail=examined.torn_tail,
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


async def _resume(
    say: _Narrator, root: str, session_id: str, examined: Diagnosis, model: str | None
) -> None:
    """Resume the repaired session and run one more turn, which checks the write whose
    outcome is unknown (``model``: asked of a real model instead of the script)."""
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
    stack = open_stack(root, resume_script(next_turn, check) if model is None else [])
    if model is not None:
        stack.runtime.models.register(*real_adapter(model))
    session = await stack.runtime.sessions.resume(session_id)
    agent = stack.runtime.agent(session, model=model or MODEL, system=SYSTEM)
    reason = await agent.run_turn(
        "Please check whether the interrupted write happened, then continue."
    )
    await stack.close()
    say.report.update(resumedTurn=next_turn, resumedReason=reason, events=len(session.events))
    repaired = (
        " The model saw the repaired results and was told not to retry blindly." if closers else ""
    )
    say(f"4. Resumed the session and ran turn {next_turn}: {reason['kind']}.{repaired}")
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
