"""Claude Code (and Claude Agent SDK) transcripts and sessions, both ways (pure: no SDK
import, no I/O). A transcript is the JSON Lines file the CLI writes under
``~/.claude/projects/<project>/<session id>.jsonl``.

- :func:`read_transcript` salvages what a file holds, line by line: a torn last line (a
  crash mid-write) is dropped, a line that is not a JSON object is skipped, an entry whose
  ``uuid`` came earlier (a resume that wrote it again) is skipped; each is reported.
- :func:`append_transcript` appends the entries to a live session as the events a run would
  have written: a user's text opens a turn, the assistant entries of one API message (the
  CLI writes one per content block, sharing ``message.id``) become one ``assistant/message``
  with a ``tool/call`` per ``tool_use`` (recorded: the CLI writes a call before it runs it),
  and each ``tool_result`` a ``tool/result``. Every entry is kept verbatim on the event it
  became (under :data:`META`); entries that are not part of the conversation (summaries,
  system lines, sidechains ...) are kept as ``claude-code/entry`` events. What the SDK's
  users hit is repaired with the reference's closers, and reported: a call left without a
  result (an interrupted turn) is answered ``TOOL_OUTCOME_UNKNOWN`` before the next model
  message or user message, or at the end; a turn the model never answered is closed
  interrupted; a result for no open call, or a second one, is kept as an entry but not as a
  result.
- :func:`export_transcript` writes a session back as a transcript the SDK reads and resumes
  from: the kept entries verbatim, in log order, and entries made for the events that have
  none (a repair's results, a session this library's loop wrote); an entry whose parent is
  not the one before it in the file (a repair came in between) is linked to it, so the
  conversation is one chain.
"""

from __future__ import annotations

import json
import uuid as uuids
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Final

import orjson

from agent_session.integrations.turns import (
    close_stale,
    end_turn,
    next_step,
    open_turn,
    record_call,
    start_turn,
)
from agent_session.recovery.closers import closers
from agent_session.session.events.builders import (
    model_message,
    tool_call_block,
    tool_result_message,
    user_message,
)
from agent_session.session.events.event import SessionEvent
from agent_session.session.events.types import (
    ASSISTANT_MESSAGE,
    CLAUDE_ENTRY,
    TOOL_RESULT,
    USER_MESSAGE,
)
from agent_session.session.json.lossless import snapshot, thaw
from agent_session.session.live.session import Session

__all__ = ["META", "Salvaged", "append_transcript", "export_transcript", "read_transcript"]

META: Final = "claudeCode"
"""The key, on a message made from transcript entries, of ``{"entries": [...]}`` (the first
message made from an entry holds it; a second one from the same entry holds ``[]``)."""
PROVIDER: Final = "anthropic"


class Salvaged:
    """What a transcript file held: its entries (each with its line number) and what was
    done to the rest, one line each."""

    def __init__(self) -> None:
        self.entries: list[tuple[int, dict[str, Any]]] = []
        self.report: list[str] = []


def read_transcript(data: bytes) -> Salvaged:
    """The entries of the transcript ``data`` (see the module docstring); never raises for
    what a line holds."""
    out = Salvaged()
    seen: dict[str, int] = {}
    lines = data.split(b"\n")
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        last = number == len(lines)  # (no newline after it)
        try:
            entry = orjson.loads(line)
            if not isinstance(entry, dict) or not isinstance(entry.get("type"), str):
                raise ValueError("not a transcript entry (an object with a type)")
            entry = thaw(snapshot(entry, f"line {number}"))
        except (ValueError, TypeError) as e:
            if last:
                out.report.append(f"line {number}: torn (the file ends inside it): dropped")
            else:
                out.report.append(f"line {number}: not a transcript entry ({e}): skipped")
            continue
        key = entry.get("uuid")
        if isinstance(key, str) and key in seen:
            out.report.append(f"line {number}: a second copy of line {seen[key]}: skipped")
            continue
        if isinstance(key, str):
            seen[key] = number
        out.entries.append((number, entry))
    return out


def _conversational(entry: Mapping[str, Any]) -> bool:
    return (
        entry.get("type") in ("user", "assistant")
        and isinstance(entry.get("message"), Mapping)
        and not entry.get("isSidechain")
        and not entry.get("isMeta")
    )


def _blocks(entry: Mapping[str, Any]) -> list[Any]:
    content = entry["message"].get("content")
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return list(content) if isinstance(content, list) else []


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    parts = []
    for block in content if isinstance(content, list) else ():
        if isinstance(block, Mapping) and block.get("type") == "text":
            parts.append(str(block.get("text", "")))
        elif isinstance(block, Mapping):
            parts.append(f"[{block.get('type')}]")
    return "\n".join(parts)


