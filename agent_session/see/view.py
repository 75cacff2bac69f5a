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
import contextlib
import hashlib
import json
from collections.abc import Mapping, Sequence
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agent_session.cli.exits import OK
from agent_session.see.lineage import Child
from agent_session.see.transcript import compacted_line
from agent_session.session.events.compaction import is_summary

if TYPE_CHECKING:
    from agent_session.see.prices import PriceTable
    from agent_session.see.steps import Sent

__all__ = ["csp_hash", "page", "rows", "timeline", "view"]


def rows(
    events: Sequence[Any], prices: PriceTable | None = None, asked: Sent | None = None
) -> list[dict[str, Any]]:
    """The timeline's rows (see the module docstring), times relative to the first event.

    A step row holds its model, its usage and cost (with ``prices``), its answer
    (:func:`~agent_session.see.steps.render`), the provider's response id and finish reason,
    and ``sent``: the first event its request caused, a key of ``asked``'s ``requests``
    (:func:`~agent_session.see.steps.sent`, worked out when not given; none for a settlement
    step, which asked nothing). A turn row holds its
    totals: wall time, model time, tool time, tokens in and out, and cost."""
    from agent_session.see.stats import crashes
    from agent_session.see.steps import render, sent
    from agent_session.session.events.eventlog import is_run, iter_parts

    asked = sent(events) if asked is None else asked

    out: list[dict[str, Any]] = []
    origin = events[0].time if len(events) else 0
    step: dict[str, Any] | None = None
    turn: dict[str, Any] = {}
    calls: dict[Any, dict[str, Any]] = {}
    cut = {c["lastDurableSeq"]: c for c in crashes(events)}
    headers = {seq: request["h"] for seq, request in asked["requests"].items()}
    models = [header["model"] for header in asked["headers"]]
    for event in iter_parts(events):
        seq, time = (event.seq0, event.time0) if is_run(event) else (event.seq, event.time)
        if step is not None and "sent" not in step and seq in headers:
            step["sent"] = seq
            step["model"] = models[headers[seq]] or None
        if turn:
            turn["dur"] = time - origin - turn["t"]
        if is_run(event):  # (read by its bounds, never built: a long log's runs stay packed)
            if step is not None and step.get("firstToken") is None:
                step["firstToken"] = time - origin
            continue
        data = event.data if isinstance(event.data, Mapping) else {}
        t, kind = event.time - origin, event.type
        if kind == "turn/start":
            turn = {"k": "turn", "turn": data.get("turn"), "t": t, "at": event.time, "dur": 0}
            turn.update(modelMs=0, toolMs=0, tokensIn=0, tokensOut=0, cost=None)
            out.append(turn)
        elif kind == "step/start":
            step = {"k": "step", "turn": data.get("turn"), "step": data.get("step"), "t": t}
            out.append(step)
        elif kind == "assistant/chunk" and step is not None and step.get("firstToken") is None:
            chunk = data.get("chunk")
            if isinstance(chunk, Mapping) and str(chunk.get("type", "")).endswith("-delta"):
                step["firstToken"] = t
        elif is_summary(event):
            out.append({"k": "summary", "t": t, "text": "summary: " + _text(data.get("content"))})
        elif kind == "user/message":
            out.append({"k": "user", "t": t, "text": _text(data.get("content"))})
        elif kind == "subagent/spawned":
            out.append({"k": "subagent", "t": t, "id": data.get("session"), "text": ""})
        elif kind == "context/compacted":
            out.append({"k": "compacted", "t": t, "text": compacted_line(data).strip("─ ")})
        elif kind == "assistant/message":
            message = _mapping(data.get("message"))
            if step is not None:
                _answered(step, turn, message, data.get("usage"), t, prices)
                step["answer"] = render(message)["text"]
            for block in message.get("content") or ():
                if isinstance(block, Mapping) and block.get("type") in ("text", "reasoning"):
                    out.append({"k": block["type"], "t": t, "text": str(block.get("text", ""))})
        elif kind == "tool/call":
            call = {"k": "call", "t": t, "id": data.get("callId"), "name": data.get("name")}
            call["args"] = str(data.get("arguments", ""))
            calls[data.get("callId")] = call
            out.append(call)
        elif kind == "tool/result":
            done = _result(out, calls, data, t)
            if turn and "end" in done:
                turn["toolMs"] += done["end"] - done["t"]
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


