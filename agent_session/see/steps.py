"""What each model step of a session was sent, as the pages show it: read back from the log
by :func:`~agent_session.session.events.requests.request_points`, and kept as small as the
log is.

A page cannot hold every step's whole history (that grows with the square of the session's
length), so it holds each surface message once, in seq order, and each request as the runs
of those messages it was sent (``[first, end)`` index pairs: one run for a history that only
grew, a few more where a settlement or a compaction replaced part of it), with the header in
force by its index in a table of the distinct headers. Working the runs out costs only what
changed since the previous request, so a 100,000-event session's requests cost one pass.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["Sent", "render", "sent"]


Sent = dict[str, Any]
"""``{"headers": [...], "messages": [...], "requests": {seq: {"h": index, "m": runs}}}``:
``seq`` is the first event the request caused."""


def sent(events: Sequence[Any]) -> Sent:
    """Every request of ``events`` (see the module docstring)."""
    from agent_session.session.events.eventlog import is_run, iter_parts
    from agent_session.session.events.requests import request_points
    from agent_session.session.events.surface import projected_message

    messages: list[dict[str, Any]] = []
    index: dict[int, int] = {}
    for event in iter_parts(events):
        if is_run(event) or event.surface_op is None:
            continue
        message = projected_message(event)
        if message is not None:
            index[event.seq] = len(messages)
            messages.append({"seq": event.seq, **render(message)})
    headers: list[dict[str, Any]] = []
    by_identity: dict[int, int] = {}
    by_content: dict[str, int] = {}
    requests: dict[int, dict[str, Any]] = {}
    runs: list[list[int]] = []
    seen, generation = 0, -1
    for _, seq, header, surface in request_points(events):
        nodes = surface.nodes
        if surface.replace_generation != generation or len(nodes) < seen:
            runs, seen, generation = [], 0, surface.replace_generation
        runs = [list(run) for run in runs]
        for node in nodes[seen:]:
            at = index.get(node)
            if at is None:
                continue  # (a message that projects nothing: sent as nothing)
            if runs and runs[-1][1] == at:
                runs[-1][1] = at + 1
            else:
                runs.append([at, at + 1])
        seen = len(nodes)
        if id(header) not in by_identity:  # (the same header again, as a resume logs it, is
            shown = _header(header)  # one entry)
            key = _json(shown)
            if key not in by_content:
                by_content[key] = len(headers)
                headers.append(shown)
            by_identity[id(header)] = by_content[key]
        requests[seq] = {"h": by_identity[id(header)], "m": runs}
    return {"headers": headers, "messages": messages, "requests": requests}


def _header(header: Mapping[str, Any]) -> dict[str, Any]:
    config = header.get("config")
    config = config if isinstance(config, Mapping) else {}
    tools = [tool for tool in header.get("tools") or () if isinstance(tool, Mapping)]
    system = header.get("system")
    return {
        "model": str(config.get("model", "")),
        "provider": str(config.get("provider", "")),
        "config": _json({k: v for k, v in config.items() if k not in ("provider", "model")}),
        "system": system if isinstance(system, str) else "",
        "tools": [
            {
                "name": str(tool.get("name", "")),
                "description": str(tool.get("description", "")),
                "parameters": _json(tool.get("parameters", tool.get("inputSchema", {}))),
            }
            for tool in tools
        ],
    }


def render(message: Any) -> dict[str, str]:
    """A message as the pages show it: ``{"role", "text"}``, every block on its own line
    (a tool call as ``→ name(arguments) [id]``, a result as ``← [id] text`` with the role
    ``tool``, reasoning marked)."""
    if not isinstance(message, Mapping):
        return {"role": "?", "text": _json(message)}
    lines = []
    content = message.get("content")
    for block in content if isinstance(content, list | tuple) else ():
        if not isinstance(block, Mapping):
            continue
        kind = block.get("type")
        if kind == "text":
            lines.append(str(block.get("text", "")))
        elif kind == "reasoning":
            lines.append(f"[reasoning] {block.get('text', '')}")
        elif kind == "tool-call":
            arguments = block.get("arguments", block.get("input", ""))
            arguments = arguments if isinstance(arguments, str) else _json(arguments)
            lines.append(f"→ {block.get('name', '')}({arguments}) [{block.get('id', '')}]")
        elif kind == "tool-result":
            inner = block.get("content")
            text = "".join(
                str(part.get("text", ""))
                for part in (inner if isinstance(inner, list | tuple) else ())
                if isinstance(part, Mapping)
            )
            error = " (error)" if block.get("isError") else ""
            lines.append(f"← [{block.get('toolCallId', '')}]{error} {text}")
        else:
            lines.append(f"[{kind}]")
    source = message.get("source")
    tool = isinstance(source, Mapping) and source.get("kind") == "tool"
    return {"role": "tool" if tool else str(message.get("role", "?")), "text": "\n".join(lines)}


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)
