"""``agent-session recover``: durably repair what appending can honestly repair, skip what a
live writer holds, and say what it cannot repair."""

from __future__ import annotations

import sys

from agent_session.exits import CORRUPT, STATUS_CODES
from agent_session.inventory import Verdict, status_of, transcript_problem
from persistence_jsonl import JsonlPersistence
from recovery import answers
from session import SessionCollisionError

__all__ = ["recover"]


async def recover(backend: JsonlPersistence, targets: list[tuple[str, Verdict | None]]) -> int:
    """Repair each ``(id, verdict)`` target (a verdict the listing found skips the
    examination), print a line per session that is not intact and a summary; the exit code
    (the highest among the sessions left unrepaired)."""
    progress = sys.stderr.isatty() and len(targets) > 20
    repaired = intact = broken = skipped = worst = 0
    for index, (id, found) in enumerate(targets, start=1):
        if progress:
            done = int(30 * index / len(targets))
            print(
                f"\r[{'#' * done}{'.' * (30 - done)}] {index}/{len(targets)}",
                end="",
                file=sys.stderr,
                flush=True,
            )
        status, detail = found or await status_of(backend, id)
        if status == "open":  # a live writer runs its last turn: nothing to repair
            skipped += 1
            print(f"{id}: skipped (live): {detail}")
            continue
        if status in ("interrupted", "torn tail"):
            before = len(await backend.read_from(id, 0))
            try:
                loaded = await backend.load(id)
            except SessionCollisionError as e:  # a live writer took it meanwhile
                skipped += 1
                print(f"{id}: skipped (live): {e}")
                continue
            repaired += 1
            print(
                f"{id}: repaired ({status}): {len(loaded.events) - before} closer(s) "
                "appended" + (", torn tail cut" if "torn" in detail else "")
            )
        elif status == "invalid" and await _answer_calls(backend, id):
            repaired += 1
            print(f"{id}: repaired (invalid): {detail.split('; ', 1)[-1]}: answered")
        elif status == "balanced":
            intact += 1
        else:
            broken += 1
            worst = max(worst, STATUS_CODES.get(status, CORRUPT))
            print(f"{id}: not repaired ({status}): {detail}")
    if progress:
        print(file=sys.stderr)
    if repaired == 0 and broken == 0 and skipped == 0:
        print(f"nothing to do: {intact} session(s) intact")
    else:
        live = f"; {skipped} skipped (live)" if skipped else ""
        print(
            f"recovered {repaired} session(s); {intact} already intact{live}; {broken} corrupt, "
            "unsupported or invalid beyond repair (left untouched)"
        )
    return worst


async def _answer_calls(backend: JsonlPersistence, id: str) -> bool:
    """Append the results the last assistant message's calls lack (unknown outcome for a
    recorded call, not started otherwise), if that makes the history valid; ``False`` (and
    nothing written) when it would not."""
    events = (await backend.load(id)).events
    extra = answers(events)
    if not extra or transcript_problem(id, [*events, *extra]) is not None:
        return False
    await backend.append(id, extra)
    return True
