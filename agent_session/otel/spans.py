"""A session's log as OpenTelemetry spans in the GenAI semantic conventions (their latest
experimental version, what ``OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental``
selects), without importing OpenTelemetry: plain :class:`SpanRecord` values that
:mod:`agent_session.otel.export` hands to the SDK's OTLP exporter.

One trace per turn: an ``invoke_agent`` span from ``turn/start`` to ``turn/end``, with a
``chat {model}`` span per model request of each step and an ``execute_tool {name}`` span per
call, from ``tool/call`` to its ``tool/result``. A settlement step, which makes no request
(a resumed turn settles the calls a crash cut), is an ``agent_session.settlement`` event on the
turn's span, never a ``chat`` span; its calls' spans say how each was settled. A turn a crash
cut (``turn/end`` with reason ``interrupted``, from a durable repair or the in-memory one of
an inspection) ends at its last durable event with status ERROR, and its repaired calls
carry ``error.type`` ``TOOL_OUTCOME_UNKNOWN`` or ``TOOL_NOT_STARTED``: the trace of a run whose
process died. A compaction between turns is a trace of its own
(:mod:`agent_session.otel.compaction_spans`).

Guarantees: the ids are derived from (session id, incarnation, seq) alone, so exporting a turn
again gives every span the same ids (receivers dedupe what is re-sent), and a fork or a copy
(another id or incarnation) never collides with its source; every span ends at or after its
start (a clock that went back is clamped, and the span says so in
``agent_session.time_clamped``); message content is left out unless asked for.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from agent_session.otel.attribution import (
    agent_name,
    context_after,
    cost_attributes,
    json_text,
    put_scalar,
    request_attributes,
    scalars,
)
from agent_session.otel.compaction_spans import compaction_span_parts
from agent_session.otel.genai_messages import (
    FINISH_REASONS,
    input_messages,
    output_messages,
    system_instructions,
)
from agent_session.otel.ids import span_id, trace_id
from agent_session.recovery import (
    TOOL_NOT_STARTED,
    TOOL_OUTCOME_UNKNOWN,
    crash_point,
    is_repair_result,
)
from agent_session.session.events.compaction import boundary_of
from agent_session.session.events.outcomes import SETTLEMENT
from agent_session.session.events.requests import (
    LoggedRequest,
    logged_requests,
    recorded_again,
)

if TYPE_CHECKING:
    from agent_session.see.prices import PriceTable

__all__ = ["Content", "SpanRecord", "TurnTrace", "is_error_result", "trace_id", "turn_traces"]

Content = Literal["off", "refs", "full"]
"""What of the messages goes on the spans: nothing (the conventions' default), references
``session#seq`` to the events that hold them, or the messages themselves (redacted)."""

_REPAIRED = (TOOL_OUTCOME_UNKNOWN, TOOL_NOT_STARTED)
_USAGE = {
    "cacheReadTokens": "gen_ai.usage.cache_read.input_tokens",
    "cacheWriteTokens": "gen_ai.usage.cache_creation.input_tokens",
    "reasoningTokens": "gen_ai.usage.reasoning.output_tokens",
}


_Ids = tuple[str, int, int, int]
"""What a turn's child spans are identified by: session id, incarnation, trace id, root id."""


@dataclass(frozen=True)
class SpanRecord:
    """One span, ready for an exporter: ids as integers, times in Unix nanoseconds."""

    trace_id: int
    span_id: int
    parent_id: int | None
    name: str
    kind: Literal["INTERNAL", "CLIENT"]
    start_ns: int
    end_ns: int
    attributes: dict[str, Any]
    error: str | None = None
    """The status description of a span with status ERROR; ``None``: status unset."""
    events: list[tuple[str, int, dict[str, Any]]] = field(default_factory=list)
    links: list[tuple[int, int, dict[str, Any]]] = field(default_factory=list)


@dataclass(frozen=True)
class TurnTrace:
    """A closed turn's spans (the ``invoke_agent`` span first) and the seq of its
    ``turn/end``, which an export cursor advances to once a receiver took them."""

    turn: int
    end_seq: int
    spans: list[SpanRecord]


def is_error_result(data: Any) -> bool:
    """Whether a ``tool/result``'s data answers with an error (a result block says so)."""
    blocks: Any = _map(_map(data).get("message")).get("content")
    return _seq(blocks) and any(_map(block).get("isError") is True for block in blocks)


def turn_traces(
    session_id: str,
    incarnation: int,
    events: Sequence[Any],
    *,
    after_seq: int = -1,
    content: Content = "off",
    redact: Callable[[str], str] = lambda text: text,
    parent: tuple[str, int, int] | None = None,
    prices: PriceTable | None = None,
) -> list[TurnTrace]:
    """The traces of the closed turns whose ``turn/end`` comes after ``after_seq``.

    ``events`` is a loaded log (a repaired or inspected one: an open turn has no trace yet);
    ``incarnation`` tells apart two sessions that had one id (the header's ``createdAt``).
    ``parent``, for a fork, is (parent id, its incarnation, seq of the parent's turn/start the
    fork continues): the first trace returned links to that turn (pass it only while the
    fork's own first turn is not yet sent). ``redact`` sees every text that ``content="full"``
    puts on a span; with ``prices``, each request's cost is on its span."""
    traces: list[TurnTrace] = []
    sent = {(r.turn, r.step): r for r in logged_requests(events)} if content == "full" else {}
    turn: list[Any] = []
    context: Mapping[str, Any] = {}  # the request context in force (written when it changes)
    before: Mapping[str, Any] = {}
    for event in events:
        context = context_after(context, event)
        boundary = None if turn or event.seq <= after_seq else boundary_of(event)
        if boundary is not None:  # (between turns: a trace of its own)
            span = SpanRecord(**compaction_span_parts(session_id, incarnation, events, boundary))
            traces.append(TurnTrace(boundary.turn or 0, event.seq, [span]))
        elif event.type == "turn/start":
            turn, before = [event], context
        elif turn:
            turn.append(event)
            if event.type == "turn/end":
                if event.seq > after_seq:
                    link = parent if not traces else None
                    traces.append(
                        _turn(
                            (session_id, incarnation),
                            turn,
                            before,
                            (content, redact, prices),
                            link,
                            sent,
                        )
                    )
                turn = []
    return traces


def _turn(
    session: tuple[str, int],
    events: list[Any],
    context: Mapping[str, Any],
    shown: tuple[Content, Callable[[str], str], PriceTable | None],
    parent: tuple[str, int, int] | None,
    sent: Mapping[tuple[Any, Any], LoggedRequest],
) -> TurnTrace:
    (session_id, incarnation), (content, redact, _) = session, shown
    start, end = events[0], events[-1]
    trace = trace_id(session_id, incarnation, start.seq)
    root = span_id(session_id, incarnation, "turn", start.seq)
    ids = (session_id, incarnation, trace, root)
    reason = _map(end.data.get("reason")).get("kind", "completed")
    interrupted = reason == "interrupted"
    crash = crash_point(events, len(events) - 1) if interrupted else end
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.conversation.id": session_id,
        "agent_session.turn": start.data.get("turn"),
        "agent_session.turn.end_reason": reason,
        "agent_session.seq.first": start.seq,
        "agent_session.seq.last": end.seq,
    }
    put_scalar(attributes, "gen_ai.agent.name", agent_name(events))
    error = None
    if reason != "completed":
        attributes["error.type"] = reason
        error = (
            f"the process died; the turn was cut after seq {crash.seq}"
            if interrupted
            else f"the turn ended {reason}"
        )
    spans: list[SpanRecord] = []
    turn_events: list[tuple[str, int, dict[str, Any]]] = []
    steps: dict[Any, list[Any]] = {}
    contexts: dict[Any, Mapping[str, Any]] = {}
    calls: dict[str, Any] = {}
    step: Any = None
    for event in events[1:-1]:
        data = _map(event.data)
        context = context_after(context, event)
        if event.type == "step/start":
            step = data.get("step")
        if step is not None:
            contexts[step] = context
        if step is not None and event.type not in ("tool/call", "tool/result"):
            steps.setdefault(step, []).append(event)
        if event.type == "step/end":
            step = None
        elif event.type == "tool/call":
            calls[str(data.get("callId"))] = event
        elif event.type == "tool/result":
            source = _map(_map(data.get("message")).get("source"))
            call = calls.pop(str(source.get("callId")), None)
            spans.append(_tool(ids, call, event, content, redact))
        elif event.type in ("approval/asked", "approval/decided"):
            turn_events.append((event.type, _ns(event.time), scalars(data, "agent_session")))
    for call in calls.values():  # (never after a repair: every call has its result)
        spans.append(_tool(ids, call, None, content, redact))
    for key, step_events in steps.items():
        settled = _settlement(step_events)
        if settled is not None:  # (no request was made: the turn says what it settled)
            turn_events.append(settled)
            continue
        request = sent.get((start.data.get("turn"), key))
        chat = _chat(ids, step_events, contexts[key], crash, shown, request)
        if chat is not None:
            spans.append(chat)
    links: list[tuple[int, int, dict[str, Any]]] = []
    if parent is not None:
        parent_id, parent_incarnation, parent_seq = parent
        parent_root = span_id(parent_id, parent_incarnation, "turn", parent_seq)
        links.append((trace_id(*parent), parent_root, {}))
    turn_span = SpanRecord(
        trace_id=trace,
        span_id=root,
        parent_id=None,
        name="invoke_agent",
        kind="INTERNAL",
        start_ns=_ns(start.time),
        end_ns=_ended(start.time, crash.time, attributes),
        attributes=attributes,
        error=error,
        events=sorted(turn_events, key=lambda event: event[1]),
        links=links,
    )
    return TurnTrace(
        start.data.get("turn"),
        end.seq,
        [turn_span, *sorted(spans, key=lambda s: (s.start_ns, s.span_id))],
    )


