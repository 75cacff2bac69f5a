"""Replay: run a recorded session again through this project's agent loop, offline, with the
model and the tools served from its log, into a new session.

- **The model** answers each request with the chunks the recorded step streamed, in order
  (a step that streamed nothing is answered with its recorded message, block by block). It
  sends what the recorded request header says the adapter sent, so the header is the same.
- **The tools** are the recorded header's, each answering a call with the result recorded for
  its call id, under the effect class and exclusivity the log shows (a call settled by
  re-running it: ``idempotent``; one reconciled: ``unsafe`` with a probe that finds it; one
  that waited for the call before it: exclusive). ``tools=`` runs your own bodies instead
  (the model is still served from the log), which is how a change to a tool is checked
  against recorded sessions; ``system=`` sends another system prompt.
- **Turns** are run as recorded: a user's message by ``run_turn``, a turn that settles a crash
  by ``resume``. A turn a crash cut is cut at the same event: what comes after its last
  durable event is refused, the session is reopened, and crash repair closes the turn as it
  closed the original.

No model is called and no recorded tool body runs. The replay is a session of its own (no
parent); ``agent-session diff`` compares it with the original. Not replayed: ``llm/retry``
events (a replay's model never fails) and approvals (no approval policy is installed, and a
turn still parked when the log ends is left out)."""

from __future__ import annotations

import contextlib
import logging
import uuid
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from agent_session.lineage.fork import opened_store
from agent_session.session.errors import (
    SessionForkError,
    SessionNotFoundError,
    SessionReplayError,
)
from agent_session.session.events.requests import request_points
from agent_session.session.events.types import (
    ASSISTANT_CHUNK,
    ASSISTANT_MESSAGE,
    END_SEED,
    INBOX_SPLICED,
    REQUEST_HEADER,
    STEP_START,
    TOOL_CALL,
    TOOL_RESULT,
    TURN_END,
    TURN_START,
    USER_MESSAGE,
)
from agent_session.session.json.lossless import thaw
from agent_session.session.live.hooks import SESSION_VALIDATE
from agent_session.session.persistence.service import SessionPersistence

__all__ = ["Replayed", "replay_session"]


@dataclass(frozen=True)
class Replayed:
    """A replay that was written."""

    id: str
    source: str
    answers: int
    """Model answers served from the log (no model was called)."""
    tool_bodies: int
    """Bodies of ``tools=`` that ran (recorded results served otherwise)."""


@dataclass
class _Turn:
    user: Mapping[str, Any] | None
    """Its user message (``None``: a turn that settles a crash)."""
    cut_at: int | None
    """The last durable event of a turn a crash cut."""
    header: Mapping[str, Any]
    reopened: bool = False
    """Whether the recorded process was restarted before it (a ``session/end-seed``)."""


class _Cut(Exception):
    """An append past the point where the recorded turn was cut."""


def _chunks(message: Mapping[str, Any], usage: Any) -> list[dict[str, Any]]:
    """The stream of a recorded answer that streamed nothing, block by block."""
    out: list[dict[str, Any]] = []
    calls = False
    for index, block in enumerate(message.get("content") or ()):
        kind = block.get("type")
        calls = calls or kind == "tool-call"
        start: dict[str, Any] = {"type": "block-start", "index": index, "blockType": kind}
        if kind == "tool-call":
            start.update(id=block.get("id"), name=block.get("name"))
        out += [start, {"type": "block-end", "index": index, "block": dict(block)}]
    if usage is not None:
        out.append({"type": "usage", "usage": usage})
    out.append({"type": "finish", "reason": {"kind": "tool-calls" if calls else "stop"}})
    return out


def _answers(events: Sequence[Any]) -> list[list[dict[str, Any]]]:
    """What each recorded request was answered with, in order."""
    answers: list[list[dict[str, Any]]] = []
    for (_, step), at, _, _ in request_points(events):
        chunks: list[dict[str, Any]] = []
        for event in events[at:]:
            data = event.data if isinstance(event.data, Mapping) else {}
            if event.type == ASSISTANT_CHUNK and data.get("step") == step:
                chunks.append(thaw(data["chunk"]))
            elif event.type == ASSISTANT_MESSAGE:
                if not chunks:
                    chunks = _chunks(thaw(data["message"]), thaw(data.get("usage")))
                break
        answers.append(chunks)
    return answers