def _answered(
    step: dict[str, Any],
    turn: dict[str, Any],
    message: Mapping[str, Any],
    usage: Any,
    t: int,
    prices: PriceTable | None,
) -> None:
    """A step's answer: model time, usage, the model that answered, the provider's account,
    the cost; and what they add to the turn's totals."""
    source = _mapping(message.get("source"))
    response = _mapping(_mapping(source.get("replayState")).get("response"))
    step["modelMs"] = t - step["t"]
    step["usage"] = usage
    if not step.get("model") and isinstance(source.get("model"), str) and source["model"]:
        step["model"] = source["model"]  # (where no header named the model asked)
    for key, name in (("responseId", "id"), ("finish", "finishReason")):
        if isinstance(response.get(name), str):
            step[key] = response[name]
    cost = prices.cost(step.get("model"), usage) if prices else None
    if cost is not None:
        step["cost"] = cost
    if not turn:
        return
    turn["modelMs"] += step["modelMs"]
    counts = _mapping(usage)
    for key, name in (("tokensIn", "inputTokens"), ("tokensOut", "outputTokens")):
        value = counts.get(name)
        if isinstance(value, int) and not isinstance(value, bool):
            turn[key] += value
    if cost is not None:
        turn["cost"] = (turn["cost"] or 0) + cost


def _result(
    out: list[dict[str, Any]], calls: dict[Any, dict[str, Any]], data: Mapping[str, Any], t: int
) -> dict[str, Any]:
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
    return call


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _text(content: Any) -> str:
    blocks = content if isinstance(content, list | tuple) else ()
    return "".join(str(b.get("text", "")) for b in blocks if isinstance(b, Mapping))


def timeline(
    header: Mapping[str, Any],
    events: Sequence[Any],
    *,
    prices: PriceTable | None = None,
    store: str | None = None,
    children: Sequence[Child] = (),
) -> dict[str, Any]:
    """What the page shows of a session, as JSON (``agent-session serve`` serves it too):
    its rows (with what each child agent's session did, where it was started), what each
    step was sent (:func:`~agent_session.see.steps.sent`), the session's totals, and the
    calls it waits on (``parked``) with the commands that decide them on ``store`` (as the
    user named it)."""
    from agent_session.see.steps import sent

    asked = sent(events)
    shown = _nested(rows(events, prices, asked), children, events[0].time if len(events) else 0)
    turns = [row for row in shown if row["k"] == "turn"]
    priced = [row["cost"] for row in turns if row["cost"] is not None]
    totals = {
        "dur": events[-1].time - events[0].time if len(events) else 0,
        "turns": len(turns),
        "steps": sum(1 for row in shown if row["k"] == "step"),
        "calls": sum(1 for row in shown if row["k"] == "call"),
        **{k: sum(row[k] for row in turns) for k in ("modelMs", "toolMs", "tokensIn", "tokensOut")},
        "cost": sum(priced) if priced else None,
    }
    return {
        "id": header.get("id"),
        "parent": header.get("parentSession"),
        "seed": header.get("seedLength"),
        "parentCommand": _viewing(header.get("parentSession"), store),
        "createdAt": header.get("createdAt"),
        "events": len(events),
        "rows": shown,
        "headers": asked["headers"],
        "messages": asked["messages"],
        "requests": {str(seq): request for seq, request in asked["requests"].items()},
        "totals": totals,
        "currency": prices.currency if prices else None,
        "parked": _parked(str(header.get("id", "")), events, store),
    }


def _viewing(parent: Any, store: str | None) -> str | None:
    """The command that writes the page of a fork's parent (``None`` for a session that is no
    fork)."""
    import shlex

    if not isinstance(parent, str):
        return None
    return f"agent-session view {shlex.quote(store) if store else 'STORE'} {shlex.quote(parent)}"


