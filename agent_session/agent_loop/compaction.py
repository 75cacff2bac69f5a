"""Compaction that keeps history: a summary replaces what the model sees, and nothing of the
log is removed.

Between two turns, when a :class:`CompactionPolicy` says so (the last request's size over a
threshold) or when asked (``agent.compact()``), the loop has the summary written (by the
agent's own model, or by a function of yours) and records, in one flush, the reference's
``compaction/start``, ``compaction/summary``, the summary as a ``user/message`` whose
surface op replaces every node the model saw (citing them all), ``context/compacted`` (what
triggered it, the estimated sizes before and after, the summarizer's usage) and
``compaction/end``.

Guarantees: every event before the boundary stays in the log, unchanged, and readers that
want the whole history (exports, ``show``, ``stats``, ``view``, traces) still read it; the
model's next request holds the summary and what follows it; a resume reads the log from the
boundary on (``session.persistence.window``); a crash before the flush leaves the log as it
was before the compaction; a torn write (a power loss on a JSONL log) may keep a prefix of
its events, which loads: the summary, if kept, is what the model sees, and with no
``context/compacted`` there is no boundary, so a resume reads the whole log.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Literal

from agent_session.agent_loop.assembler import RETRY_CHUNKS, Assembler
from agent_session.agent_loop.models import LlmError, ModelRequest
from agent_session.agent_loop.spending import fold_of
from agent_session.session.errors import SessionOpenTurnError
from agent_session.session.events.compaction import is_summary, latest_of
from agent_session.session.events.surface import SurfaceReplace
from agent_session.session.events.turns import brackets
from agent_session.session.events.types import (
    ASSISTANT_MESSAGE,
    COMPACTION_END,
    COMPACTION_START,
    COMPACTION_SUMMARY,
    CONTEXT_COMPACTED,
    REQUEST_HEADER,
    USER_MESSAGE,
)
from agent_session.session.json.codec import encode_json
from agent_session.session.json.lossless import snapshot

if TYPE_CHECKING:
    from agent_session.agent_loop.loop import Agent

__all__ = [
    "SUMMARY_PREFIX",
    "Compacted",
    "CompactionPolicy",
    "ModelSummary",
    "Summarizer",
    "compact",
    "estimate_tokens",
    "last_request_tokens",
]

Summarizer = Callable[[Sequence[Any]], Awaitable[str]]
"""``async (messages) -> summary text``: writes the summary of the history the model saw."""

DEFAULT_INSTRUCTIONS: Final = (
    "Summarize the conversation so far for yourself, to continue it without the full "
    "history: the user's goal and constraints, decisions made, facts learned (file names, "
    "ids, values), tool calls made and their outcomes, and what remains to do. Be complete "
    "and concrete; write only the summary."
)
SUMMARY_PREFIX: Final = "[Summary of the conversation so far]\n"
"""What the summary message starts with, so the model reads it as a summary."""


@dataclass(frozen=True, slots=True)
class CompactionPolicy:
    """When the loop compacts a session, and who writes the summary."""

    threshold_tokens: int | None = None
    """Compact before a turn when the last request and its answer held more tokens than
    this (as the provider counted them; estimated from the text when it did not say).
    ``None``: only when asked."""
    summarize: Summarizer | None = None
    """Writes the summary; by default the agent's own model is asked (``instructions``)."""
    instructions: str = DEFAULT_INSTRUCTIONS
    """The system prompt of the summary request the agent's model gets."""

    def __post_init__(self) -> None:
        if self.threshold_tokens is not None and (
            type(self.threshold_tokens) is not int or self.threshold_tokens < 1
        ):
            raise ValueError(
                f"threshold_tokens must be a positive integer, got {self.threshold_tokens!r}"
            )


@dataclass(frozen=True, slots=True)
class Compacted:
    """What one compaction did."""

    start: int
    """The seq of its ``compaction/start`` (where a resume starts reading)."""
    summary: int
    """The seq of the summary ``user/message``."""
    shadowed: int
    """How many surface nodes the summary replaced."""
    tokens_before: int
    """The estimated size of the history it replaced (tokens)."""
    tokens_after: int
    """The estimated size of the summary (tokens)."""


def estimate_tokens(messages: Sequence[Any]) -> int:
    """A rough token count of ``messages``: a quarter of their JSON's length."""
    return (len(encode_json(snapshot(list(messages)))) + 3) // 4


def last_request_tokens(events: Sequence[Any]) -> int | None:
    """The tokens the last model request and its answer held as the provider counted them
    (``inputTokens`` + ``outputTokens`` of the last answer since the last boundary);
    ``None`` when no answer says."""
    answer, _ = latest_of(events, ASSISTANT_MESSAGE)
    usage = answer.data.get("usage") if answer is not None else None
    if not isinstance(usage, Mapping):
        return None
    counts = [usage.get("inputTokens"), usage.get("outputTokens")]
    return sum(c for c in counts if type(c) is int) or None


