"""``agent-session recover``: durably repair what appending can honestly repair, skip what a
live writer holds, and say what it cannot repair."""

from __future__ import annotations

from dataclasses import dataclass

from agent_session.cli.exits import CORRUPT, IO_ERROR, OK, STATUS_CODES
from agent_session.cli.output import Progress, json_line
from agent_session.recovery import answers
from agent_session.see.inventory import Verdict, status_of, transcript_problem
from agent_session.session import SessionCollisionError, SessionError
from agent_session.session.persistence.service import SessionPersistence

__all__ = ["Outcome", "recover"]


@dataclass(frozen=True, slots=True)
class Outcome:
    """What ``recover`` did with one session."""

    action: str
    """``repaired``, ``intact``, ``skipped`` (a live writer holds it) or ``not repaired`` (it
    cannot be: corrupt, unsupported, unreadable, not found, or invalid beyond what appending
    can fix; left untouched)."""
    status: str
    """The session's status before (see ``agent_session.see.inventory.Status``)."""
    detail: str
    """What was appended, why it was skipped, or why it cannot be repaired."""
    code: int = OK
    """The exit code it contributes."""


async def recover(
    backend: SessionPersistence, targets: list[tuple[str, Verdict | None]], *, as_json: bool
) -> int:
    """Repair each ``(id, verdict)`` target (a verdict the listing found skips the
    examination); print a line per session that is not intact (every session, as JSON
    lines, with ``as_json``) and a summary. A failure on one session (a permission error
    while appending, say) is reported for it, and the run goes on. Returns the highest exit
    code among the sessions left unrepaired."""
    progress = Progress(len(targets), "recovered")
    counts = dict.fromkeys(("repaired", "intact", "skipped", "not repaired"), 0)
    worst = OK
    for index, (id, found) in enumerate(targets, start=1):
        outcome = await _recover_one(backend, id, found)
        counts[outcome.action] += 1
        worst = max(worst, outcome.code)
        if as_json:
            line = {"id": id, "action": outcome.action, "state": outcome.status}
            progress.say(json_line({**line, "detail": outcome.detail}))
        elif outcome.action != "intact":
            why = "live" if outcome.action == "skipped" else outcome.status
            progress.say(f"{id}: {outcome.action} ({why}): {outcome.detail}")
        progress.step(index)
    progress.clear()
    if not as_json:
        print(
            f"{counts['repaired']} repaired, {counts['intact']} healthy, "
            f"{counts['skipped']} skipped (live), {counts['not repaired']} not repaired "
            "(left untouched)"
        )
    return worst


async def _recover_one(backend: SessionPersistence, id: str, found: Verdict | None) -> Outcome:
    status, detail = found or await status_of(backend, id)
    if status == "balanced":
        return Outcome("intact", status, detail)
    if status == "open":  # a live writer runs its last turn: nothing to repair
        return Outcome("skipped", status, detail)
    try:
        if status in ("interrupted", "torn tail"):
            before = len(await backend.read_from(id, 0))
            loaded = await backend.load(id)
            cut = ", torn tail cut" if "torn" in detail else ""
            done = f"{len(loaded.events) - before} closer(s) appended{cut}"
            return Outcome("repaired", status, done)
        if status == "invalid" and await _answer_calls(backend, id):
            return Outcome("repaired", status, f"{detail.split('; ', 1)[-1]}: answered")
    except SessionCollisionError as e:  # a live writer took it meanwhile
        return Outcome("skipped", "open", str(e))
    except OSError as e:
        return Outcome("not repaired", status, f"cannot write: {e}", IO_ERROR)
    except SessionError as e:
        return Outcome("not repaired", status, str(e), CORRUPT)
    return Outcome("not repaired", status, detail, STATUS_CODES.get(status, CORRUPT))


async def _answer_calls(backend: SessionPersistence, id: str) -> bool:
    """Append the results the last assistant message's calls lack (unknown outcome for a
    recorded call, not started otherwise), if that makes the history valid; ``False`` (and
    nothing written) when it would not."""
    events = (await backend.load(id)).events
    extra = answers(events)
    if not extra or transcript_problem(id, [*events, *extra]) is not None:
        return False
    await backend.append(id, extra)
    return True