def _settlement(events: list[Any]) -> tuple[str, int, dict[str, Any]] | None:
    """A settlement step (it records the cut answer again and settles its calls, with no
    model request) as an event for its turn's span; ``None`` for a step that asked."""
    first = next((e for e in events if e.type in ("assistant/chunk", "assistant/message")), None)
    if first is None or not recorded_again(first):
        return None
    answer, replaced = first, first.surface_op
    said = {"step": _map(answer.data).get("step"), "seq": answer.seq}
    said["settlement.replaces"] = f"{replaced.start}-{replaced.end}"
    return "agent_session.settlement", _ns(answer.time), scalars(said, "agent_session")


def _chat(
    ids: _Ids,
    events: list[Any],
    request: Mapping[str, Any],
    crash: Any,
    shown: tuple[Content, Callable[[str], str], PriceTable | None],
    sent: LoggedRequest | None = None,
) -> SpanRecord | None:
    """The model request of a step, under the request context in force (``request``): from
    its ``step/start`` to its ``assistant/message``; cut by a crash, it ends there with status
    ERROR. With ``content="full"``, what was sent (``sent``, read back from the log) and
    what came back, in the conventions' message shape."""
    content, redact, prices = shown
    start = next((e for e in events if e.type == "step/start"), None)
    if start is None:
        return None
    answer = next((e for e in events if e.type == "assistant/message"), None)
    chunks = [e for e in events if e.type == "assistant/chunk"]
    model = request.get("model")
    finished: str | None = None  # (the conventions' name for how it ended)
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": "chat",
        "agent_session.step": _map(start.data).get("step"),
        "agent_session.seq.first": start.seq,
    }
    put_scalar(attributes, "gen_ai.provider.name", request.get("provider"))
    put_scalar(attributes, "gen_ai.request.model", model)
    attributes.update(request_attributes(request.get("config")))
    for chunk in (_map(_map(e.data).get("chunk")) for e in chunks):
        if chunk.get("type") == "usage":
            usage = _map(chunk.get("usage"))
            put_scalar(attributes, "gen_ai.usage.input_tokens", usage.get("inputTokens"))
            put_scalar(attributes, "gen_ai.usage.output_tokens", usage.get("outputTokens"))
            for key, name in _USAGE.items():  # the reference's TokenUsage, optional fields
                put_scalar(attributes, name, usage.get(key))
            attributes.update(cost_attributes(prices, model, usage))
        elif chunk.get("type") == "finish":
            kind = _map(chunk.get("reason")).get("kind")
            if isinstance(kind, str):
                finished = FINISH_REASONS.get(kind, kind)
                attributes["gen_ai.response.finish_reasons"] = [finished]
    if chunks:
        first = max(0, chunks[0].time - start.time)
        attributes["gen_ai.response.time_to_first_chunk"] = first / 1000
    end = answer if answer is not None else crash
    error = None
    if answer is None:
        attributes["error.type"] = "interrupted"
        error = f"no answer: the process died after seq {crash.seq}"
    else:
        message = _map(_map(answer.data).get("message"))
        if agent_name([answer]) is None:  # (an ADK answer names its agent, not its model)
            put_scalar(
                attributes, "gen_ai.response.model", _map(message.get("source")).get("model")
            )
        # (what the provider said of its response, as the adapters keep it: its id, and its
        # own name for why it ended; the log's message id is the log's, not the provider's)
        said = _map(_map(_map(message.get("source")).get("replayState")).get("response"))
        put_scalar(attributes, "gen_ai.response.id", said.get("id"))
        if isinstance(said.get("finishReason"), str):
            attributes["gen_ai.response.finish_reasons"] = [said["finishReason"]]
        put_scalar(attributes, "agent_session.message.id", message.get("id"))
        attributes["agent_session.seq.last"] = answer.seq
        if content == "refs":
            attributes["agent_session.cli.output.ref"] = f"{ids[0]}#{answer.seq}"
        elif content == "full":
            attributes["gen_ai.output.messages"] = redact(output_messages(message, finished))
    if content == "full" and sent is not None:
        attributes["gen_ai.input.messages"] = redact(input_messages(sent.messages))
        if sent.system:
            attributes["gen_ai.system_instructions"] = redact(system_instructions(sent.system))
        if sent.tools:
            attributes["gen_ai.tool.definitions"] = redact(json_text(list(sent.tools)))
    name = f"chat {model}" if isinstance(model, str) and model else "chat"
    return _child(ids, "chat", name, "CLIENT", start, end, attributes, error)