def _parked(id: str, events: Sequence[Any], store: str | None) -> list[dict[str, Any]]:
    """The calls the session waits on: what, why, the arguments an approver is asked to allow,
    and the commands that decide each (on ``store``; ``STORE`` where it is not known)."""
    import shlex

    from agent_session.agent_loop.parking import DIGEST_PREFIX
    from agent_session.session.events.eventlog import is_run, iter_parts
    from agent_session.session.events.parked import parked_calls

    out: list[dict[str, Any]] = []
    if not any(not is_run(e) and e.type == "approval/asked" for e in iter_parts(events)):
        return out  # (nothing was ever asked: no need to find the open turn)
    where = shlex.quote(store) if store else "STORE"
    for call in parked_calls(events):
        arguments = call.arguments
        if isinstance(arguments, str):
            with contextlib.suppress(ValueError):  # (shown as JSON when they are JSON)
                arguments = json.loads(arguments)
        named = f"{where} {shlex.quote(id)} {shlex.quote(call.call_id)}"
        digest = call.arguments_digest[:DIGEST_PREFIX]
        decision = call.decision
        out.append(
            {
                "callId": call.call_id,
                "tool": call.tool_name,
                "arguments": json.dumps(arguments, ensure_ascii=False, indent=2, default=str),
                "digest": call.arguments_digest,
                "reason": call.reason,
                "askedAt": call.asked_at,
                "expiresAt": call.expires_at,
                "decided": None if decision is None else decision.outcome,
                "approve": f"agent-session approve {named} --digest {shlex.quote(digest)}",
                "reject": f"agent-session reject {named} --reason 'say why'",
            }
        )
    return out


def _nested(
    shown: list[dict[str, Any]], children: Sequence[Child], origin: int
) -> list[dict[str, Any]]:
    """``shown`` with, after each ``subagent`` row, a row per thing its child did (and its
    children's), timed from this session's start (a child shown once)."""
    by_id = {child.id: child for child in children}
    out: list[dict[str, Any]] = []
    for row in shown:
        out.append(row)
        if row["k"] != "subagent":
            continue
        child = by_id.pop(str(row["id"]), None)
        if child is None or child.events is None:
            row["text"] = f"subagent {row['id']}: " + (
                "continued" if child is None else "not stored"
            )
            continue
        row["text"] = f"subagent {child.id}, started by call {child.call_id}"
        first = child.events[0].time if len(child.events) else origin
        for inner in _nested(rows(child.events), child.children, first):
            if inner["k"] in ("turn", "step"):
                continue  # (the child's brackets: its rows say what it did)
            said = inner.get("text") or (
                f"{inner.get('name')}({inner.get('args')})" if inner["k"] == "call" else inner["k"]
            )
            t = inner["t"] + first - origin
            out.append({"k": "sub", "t": t, "text": f"{child.id} · {inner['k']}: {said}"})
    return out


def page(
    header: Mapping[str, Any],
    events: Sequence[Any],
    *,
    live: str | None = None,
    back: str | None = None,
    prices: PriceTable | None = None,
    store: str | None = None,
    parent_url: str | None = None,
    children: Sequence[Child] = (),
) -> str:
    """The HTML of the session's timeline (see the module docstring); ``live``: the URL path of
    its :func:`timeline` JSON, which the page then polls to follow a session being written;
    ``back``: the URL of the list it was opened from; ``parent_url``: the page of the session
    a fork was forked from (else the head says how to view it); ``prices`` and ``store`` as
    :func:`timeline` takes them."""
    assets = resources.files("agent_session.see") / "assets"
    style = (assets / "view.css").read_text(encoding="utf-8")
    script = (assets / "view.js").read_text(encoding="utf-8")
    data = {
        **timeline(header, events, prices=prices, store=store, children=children),
        "live": live,
        "back": back,
        "parentUrl": parent_url,
    }
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
        '<header id="head"></header><section id="parked" hidden></section>\n'
        '<main><div id="list" tabindex="0" role="listbox" aria-label="what happened, in order">'
        '<div id="rows"></div></div><aside id="detail" hidden><div id="detail-body"></div>'
        '<p class="hint">Esc closes · ↑↓ or j/k move · Enter opens</p></aside></main>\n'
        f'<script type="application/json" id="data">{payload}</script>\n'
        f"<script>{script}</script>\n</body></html>\n"
    )


def csp_hash(text: str) -> str:
    """The CSP source that allows exactly this inline script or style."""
    return "sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode()


async def view(args: argparse.Namespace) -> int:
    """Write the session's timeline page and say where."""
    from agent_session.cli.commands import examined_tree, redacted

    looked, children = await examined_tree(args.store, args.id)
    session = looked.session
    header = session.header.to_json()
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in args.id).lstrip(".")
    target = Path(args.output or f"{safe or 'session'}.html")
    events = redacted(args, session.events)

    def hidden(tree: Sequence[Child]) -> None:  # (each child's content as the parent's)
        for child in tree:
            child.events = None if child.events is None else redacted(args, child.events)
            hidden(child.children)

    hidden(children)
    html = page(header, events, prices=args.prices, store=args.store.shown, children=children)
    target.write_text(html, encoding="utf-8")
    print(f"wrote {target} ({target.stat().st_size:,} bytes); open it in a browser")
    return OK