def _turns(events: Sequence[Any]) -> list[_Turn]:
    """The recorded turns, each with the header in force when it ran."""
    from agent_session.recovery.closers import crash_point

    turns: list[_Turn] = []
    header: Mapping[str, Any] = {}
    current: _Turn | None = None
    reopened = False
    queued: Mapping[str, Any] | None = None  # (a message queued for the next turn)
    for index, event in enumerate(events):
        data = event.data if isinstance(event.data, Mapping) else {}
        if event.type == END_SEED:
            reopened = True
        elif event.type == INBOX_SPLICED and data.get("target") == "next-turn":
            if data.get("inserted"):
                queued = thaw(data["inserted"][0])
        elif event.type == REQUEST_HEADER:
            header = thaw(data["header"])
            if current is not None and not current.header:
                current.header = header
        elif event.type == TURN_START:
            current = _Turn(queued, None, header, reopened)
            turns.append(current)
            reopened, queued = False, None
        elif event.type == USER_MESSAGE and current is not None and current.user is None:
            current.user = thaw(data)
        elif event.type == TURN_END and current is not None:
            if data.get("reason", {}).get("kind") == "interrupted":
                current.cut_at = crash_point(events, index).seq
            current = None
    if current is not None:  # (an inspected log's cut turn has its closers: this one is
        turns.pop()  # parked, or still running, and not replayed)
    return turns


def _tools(
    events: Sequence[Any],
) -> tuple[dict[str, Any], dict[str, tuple[str, bool]], set[str]]:
    """The last recorded result of each call id, each tool's effect class as the log
    shows it (and whether a probe found a call of it), and the tools whose calls waited for
    the call before them: started only once it had its result, or, cut by a crash, not
    started although it had."""
    from agent_session.recovery import is_repair_result

    results: dict[str, Any] = {}
    effects: dict[str, tuple[str, bool]] = {}
    exclusive: set[str] = set()
    names: dict[str, str] = {}
    answered: set[str] = set()
    step_calls: list[str] = []
    asked: list[str] = []  # (the step's calls, in the model's order)
    for event in events:
        data = event.data if isinstance(event.data, Mapping) else {}
        if event.type == STEP_START:
            step_calls, answered, asked = [], set(), []
        elif event.type == ASSISTANT_MESSAGE:
            for block in (data.get("message") or {}).get("content") or ():
                if block.get("type") == "tool-call":
                    names[str(block.get("id"))] = str(block.get("name"))
                    asked.append(str(block.get("id")))
        elif event.type == TOOL_CALL:
            call, name = str(data.get("callId")), str(data.get("name"))
            names[call] = name
            if step_calls and step_calls[-1] in answered:
                exclusive.add(name)  # (it started only after the call before it ended)
            step_calls.append(call)
        elif event.type == TOOL_RESULT and is_repair_result(event):
            call = str(data["message"]["source"]["callId"])
            before = asked[asked.index(call) - 1] if call in asked[1:] else None
            if call not in step_calls and before in answered:  # (it waited, and never began)
                exclusive.add(names.get(call, ""))
        elif event.type == TOOL_RESULT:
            call = str(data["message"]["source"]["callId"])
            answered.add(call)
            results[call] = thaw(data)  # (a settled call's second result is its last)
            settled = (data.get("meta") or {}).get("settlement")
            if settled in ("re-run", "reconciled", "run-after-probe", "unknown"):
                kind = "idempotent" if settled == "re-run" else "unsafe"
                effects[names.get(call, "")] = (kind, settled == "reconciled")
    return results, effects, exclusive


