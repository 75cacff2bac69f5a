"""``agent-session view STORE ID [-o FILE]``: a session as one self-contained HTML timeline.

No server, no network, no CDN: the page's CSS and script are inline, allowed by a strict
Content-Security-Policy (``default-src 'none'``, the script and the style by their hashes), and
it opens from a file URL. The session travels as JSON in a non-executable ``<script
type="application/json">`` whose ``<``, ``>`` and ``&`` are escaped, and the page shows every
piece of content with ``textContent``, never as markup: event contents are untrusted.

What it shows, one row per thing that happened (streamed deltas are in their answer), each
turn a lane in time: its steps (model time, time to first token, decode time, usage) and its
tool calls as bars placed where they ran in the turn (a call from its ``tool/call`` to its
result, its arguments and result on click); user messages, the model's text and reasoning;
and, marked so nobody misses them, the crash points, the
repair's answers (``TOOL_OUTCOME_UNKNOWN``, ``TOOL_NOT_STARTED``), settled calls, approvals and
the parent a fork came from. The list is virtualized: only the rows in view exist in the page.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
from collections.abc import Mapping, Sequence
from importlib import resources
from pathlib import Path
from typing import Any

from agent_session.cli.exits import OK

__all__ = ["csp_hash", "page", "rows", "timeline", "view"]


def rows(events: Sequence[Any]) -> list[dict[str, Any]]:
    """The timeline's rows (see the module docstring), times relative to the first event."""
    from agent_session.see.stats import beyond
    from agent_session.session.events.eventlog import is_run, iter_parts

    out: list[dict[str, Any]] = []
    origin = events[0].time if len(events) else 0
    step: dict[str, Any] | None = None
    calls: dict[Any, dict[str, Any]] = {}
    cut = {c["lastDurableSeq"]: c for c in beyond(events)["crashes"]}
    for event in iter_parts(events):
        if is_run(event):
            if step is not None and step.get("firstToken") is None:
                step["firstToken"] = event[0].time - origin
            continue
        data = event.data if isinstance(event.data, Mapping) else {}
        t, kind = event.time - origin, event.type
        if kind == "turn/start":
            out.append({"k": "turn", "turn": data.get("turn"), "t": t, "at": event.time})
        elif kind == "step/start":
            step = {"k": "step", "turn": data.get("turn"), "step": data.get("step"), "t": t}
            out.append(step)
        elif kind == "assistant/chunk" and step is not None and step.get("firstToken") is None:
            chunk = data.get("chunk")
            if isinstance(chunk, Mapping) and str(chunk.get("type", "")).endswith("-delta"):
                step["firstToken"] = t
        elif kind == "user/message":
            out.append({"k": "user", "t": t, "text": _text(data.get("content"))})
        elif kind == "assistant/message":
            if step is not None:
                step["modelMs"] = t - step["t"]
                step["usage"] = data.get("usage")
            message = _mapping(data.get("message"))
            for block in message.get("content") or ():
                if isinstance(block, Mapping) and block.get("type") in ("text", "reasoning"):
                    out.append({"k": block["type"], "t": t, "text": str(block.get("text", ""))})
        elif kind == "tool/call":
            call = {"k": "call", "t": t, "id": data.get("callId"), "name": data.get("name")}
            call["args"] = str(data.get("arguments", ""))
            calls[data.get("callId")] = call
            out.append(call)
        elif kind == "tool/result":
            _result(out, calls, data, t)
        elif kind in ("approval/asked", "approval/decided"):
            what = data.get("toolName") if kind == "approval/asked" else data.get("outcome")
            out.append({"k": kind.split("/")[1], "t": t, "text": str(what)})
        elif kind == "turn/end":
            reason = _mapping(data.get("reason"))
            out.append(
                {"k": "end", "t": t, "turn": data.get("turn"), "text": str(reason.get("kind"))}
            )
        if event.seq in cut:
            crash = cut[event.seq]
            out.append({"k": "crash", "t": t, "turn": crash["turn"], "seq": event.seq})
    return out


def _result(
    out: list[dict[str, Any]], calls: dict[Any, dict[str, Any]], data: Mapping[str, Any], t: int
) -> None:
    message = _mapping(data.get("message"))
    source = _mapping(message.get("source"))
    call_id = source.get("callId")
    blocks = [b for b in message.get("content") or () if isinstance(b, Mapping)]
    text = _text(blocks[0].get("content")) if blocks else ""
    code = _mapping(data.get("error")).get("code")
    how = _mapping(data.get("meta")).get("settlement")
    call = calls.pop(call_id, None)
    if call is None:  # a result without its call in view (a repair's not-started answer)
        call = {"k": "call", "t": t, "id": call_id, "name": "", "args": ""}
        out.append(call)
    call.update(end=t, result=text, error=bool(blocks and blocks[0].get("isError")))
    if code in ("TOOL_OUTCOME_UNKNOWN", "TOOL_NOT_STARTED"):
        call["repaired"] = code
    if isinstance(how, str):
        call["settled"] = how


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _text(content: Any) -> str:
    blocks = content if isinstance(content, list | tuple) else ()
    return "".join(str(b.get("text", "")) for b in blocks if isinstance(b, Mapping))


def timeline(header: Mapping[str, Any], events: Sequence[Any]) -> dict[str, Any]:
    """What the page shows of a session, as JSON (``agent-session serve`` serves it too)."""
    return {
        "id": header.get("id"),
        "parent": header.get("parentSession"),
        "createdAt": header.get("createdAt"),
        "events": len(events),
        "rows": rows(events),
    }


def page(header: Mapping[str, Any], events: Sequence[Any], *, live: str | None = None) -> str:
    """The HTML of the session's timeline (see the module docstring); ``live``: the URL path of
    its :func:`timeline` JSON, which the page then polls to follow a session being written."""
    assets = resources.files("agent_session.see") / "assets"
    style = (assets / "view.css").read_text(encoding="utf-8")
    script = (assets / "view.js").read_text(encoding="utf-8")
    data = {**timeline(header, events), "live": live}
    payload = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    for char, escaped in (("&", "\\u0026"), ("<", "\\u003c"), (">", "\\u003e")):
        payload = payload.replace(char, escaped)
    connect = "; connect-src 'self'" if live else ""
    policy = (
        "default-src 'none'; "
        f"style-src '{csp_hash(style)}'; script-src '{csp_hash(script)}'; img-src data:; "
        f"base-uri 'none'; form-action 'none'{connect}"
    )
    title = str(header.get("id", "session")).replace("&", "&amp;").replace("<", "&lt;")
    return (
        '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">\n'
        f'<meta http-equiv="Content-Security-Policy" content="{policy}">\n'
        f"<title>session {title}</title>\n<style>{style}</style></head>\n<body>\n"
        '<header id="head"></header><main><div id="list" tabindex="0"><div id="rows"></div>'
        '</div><aside id="detail" hidden><pre id="detail-text"></pre></aside></main>\n'
        f'<script type="application/json" id="data">{payload}</script>\n'
        f"<script>{script}</script>\n</body></html>\n"
    )


def csp_hash(text: str) -> str:
    """The CSP source that allows exactly this inline script or style."""
    return "sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode()


async def view(args: argparse.Namespace) -> int:
    """Write the session's timeline page and say where."""
    from agent_session.cli.commands import examined

    session = (await examined(args.store, args.id)).session
    header = session.header.to_json()
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in args.id).lstrip(".")
    target = Path(args.output or f"{safe or 'session'}.html")
    target.write_text(page(header, session.events), encoding="utf-8")
    print(f"wrote {target} ({target.stat().st_size:,} bytes); open it in a browser")
    return OK