def due(agent: Agent, policy: CompactionPolicy) -> bool:
    """Whether ``policy`` asks for a compaction of ``agent``'s session now."""
    if policy.threshold_tokens is None:
        return False
    events = agent.session.events
    size = last_request_tokens(events)
    if size is None:
        size = estimate_tokens(agent.session.derive_messages())
    return size > policy.threshold_tokens


async def compact(
    agent: Agent,
    policy: CompactionPolicy,
    trigger: Literal["threshold", "explicit"] = "explicit",
) -> Compacted | None:
    """Replace what the model sees of ``agent``'s session with a summary (see the module);
    ``None`` when there is nothing to compact (no history, or only a summary).

    Raises:
        SessionOpenTurnError: The session's last turn is open (compaction is between turns).
        LlmError: The summary request failed; nothing is written.
    """
    session = agent.session
    events = session.events
    if brackets(events).open_turn is not None:
        raise SessionOpenTurnError(
            f'cannot compact session "{session.id}" while its turn is open: compact between turns'
        )
    nodes = list(session.surface.nodes)
    if not nodes or (len(nodes) == 1 and is_summary(session.event_at(nodes[0]))):
        return None
    messages = session.derive_messages()
    own = None if policy.summarize is not None else ModelSummary(agent, policy.instructions)
    summarize = policy.summarize or own
    assert summarize is not None
    text = await summarize(messages)
    if list(session.surface.nodes) != nodes or brackets(session.events).open_turn is not None:
        raise SessionOpenTurnError(
            f'session "{session.id}" changed while its summary was being written: '
            "nothing is compacted"
        )
    if not isinstance(text, str) or not text.strip():
        raise ValueError("the summarizer returned no summary text: nothing is compacted")
    message = _plugin_message(SUMMARY_PREFIX + text)
    before, after = estimate_tokens(messages), estimate_tokens([message])
    turn = brackets(events).start_number
    header, boundary = latest_of(events, REQUEST_HEADER)
    requested = header is not None or (boundary is not None and boundary.requested)
    budgeted = fold_of(agent, session).budget is not None or (
        boundary is not None and boundary.budgeted
    )
    start = session.append(COMPACTION_START, {}).seq
    session.append(COMPACTION_SUMMARY, {})
    op = SurfaceReplace(start=nodes[0], end=nodes[-1])
    summary = session.append(USER_MESSAGE, message, surface_op=op, source_event_seqs=nodes).seq
    facts: dict[str, Any] = {
        "start": start,
        "summary": summary,
        "trigger": trigger,
        "turn": turn if type(turn) is int else None,
        "requested": requested,
        "budgeted": budgeted,
        "shadowed": len(nodes),
        "estimatedTokensBefore": before,
        "estimatedTokensAfter": after,
    }
    if own is not None:
        facts["summarizer"] = own.who()
    session.append(CONTEXT_COMPACTED, facts)
    session.append(COMPACTION_END, {})
    await agent.runtime.sessions.flush(session)
    return Compacted(start, summary, len(nodes), before, after)


def _plugin_message(text: str) -> dict[str, Any]:
    return {
        "content": [{"type": "text", "text": text}],
        "source": {"kind": "plugin", "plugin": "compaction"},
        "role": "user",
        "id": str(uuid.uuid4()),
    }


class ModelSummary:
    """The default summarizer: the agent's own model, asked with ``instructions`` as the
    system prompt, through the ``llm/stream`` chain (so the checkpoint policy makes the log
    durable first). Its usage is kept for ``context/compacted``."""

    def __init__(self, agent: Agent, instructions: str) -> None:
        self.agent = agent
        self.instructions = instructions
        self.usage: Any = None

    def who(self) -> dict[str, Any]:
        """The summarizer as ``context/compacted`` names it."""
        who: dict[str, Any] = {"provider": self.agent.provider, "model": self.agent.model}
        if self.usage is not None:
            who["usage"] = self.usage
        return who

    async def __call__(self, messages: Sequence[Any]) -> str:
        agent = self.agent
        ask = _plugin_message("Write the summary now.")
        request = ModelRequest(
            agent.provider, agent.model, [*messages, ask], self.instructions, (), agent.session.id
        )
        assembler = Assembler()
        async for chunk in agent.runtime.models.stream(request):
            if chunk.get("type") not in RETRY_CHUNKS:
                assembler.feed(chunk)
        failure = assembler.failure()
        if failure is not None:
            raise LlmError(failure)
        self.usage = assembler.usage
        return "".join(b.get("text", "") for b in assembler.content() if b.get("type") == "text")
