"""What is in a store: one row per session, read one session at a time (never the whole
store in memory), without writing anything."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Final

from agent_session.interchange.export import TranscriptError, check_transcript
from agent_session.see.states import AWAITING_APPROVAL, AWAITING_BUDGET, LISTED_STATES
from agent_session.session import (
    Session,
    SessionError,
    SessionEvent,
    SessionFormatUnsupportedError,
    SessionNotFoundError,
    SessionPersistenceCorruptionError,
)
from agent_session.session.events.budget import budget_parked
from agent_session.session.events.header import version_problem
from agent_session.session.events.interruption import interruption
from agent_session.session.events.parked import ParkedCall, parked_calls
from agent_session.session.persistence.api import ListedSession
from agent_session.session.persistence.service import SessionPersistence
from agent_session.stores import StoreSpec, require_postgres

__all__ = [
    "AWAITING_APPROVAL",
    "AWAITING_BUDGET",
    "LISTED_STATES",
    "PROBLEM_FLAGS",
    "SessionRow",
    "Status",
    "Verdict",
    "over_budget",
    "refine",
    "rows",
    "settleable",
    "status_of",
    "transcript_problem",
    "waiting",
]

Status = str
"""``balanced``, ``interrupted``, ``torn tail``, ``invalid`` (balanced, but not a history a
provider accepts), ``open`` (its last turn is running in a live writer),
``awaiting-approval`` (its last turn is parked until a tool call is decided),
``awaiting-budget`` (parked until its budget is raised), ``corrupt``,
``unsupported``, ``unreadable`` (the operating system refused to read it) or ``not
found``."""


@dataclass
class SessionRow:
    """One session of a store, as ``ls`` shows it."""

    id: str
    cwd: str | None
    created_at: int | None
    updated_at: int | None
    """When it was last written (ms since the epoch): a JSONL log's modification time, the
    time of a SQLite session's last event, a PostgreSQL session's last write."""
    events: int
    state: Status
    """As ``verify`` words it, from what a listing can see: ``balanced``; ``open`` (a live
    writer holds the session, the turn is still running); ``interrupted`` (open with no
    writer: it needs recovery); ``awaiting-approval`` (open and parked until a tool call is
    decided: nothing to recover); ``awaiting-budget`` (parked until its budget is raised);
    ``torn tail``; or, for an entry that is not a readable
    session, its problem (``corrupt``, ``unsupported``, ``unreadable``)."""
    size: int | None
    """Bytes of its log file; ``None`` for a session in a database (reading every row's data
    only to count bytes would make listing a large database slow)."""
    path: str
    flags: list[str] = field(default_factory=list)
    """``torn tail``, ``corrupt``, ``unsupported``, ``unreadable`` (the operating system
    refused to read it)."""
    problem: str | None = None
    """The error message for a corrupt, unsupported or unreadable entry."""
    backend: str = "jsonl"
    """The kind of store: ``jsonl``, ``sqlite`` or ``postgres``."""
    compression: str | None = "none"
    """A JSONL log's encoding: ``none`` (``session.jsonl``) or ``zstd``
    (``session.jsonl.zstd``); ``None`` in a database."""
    turns: int | None = None
    """How many turns it holds (``None`` for an entry that is not a readable session)."""
    parent: str | None = None
    """The session it was forked from (its header's ``parentSession``)."""
    seed_length: int | None = None
    """How many of the parent's events a fork was seeded with (``seedLength``)."""
    origin: str | None = None
    """``subagent`` for a child agent's session (its header's ``origin``)."""
    depth: int | None = None
    """How many delegations separate it from a user-facing session (``delegationDepth``)."""

    @property
    def problem_flag(self) -> str | None:
        """The flag that makes it a problem entry (not a readable session), or ``None``."""
        return next((flag for flag in self.flags if flag in PROBLEM_FLAGS), None)

    def to_json(self) -> dict[str, Any]:
        """The row with the wire format's camelCase keys (``createdAt``)."""
        row = asdict(self)
        row["createdAt"] = row.pop("created_at")
        row["updatedAt"] = row.pop("updated_at")
        row["parentSession"] = row.pop("parent")
        row["seedLength"] = row.pop("seed_length")
        row["origin"] = row.pop("origin")
        row["delegationDepth"] = row.pop("depth")
        return row


def _state(last_bracket: str | None, writer_active: bool, torn: bool) -> Status:
    """A readable session's state, by the rule ``verify`` applies to what it reads."""
    if last_bracket == "start":
        return "open" if writer_active else "interrupted"
    return "torn tail" if torn else "balanced"


def subagent_trees(listed: Iterable[SessionRow]) -> dict[str, list[str]]:
    """Each listed session that has child agents' sessions (``origin: subagent``) and those
    sessions, down the whole tree, deepest first: the order to delete them in, so a failure
    never leaves a child without its parent."""
    below: dict[str, list[str]] = {}
    for row in listed:
        if row.origin == "subagent" and row.parent is not None:
            below.setdefault(row.parent, []).append(row.id)

    def deepest_first(of: str) -> list[str]:
        return [d for child in sorted(below.get(of, [])) for d in [*deepest_first(child), child]]

    return {id: deepest_first(id) for id in below}


def rows(store: StoreSpec, max_log_bytes: int | None = None) -> Iterator[SessionRow]:
    """A row per session of ``store``, without writing.

    JSONL: per session directory (and per entry planted beside them), from a streaming pass
    over each log (header, event count, last turn bracket, torn tail): memory stays bounded
    whatever the logs' sizes; a log over ``max_log_bytes`` is reported, not read.

    SQLite: per ``sessions`` row, from index queries (its last seq, its last turn bracket)
    without reading any event's data, so a torn or damaged row is not seen (``verify``
    reads every row); a row whose header breaks a rule is a problem entry. Whether another
    process is writing a SQLite session cannot be seen, so an open last turn is
    ``interrupted``; PostgreSQL shows a live writer's lock, so there it is ``open``."""
    seen: set[str] = set()
    hot = _database_rows(store) if store.kind != "jsonl" else _jsonl_rows(store, max_log_bytes)
    for row in hot:
        seen.add(row.id)
        yield row
    yield from _archived_rows(store, seen)


def _archived_rows(store: StoreSpec, hot: set[str]) -> Iterator[SessionRow]:
    """A row per session of the store's archive that the store does not hold (flag
    ``archived``), from the manifests: nothing is downloaded but them."""
    from agent_session.cold.tier import archived

    for id, manifest, where, error in archived(store):
        if id in hot:
            continue
        if manifest is None:
            flag = _problem_flag(error)
            yield SessionRow(id, None, None, None, 0, flag, None, where, [flag], str(error), "s3")
            continue
        header = manifest.header
        yield SessionRow(
            id,
            header.get("cwd"),
            header.get("createdAt"),
            manifest.updated_at,
            manifest.events,
            manifest.state,
            manifest.size,
            where,
            ["archived"],
            None,
            "s3",
            "zstd",
            None,
            header.get("parentSession"),
            header.get("seedLength"),
        )


def _jsonl_rows(store: StoreSpec, max_log_bytes: int | None) -> Iterator[SessionRow]:
    from agent_session.persistence_jsonl.reader import DEFAULT_MAX_LOG_BYTES
    from agent_session.persistence_jsonl.survey import (
        survey,  # (only what this kind of store needs)
    )

    for found in survey(store.path, max_log_bytes=max_log_bytes or DEFAULT_MAX_LOG_BYTES):
        summary, path, size = found.summary, found.path, found.size
        if summary is None:
            flag = _problem_flag(found.error)
            yield SessionRow(
                found.fallback_id,
                None,
                None,
                found.updated,
                0,
                flag,
                size,
                path,
                [flag],
                str(found.error),
                "jsonl",
                found.compression,
            )
            continue
        header = summary.header
        flags = ["torn tail"] if summary.torn else []
        problem = version_problem(header)
        if problem is not None:
            flags.append("unsupported")
        state = _state(summary.last_bracket, found.writer_active, summary.torn)
        yield SessionRow(
            header.id,
            header.cwd,
            header.created_at,
            found.updated,
            summary.events,
            state,
            size,
            path,
            flags,
            problem,
            "jsonl",
            found.compression,
            summary.turns,
            header.parent_session,
            header.seed_length,
            header.origin,
            header.delegation_depth,
        )


def _database_rows(store: StoreSpec) -> Iterator[SessionRow]:
    survey: Callable[[str], list[ListedSession]]
    if store.kind == "sqlite":
        from agent_session.persistence_sqlite.survey import survey
    else:
        require_postgres()
        from agent_session.persistence_postgres.survey import survey
    path, kind = store.shown, store.kind
    for found in survey(store.path):
        header = found.header
        if header is None:
            flag = _problem_flag(found.error)
            yield SessionRow(
                found.id,
                None,
                None,
                found.updated,
                found.events,
                flag,
                None,
                path,
                [flag],
                str(found.error),
                kind,
                None,
            )
            continue
        flags = []
        problem = version_problem(header)
        if problem is not None:
            flags.append("unsupported")
        state = _state(found.last_bracket, found.writer_active, torn=False)
        yield SessionRow(
            header.id,
            header.cwd,
            header.created_at,
            found.updated,
            found.events,
            state,
            None,
            path,
            flags,
            problem,
            kind,
            None,
            found.turns if found.turns is not None else 0,
            header.parent_session,
            header.seed_length,
            header.origin,
            header.delegation_depth,
        )


def _problem_flag(error: BaseException | None) -> str:
    """The flag of an entry that is not a readable session."""
    if isinstance(error, SessionFormatUnsupportedError):
        return "unsupported"
    if isinstance(error, OSError):
        return "unreadable"
    return "corrupt"


PROBLEM_FLAGS: Final = ("corrupt", "unsupported", "unreadable")
"""The flags of a row that is not a readable session (its ``problem`` says why)."""


Verdict = tuple[Status, str]
"""A session's status and its detail line."""


async def status_of(backend: SessionPersistence, id: str) -> Verdict:
    """The full read-only verdict on one session and a detail line. Nothing is written:
    this is the backend's ``diagnose`` (a read and the in-memory validation of ``inspect``)."""
    try:
        examined = await backend.diagnose(id)
    except SessionNotFoundError:
        return "not found", f'no session "{id}" in this store'
    except SessionFormatUnsupportedError as e:
        return "unsupported", str(e)
    except SessionPersistenceCorruptionError as e:
        return "corrupt", str(e)
    except OSError as e:
        return "unreadable", str(e)
    count, closers = examined.stored_events, examined.closers
    parked = parked_calls(examined.session.events)
    if parked:
        torn = "; torn tail" if examined.torn_tail else ""
        return AWAITING_APPROVAL, f"{count} events; {waiting(parked)}{torn}"
    budget = over_budget(examined.session.events)
    if budget is not None:
        torn = "; torn tail" if examined.torn_tail else ""
        return AWAITING_BUDGET, f"{count} events; {budget}{torn}"
    if closers and examined.writer_elsewhere:
        return "open", f"{count} events; the last turn is still running in a live writer"
    could_settle = settleable(examined.session.events)
    if closers:
        detail = f"{count} events; the last turn is open ({closers} closers needed){could_settle}"
        if examined.torn_tail:
            detail += "; torn tail"
        return "interrupted", detail
    if examined.torn_tail:
        return "torn tail", f"{count} events; a torn final fragment to cut"
    problem = transcript_problem(id, examined.session.events)
    if problem is not None:
        return "invalid", f"{count} events; {problem}"
    return "balanced", f"{count} events{could_settle}"


def over_budget(events: Sequence[SessionEvent]) -> str | None:
    """What a turn parked over its budget waits for, in one line; ``None`` when not parked."""
    park = budget_parked(events)
    if park is None:
        return None
    over = park.data.get("over")
    named = ", ".join(map(str, over)) if isinstance(over, list) else "its limits"
    return (
        f"turn {park.turn} is parked over its budget ({named}) before its step {park.step} "
        "request; raise it with `agent-session budget raise`, then resume the agent"
    )


def waiting(parked: Sequence[ParkedCall]) -> str:
    """What the parked calls of a session wait for, in one line."""
    parts = []
    for call in parked:
        what = f'call "{call.call_id}" (tool "{call.tool_name}", arguments {call.arguments_digest})'
        if call.decision is None:
            why = f": {call.reason}" if call.reason else ""
            parts.append(f"{what} awaits approval{why}")
        else:
            by = f" by {call.decision.by}" if call.decision.by else ""
            parts.append(
                f"{what} is decided {call.decision.outcome}{by}; the agent carries it out "
                "when it resumes"
            )
    return "; ".join(parts)


async def refine(reader: SessionPersistence, row: SessionRow) -> None:
    """Read a listed session whose last turn is open (few are) and say more of it: a parked
    turn is ``awaiting-approval``; an interrupted one that resuming could settle gets the
    ``settleable`` flag. An entry that cannot be read is left as listed."""
    if row.state not in ("interrupted", "open"):
        return
    try:
        events = (await reader.inspect(row.id)).events
    except (SessionError, OSError):
        return
    if parked_calls(events):
        row.state = AWAITING_APPROVAL
    elif budget_parked(events) is not None:
        row.state = AWAITING_BUDGET
    elif row.state == "interrupted" and settleable(events):
        row.flags.append("settleable")


def settleable(events: Sequence[SessionEvent]) -> str:
    """What settlement could resolve when the agent resumes (the CLI runs no tools): ``""``
    when the last turn was not interrupted with calls left unanswered."""
    crash = interruption(events)
    if crash is None or not (crash.not_started or crash.outcome_unknown):
        return ""
    parts = []
    if crash.not_started:
        parts.append(f"{len(crash.not_started)} not started (dispatched)")
    if crash.outcome_unknown:
        parts.append(
            f"{len(crash.outcome_unknown)} of unknown outcome (settled by their tools' classes)"
        )
    return "; settleable when the agent resumes: " + ", ".join(parts)


def transcript_problem(id: str, events: Sequence[SessionEvent]) -> str | None:
    """Why the model history of a balanced log is not one a provider accepts (a tool call
    without exactly one result, a result answering no call, a tool-call block of another
    shape), or ``None``."""
    try:
        check_transcript(Session.create(id, seed=events).derive_messages())
    except TranscriptError as e:
        return str(e)
    return None