async def replay_session(
    store: str | SessionPersistence,
    source: str,
    *,
    to: str | None = None,
    tools: Mapping[str, Callable[..., Any]] | None = None,
    system: str | None = None,
) -> Replayed:
    """Replay session ``source`` of ``store`` into a new session ``to`` (default
    ``<source>.replay-<8 hex digits>``) of the same store; see the module docstring.
    Raises ``SessionForkError`` (``SESSION_NOT_FOUND``, ``SESSION_ALREADY_EXISTS``) and
    ``SessionReplayError`` (``NOTHING_TO_REPLAY``, ``REPLAY_DIVERGED``)."""
    from agent_session.agent_loop import AgentRuntime, RequestSettings, ToolResult
    from agent_session.agent_loop.effects import Applied
    from agent_session.checkpoints import checkpoint_policy

    async with opened_store(store) as opened:
        try:
            events = list((await opened.inspect(source)).events)
        except SessionNotFoundError:
            raise SessionForkError(f'session "{source}" not found', "SESSION_NOT_FOUND") from None
        target = to if to is not None else f"{source}.replay-{uuid.uuid4().hex[:8]}"
        if await opened.storage.revision(target) is not None:
            raise SessionForkError(f'session "{target}" already exists', "SESSION_ALREADY_EXISTS")
        answers, turns = _answers(events), _turns(events)
        if not turns:
            raise SessionReplayError(
                f'session "{source}" has no turn to replay', "NOTHING_TO_REPLAY"
            )
        results, effects, exclusive = _tools(events)
        served = {"answers": 0, "bodies": 0}
        first = next((t.header for t in turns if t.header), {})
        config = dict(first.get("config") or {"provider": "replay", "model": "recorded"})
        provider, model = str(config.pop("provider")), str(config.pop("model"))
        defaults = frozenset((first.get("adapterDefaults") or {}).keys())

        cutting: dict[str, Any] = {}

        class Recorded:
            """The model: the recorded answers, in order."""

            def request_settings(self) -> RequestSettings:
                return RequestSettings(config, defaults)

            async def stream(self, request: Any) -> AsyncIterator[dict[str, Any]]:
                live = cutting.get("session")
                if live is not None and len(live.events) > cutting["at"]:
                    raise _Cut("the recorded request was cut before it was answered")
                if served["answers"] >= len(answers):
                    raise SessionReplayError(
                        f'the replay of "{source}" asked more than the {len(answers)} '
                        "requests its log answered",
                        "REPLAY_DIVERGED",
                    )
                chunks = answers[served["answers"]]
                served["answers"] += 1
                for chunk in chunks:
                    yield chunk

        def recorded(call_id: str) -> ToolResult:
            data = results.get(call_id)
            if data is None:
                return ToolResult.failure(f"the log has no result for call {call_id}")
            block = data["message"]["content"][0]
            meta = {k: v for k, v in (data.get("meta") or {}).items() if k != "settlement"}
            is_error = bool(block.get("isError", False))
            return ToolResult(block.get("content") or [], is_error, data.get("error"), meta or None)

        runtime = AgentRuntime()
        uninstall = runtime.install(opened)
        try:
            runtime.install(checkpoint_policy)
            runtime.models.register(provider, Recorded())
            offered = {str(t["name"]): t for turn in turns for t in turn.header.get("tools") or ()}
            for name, tool in offered.items():  # (every tool any recorded header offered)
                own = (tools or {}).get(name)

                async def body(args: Any, call: Any, own: Any = own) -> Any:
                    if own is not None:
                        served["bodies"] += 1
                        return await own(args, call)
                    return recorded(call.call_id)

                async def probe(call: Any) -> Any:
                    return Applied(recorded(call.call_id))

                effect, probed = effects.get(name, ("unsafe", False))
                schema = tool.get("parameters")  # (as recorded, {} included)
                runtime.tools.register(
                    name,
                    str(tool.get("description", "")),
                    schema if isinstance(schema, Mapping) else {"type": "object"},
                    body,
                    exclusive=name in exclusive,
                    effect=effect,  # type: ignore[arg-type]
                    reconcile=probe if probed else None,
                )
            await _run(runtime, target, turns, provider, model, system, cutting)
        finally:
            uninstall()
        return Replayed(target, source, served["answers"], served["bodies"])


async def _run(
    runtime: Any,
    target: str,
    turns: Sequence[_Turn],
    provider: str,
    model: str,
    system: str | None,
    cutting: dict[str, Any],
) -> None:
    """Run ``turns`` into session ``target``, cutting each crashed one where it was cut
    (``cutting`` says where, while it is being cut: the model asks it too). A cut session
    keeps refusing what a task of its turn may still append until the replay ends."""
    with contextlib.ExitStack() as refusals:
        session: Any = runtime.sessions.create(target)
        agent: Any = None
        for turn in turns:
            if turn.reopened and session is not None:  # (the recorded process was restarted)
                await runtime.sessions.dispose(session)
                session = None
            if session is None:  # (a new process: a new agent on the reopened log)
                session, agent = await runtime.sessions.resume(target), None
            prompt = system if system is not None else turn.header.get("system")
            if agent is None:  # (one agent as long as the recorded process lived)
                agent = runtime.agent(session, model=f"{provider}/{model}", system=prompt)
            agent.system = prompt
            cut = turn.cut_at
            if cut is not None:

                def refuse(live: Any, event: Any, cut: int = cut, cutting: Any = session) -> None:
                    if live is cutting and event.seq > cut:
                        raise _Cut(f"the recorded turn was cut after seq {cut}")

                refusals.callback(runtime.hooks.observe(SESSION_VALIDATE, refuse))
                cutting.update(session=session, at=cut)
            try:
                with _quiet(cut is not None):
                    if turn.user is None:
                        await agent.resume()
                    else:
                        await agent.run_turn(turn.user)
            except _Cut:
                pass
            except Exception as e:
                if cut is None or not _caused_by_cut(e):
                    raise
            if cut is not None:  # the crash: what was durable stays, the session is reopened
                cutting.clear()
                await runtime.sessions.flush(session)
                await runtime.sessions.dispose(session)
                session = None
        if session is not None:
            await runtime.sessions.flush(session)
            await runtime.sessions.dispose(session)


@contextlib.contextmanager
def _quiet(cutting: bool) -> Iterator[None]:
    """The loop's warning that a turn failed, left out while a turn is cut on purpose."""
    if not cutting:
        yield
        return
    loop_log = logging.getLogger("agent_loop")
    hushed = logging.Filter("agent_session.lineage")  # (passes none of the loop's records)
    loop_log.addFilter(hushed)
    try:
        yield
    finally:
        loop_log.removeFilter(hushed)


def _caused_by_cut(error: BaseException) -> bool:
    seen: BaseException | None = error
    while seen is not None:
        if isinstance(seen, _Cut):
            return True
        seen = seen.__cause__ or seen.__context__
    return False