def _tool(
    ids: _Ids,
    call: Any,
    result: Any,
    content: Content,
    redact: Callable[[str], str],
) -> SpanRecord:
    """A tool's execution, from its ``tool/call`` to its ``tool/result`` (a result without
    its call, which a log cannot hold, would be a span of no time at the result)."""
    first = call if call is not None else result
    data = _map(call.data if call is not None else None)
    name = data.get("name")
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.type": "function",
        "agent_session.seq.first": first.seq,
    }
    put_scalar(attributes, "gen_ai.tool.name", name)
    error = None
    span_events: list[tuple[str, int, dict[str, Any]]] = []
    if result is not None:
        outcome = _map(result.data)
        message = _map(outcome.get("message"))
        call_id = _map(message.get("source")).get("callId")
        put_scalar(attributes, "gen_ai.tool.call.id", call_id)
        attributes["agent_session.seq.last"] = result.seq
        code = _map(outcome.get("error")).get("code")
        if is_repair_result(result) and code in _REPAIRED:
            attributes["error.type"] = code
            error = f"{code}: the process died while the call was in flight"
        elif is_error_result(outcome) or code is not None:
            attributes["error.type"] = code if isinstance(code, str) else "tool_error"
            error = "the tool returned an error"
        how = _map(outcome.get("meta")).get(SETTLEMENT)
        if isinstance(how, str):
            span_events.append(("agent_session.settled", _ns(result.time), {"how": how}))
        if content == "refs":
            attributes["agent_session.cli.output.ref"] = f"{ids[0]}#{result.seq}"
        elif content == "full":
            attributes["gen_ai.tool.call.result"] = redact(json_text(message.get("content")))
    else:
        put_scalar(attributes, "gen_ai.tool.call.id", data.get("callId"))
    if content == "refs" and call is not None:
        attributes["agent_session.input.ref"] = f"{ids[0]}#{call.seq}"
    elif content == "full" and isinstance(data.get("arguments"), str):
        attributes["gen_ai.tool.call.arguments"] = redact(data["arguments"])
    end = result if result is not None else first
    span_name = f"execute_tool {name}" if isinstance(name, str) and name else "execute_tool"
    return _child(ids, "tool", span_name, "INTERNAL", first, end, attributes, error, span_events)