def _groups(entries: Sequence[tuple[int, dict[str, Any]]]) -> Iterator[list[tuple[int, Any]]]:
    """The entries, consecutive assistant entries of one API message together."""
    group: list[tuple[int, Any]] = []
    for item in entries:
        entry = item[1]
        message_id = entry["message"].get("id") if _conversational(entry) else None
        if (
            group
            and entry.get("type") == "assistant"
            and message_id is not None
            and group[0][1].get("type") == "assistant"
            and group[0][1]["message"].get("id") == message_id
            and _conversational(entry)
        ):
            group.append(item)
            continue
        if group:
            yield group
        group = [item]
    if group:
        yield group


def _answer_open_calls(session: Session, where: str, report: list[str]) -> None:
    """Answer the open step's calls that have no result with the reference's closers (its
    results only: the turn goes on)."""
    turn = open_turn(session.events)
    if turn is None or not turn.unanswered:
        return
    for event in closers(session.events[turn.start :]):
        if event.type == TOOL_RESULT:
            session.append(
                event.type,
                thaw(event.data),
                surface_op=event.surface_op,
                source_event_seqs=event.source_event_seqs,
            )
            call = event.data["message"]["source"]["callId"]
            report.append(f"{where}: call {call} had no result: answered {_code(event)}")


def _code(event: SessionEvent) -> str:
    return str((event.data.get("error") or {}).get("code"))


def _close(session: Session, where: str, report: list[str]) -> None:
    """Close the open turn: ended when the model answered it and every call was answered,
    else by the closers (interrupted)."""
    turn = open_turn(session.events)
    if turn is None:
        return
    if turn.answered_any and not turn.unanswered:
        end_turn(session, turn)
        return
    if not turn.answered_any:
        report.append(f"{where}: turn {turn.number} has no model answer: closed interrupted")
    for event in closers(session.events[turn.start :]):
        if event.type == TOOL_RESULT:
            call = event.data["message"]["source"]["callId"]
            report.append(f"{where}: call {call} had no result: answered {_code(event)}")
    close_stale(session, turn)


def append_transcript(session: Session, salvaged: Salvaged) -> list[str]:
    """Append the salvaged entries to the live ``session``; what was repaired, one line
    each (after :attr:`Salvaged.report`'s)."""
    report = list(salvaged.report)
    for group in _groups(salvaged.entries):
        number, entry = group[0]
        where = f"line {number}"
        if not _conversational(entry):
            session.append(CLAUDE_ENTRY, {"entry": entry})
        elif entry["type"] == "assistant":
            _assistant(session, group, where, report)
        elif any(isinstance(b, Mapping) and b.get("type") == "tool_result" for b in _blocks(entry)):
            _results(session, entry, where, report)
        else:
            _close(session, where, report)
            start_turn(session)
            data = user_message(_text(entry["message"].get("content")))
            data[META] = {"entries": [entry]}
            session.append(USER_MESSAGE, data, surface_op="append")
    _close(session, "end of file", report)
    return report


def _assistant(
    session: Session, group: list[tuple[int, Any]], where: str, report: list[str]
) -> None:
    _answer_open_calls(session, where, report)
    blocks: list[dict[str, Any]] = []
    for _, entry in group:
        for block in _blocks(entry):
            kind = block.get("type") if isinstance(block, Mapping) else None
            if kind == "text":
                blocks.append({"type": "text", "text": str(block.get("text", ""))})
            elif kind == "thinking":
                blocks.append({"type": "reasoning", "text": str(block.get("thinking", ""))})
            elif kind == "tool_use":
                call, name = block.get("id"), block.get("name")
                if not (isinstance(call, str) and call and isinstance(name, str) and name):
                    report.append(f"{where}: a tool_use without an id or a name: dropped")
                    continue
                arguments = json.dumps(block.get("input") or {}, ensure_ascii=False)
                blocks.append(tool_call_block(call, name, arguments))
    turn = next_step(session, open_turn(session.events))
    first = group[0][1]["message"]
    reply = model_message(blocks, provider=PROVIDER, model=str(first.get("model") or "unknown"))
    reply[META] = {"entries": [entry for _, entry in group]}
    data: dict[str, Any] = {"turn": turn.number, "step": turn.last_step, "message": reply}
    session.append(ASSISTANT_MESSAGE, data, surface_op="append", source_event_seqs=[])
    asked = open_turn(session.events)
    assert asked is not None
    for call in [b["id"] for b in blocks if b["type"] == "tool-call"]:
        record_call(session, asked, call)  # (the CLI writes a call before it runs it)


