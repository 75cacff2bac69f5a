"""What each model request of a log was sent, read back from the log alone.

The loop builds a step's request from the ``request/header`` in force (the config — provider,
model and whatever else the adapter was given —, the system prompt, the tool definitions) and
the session's surface at that moment (the messages the model sees), and logs nothing else
about it: the header is written once and again only when it changes, and the messages are
already the log's. So a request is not stored a second time; it is rebuilt here, by one pass
over the log that keeps the surface as appending it did.

Guarantees: a request's ``messages`` are exactly the history the loop handed the adapter (the
surface nodes before the step's first streamed chunk, or before its answer when nothing was
streamed), with their seqs; a settlement step (a resumed turn's, which records the cut answer
again with no request) has no request; a log without headers (written by an integration that
records none) gives requests with an empty config.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from agent_session.session.events.surface import Surface, SurfaceReplace, projected_message
from agent_session.session.events.types import (
    ASSISTANT_CHUNK,
    ASSISTANT_MESSAGE,
    REQUEST_HEADER,
    STEP_END,
    STEP_START,
)

__all__ = ["LoggedRequest", "logged_requests", "recorded_again", "request_points"]


@dataclass(frozen=True)
class LoggedRequest:
    """One model request as the log records it."""

    turn: int | None
    step: int | None
    at_seq: int
    """The first event the request caused (its first chunk, or its answer)."""
    config: Mapping[str, Any]
    """The header's config: ``provider``, ``model``, and any other setting it names."""
    system: str | None
    tools: Sequence[Mapping[str, Any]]
    message_seqs: tuple[int, ...]
    """The seqs of the surface events the messages are."""
    messages: list[Any] = field(repr=False)
    """The history sent, oldest first (the log's own message objects)."""


def logged_requests(events: Sequence[Any]) -> list[LoggedRequest]:
    """Every model request of ``events`` (a whole log, from seq 0), in order."""
    return [
        _request(step, seq, header, surface, events)
        for step, seq, header, surface in request_points(events)
    ]


def request_points(
    events: Sequence[Any],
) -> Iterator[tuple[tuple[Any, Any], int, Mapping[str, Any], Surface]]:
    """Where each model request of ``events`` was made, lazily: ``((turn, step), seq of the
    first event it caused, the header in force, the surface as the request saw it)``. The
    surface is live: read it before asking for the next point (what :func:`logged_requests`
    copies; the pages read only what changed since the last point)."""
    from agent_session.session.events.eventlog import is_run, iter_parts

    surface = Surface()
    header: Mapping[str, Any] = {}
    step: tuple[Any, Any] | None = None
    asked = False
    for event in iter_parts(events):
        if is_run(event):  # (streamed deltas, read by their bounds: never built here)
            if step is not None and not asked:
                yield step, event.seq0, header, surface
            asked = True
            continue
        data = event.data if isinstance(event.data, Mapping) else {}
        if event.type == REQUEST_HEADER and isinstance(data.get("header"), Mapping):
            header = data["header"]
        elif event.type == STEP_START:
            step, asked = (data.get("turn"), data.get("step")), False
        elif event.type == STEP_END:
            step = None
        elif event.type in (ASSISTANT_CHUNK, ASSISTANT_MESSAGE) and step is not None:
            if not asked and not recorded_again(event):
                yield step, event.seq, header, surface
            asked = True
        op = getattr(event, "surface_op", None)
        if op is not None:
            surface.apply(event.seq, op)


def recorded_again(event: Any) -> bool:
    """Whether ``event`` is an answer recorded again in place of a cut one (a settlement
    step's ``assistant/message``, a surface replace): no model request made it. Asked of a
    step's first answer or chunk, this tells a settlement step from one that asked."""
    op = getattr(event, "surface_op", None)
    return event.type == ASSISTANT_MESSAGE and isinstance(op, SurfaceReplace)


def _request(
    step: tuple[Any, Any],
    seq: int,
    header: Mapping[str, Any],
    surface: Surface,
    events: Sequence[Any],
) -> LoggedRequest:
    nodes = tuple(surface.nodes)
    messages = [m for m in (projected_message(events[n]) for n in nodes) if m is not None]
    system = header.get("system")
    config = header.get("config")
    return LoggedRequest(
        turn=step[0] if isinstance(step[0], int) else None,
        step=step[1] if isinstance(step[1], int) else None,
        at_seq=seq,
        config=config if isinstance(config, Mapping) else {},
        system=system if isinstance(system, str) else None,
        tools=list(header.get("tools") or ()),
        message_seqs=nodes,
        messages=messages,
    )