def _child(
    ids: _Ids,
    role: str,
    name: str,
    kind: Literal["INTERNAL", "CLIENT"],
    first: Any,
    last: Any,
    attributes: dict[str, Any],
    error: str | None,
    events: list[tuple[str, int, dict[str, Any]]] | None = None,
) -> SpanRecord:
    """A span under the turn's root (``ids``: session, incarnation, trace, root), from the
    event ``first`` to the event ``last``, its id from ``role`` and ``first``'s seq."""
    session_id, incarnation, trace, root = ids
    return SpanRecord(
        trace_id=trace,
        span_id=span_id(session_id, incarnation, role, first.seq),
        parent_id=root,
        name=name,
        kind=kind,
        start_ns=_ns(first.time),
        end_ns=_ended(first.time, last.time, attributes),
        attributes=attributes,
        error=error,
        events=events or [],
    )


def _ended(start_ms: int, end_ms: int, attributes: dict[str, Any]) -> int:
    """The end in nanoseconds, never before the start (a clamp is recorded)."""
    if end_ms < start_ms:
        attributes["agent_session.time_clamped"] = True
        return _ns(start_ms)
    return _ns(end_ms)


def _ns(ms: int) -> int:
    return int(ms) * 1_000_000


def _map(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _seq(value: Any) -> bool:
    return isinstance(value, Sequence) and not isinstance(value, str)