def _results(session: Session, entry: dict[str, Any], where: str, report: list[str]) -> None:
    turn = open_turn(session.events)
    kept: list[Any] = [entry]
    answered_any = False
    for block in _blocks(entry):
        if not (isinstance(block, Mapping) and block.get("type") == "tool_result"):
            continue
        call = block.get("tool_use_id")
        if turn is None or call not in turn.calls or call in turn.answered:
            why = "a second result for" if turn and call in turn.answered else "a result for no"
            report.append(f"{where}: {why} open call {call}: kept as an entry only")
            continue
        content = [{"type": "text", "text": _text(block.get("content"))}]
        result = tool_result_message(call, content, is_error=bool(block.get("is_error")))
        result[META] = {"entries": kept}
        kept = []
        seq = record_call(session, turn, call)
        data: dict[str, Any] = {"turn": turn.number, "step": turn.calls[call][0]}
        data["message"] = result
        session.append(TOOL_RESULT, data, surface_op="append", source_event_seqs=[seq])
        turn.answered.add(call)
        answered_any = True
    if not answered_any:
        session.append(CLAUDE_ENTRY, {"entry": entry})


# --- export --------------------------------------------------------------------------------


def _made(session_id: str, seq: int) -> str:
    return str(uuids.uuid5(uuids.NAMESPACE_URL, f"agent-session:{session_id}#{seq}"))


def _moment(ms: int) -> str:
    import datetime

    moment = datetime.datetime.fromtimestamp(ms / 1000, datetime.UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def _entry_for(event: SessionEvent, session_id: str, claude_id: str) -> dict[str, Any] | None:
    """The transcript entry made for an event that keeps none."""
    base = {
        "uuid": _made(session_id, event.seq),
        "sessionId": claude_id,
        "timestamp": _moment(event.time),
        "isSidechain": False,
        "userType": "external",
    }
    data = event.data
    if event.type == USER_MESSAGE:
        text = _text(thaw(data.get("content")))
        return {**base, "type": "user", "message": {"role": "user", "content": text}}
    if event.type == ASSISTANT_MESSAGE:
        message = data["message"]
        content: list[dict[str, Any]] = []
        for block in message.get("content", ()):
            if block.get("type") == "text":
                content.append({"type": "text", "text": block.get("text", "")})
            elif block.get("type") == "reasoning":
                content.append({"type": "thinking", "thinking": block.get("text", "")})
            elif block.get("type") == "tool-call":
                args = json.loads(block["arguments"] or "{}")
                content.append(
                    {"type": "tool_use", "id": block["id"], "name": block["name"], "input": args}
                )
        model = message.get("source", {}).get("model", "unknown")
        body = {"id": message.get("id"), "type": "message", "role": "assistant", "model": model}
        return {**base, "type": "assistant", "message": {**body, "content": content}}
    if event.type == TOOL_RESULT:
        block = data["message"]["content"][0]
        answer = {
            "type": "tool_result",
            "tool_use_id": block["toolCallId"],
            "content": _text(thaw(block.get("content"))),
            "is_error": bool(block.get("isError")),
        }
        return {**base, "type": "user", "message": {"role": "user", "content": [answer]}}
    return None


def _kept(event: SessionEvent) -> list[Any] | None:
    """The entries an event keeps (``None``: it keeps none and needs one made)."""
    if event.type == CLAUDE_ENTRY:
        return [event.data["entry"]]
    holder = event.data.get("message") if event.type != USER_MESSAGE else event.data
    meta = holder.get(META) if isinstance(holder, Mapping) else None
    return list(meta["entries"]) if isinstance(meta, Mapping) else None


def export_transcript(session_id: str, events: Sequence[SessionEvent]) -> bytes:
    """The transcript of a session's ``events`` (see the module docstring): JSON Lines."""
    kept_ids: list[str] = [
        e["sessionId"]
        for event in events
        for e in (_kept(event) or [])
        if isinstance(e, Mapping) and isinstance(e.get("sessionId"), str)
    ]
    claude_id = kept_ids[0] if kept_ids else str(uuids.uuid5(uuids.NAMESPACE_URL, session_id))
    lines: list[bytes] = []
    last: str | None = None
    made_since = False
    for event in events:
        entries = _kept(event)
        if entries is None:
            made = _entry_for(event, session_id, claude_id)
            if made is None:
                continue
            entries, made_since = [{**made, "parentUuid": last}], True
        else:
            entries = [thaw(e) for e in entries]
            for entry in entries:
                if made_since and "uuid" in entry:
                    entry["parentUuid"] = last
                    made_since = False
        for entry in entries:
            lines.append(orjson.dumps(entry))
            if isinstance(entry.get("uuid"), str):
                last = entry["uuid"]
    return b"".join(line + b"\n" for line in lines)
