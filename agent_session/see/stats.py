"""``agent-session stats STORE ID [--json]``: a session's figures in the reference's terms
(:func:`session.events.stats.session_stats`, over the log as a load returns it) and what the
reference does not count: where crashes cut turns and what repair answered, how calls were
settled, and the approvals asked and decided. Read-only."""

from __future__ import annotations

import argparse
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from agent_session.cli.exits import OK
from agent_session.cli.output import json_line

__all__ = ["beyond", "checkpoints", "crashes", "stats"]


def beyond(events: Sequence[Any]) -> dict[str, Any]:
    """What the reference's figures do not say: ``crashes`` (:func:`crashes`), ``settled``
    (calls settled on resume, by how), ``approvals`` (asked, decided by outcome, and still
    parked), ``compactions`` (each one's seq, trigger, messages replaced and estimated
    sizes), ``checkpoints`` (:func:`checkpoints`)."""
    from agent_session.session.events.eventlog import is_run, iter_parts
    from agent_session.session.events.outcomes import SETTLEMENT
    from agent_session.session.events.parked import parked_calls

    cut = crashes(events)
    compactions: list[dict[str, Any]] = []
    settled: Counter[str] = Counter()
    asked, decided = 0, Counter[str]()
    for event in iter_parts(events):
        if is_run(event):
            continue  # packed streamed deltas: none of these figures is in them
        data = event.data if isinstance(event.data, Mapping) else {}
        if event.type == "tool/result":
            how = (data.get("meta") or {}).get(SETTLEMENT)
            if isinstance(how, str):
                settled[how] += 1
        elif event.type == "approval/asked":
            asked += 1
        elif event.type == "approval/decided":
            decided[str(data.get("outcome"))] += 1
        elif event.type == "context/compacted":
            keys = ("trigger", "shadowed", "estimatedTokensBefore", "estimatedTokensAfter")
            compactions.append({"seq": event.seq, **{k: data.get(k) for k in keys}})
    approvals = {"asked": asked, "decided": dict(decided), "parked": len(parked_calls(events))}
    return {
        "crashes": cut,
        "settled": dict(settled),
        "approvals": approvals,
        "compactions": compactions,
        "checkpoints": checkpoints(events, [c["lastDurableSeq"] for c in cut]),
    }


def crashes(events: Sequence[Any]) -> list[dict[str, Any]]:
    """Per turn a crash cut: the turn, the seq and time of its last durable event, and the
    calls repair answered, by code (``outcomeUnknown``, ``notStarted``)."""
    from agent_session.recovery import (
        TOOL_NOT_STARTED,
        TOOL_OUTCOME_UNKNOWN,
        crash_point,
        is_repair_result,
    )
    from agent_session.session.events.eventlog import is_run, iter_parts

    repaired = (TOOL_OUTCOME_UNKNOWN, TOOL_NOT_STARTED)
    out: list[dict[str, Any]] = []
    answered: dict[str, list[str]] = {code: [] for code in repaired}
    for event in iter_parts(events):
        if is_run(event):
            continue
        kind = event.type
        if kind != "tool/result" and kind != "turn/end":
            continue
        data = event.data if isinstance(event.data, Mapping) else {}
        if kind == "tool/result":
            code = (data.get("error") or {}).get("code")
            if code in answered and is_repair_result(event):
                answered[code].append(data["message"]["source"]["callId"])
        elif (data.get("reason") or {}).get("kind") == "interrupted":
            last = crash_point(events, event.seq)
            out.append(
                {
                    "turn": data.get("turn"),
                    "lastDurableSeq": last.seq,
                    "time": last.time,
                    "outcomeUnknown": answered[TOOL_OUTCOME_UNKNOWN],
                    "notStarted": answered[TOOL_NOT_STARTED],
                }
            )
            answered = {code: [] for code in repaired}
    return out


def checkpoints(events: Sequence[Any], cut: Sequence[int] = ()) -> dict[str, int]:
    """The checkpoints the policy made, as far as the log shows them: one before each step's
    model request (every step but a settlement step, which repeats an answer), one before each tool
    body (a recorded call not refused before dispatch, nor by its approval), one after each
    step and one at each turn's end; a crash's closers (after the seqs in ``cut``) are not
    checkpoints."""
    from agent_session.session.events.eventlog import is_run, iter_parts

    closing = {seq for crash in cut for seq in range(crash + 1, _turn_end(events, crash) + 1)}
    requests = steps = ends = 0
    requested = False
    calls: set[Any] = set()
    refused: set[Any] = set()
    asks: dict[Any, Any] = {}
    approved: set[Any] = set()
    for event in iter_parts(events):
        if is_run(event):
            continue  # packed streamed deltas: never a checkpoint's mark
        data = event.data if isinstance(event.data, Mapping) else {}
        kind = event.type
        if kind == "step/start":  # every step asks the model, but a settlement step
            requests += 1
            requested = True
        elif kind == "assistant/message" and event.surface_op not in (None, "append"):
            requests -= requested  # (it repeats an answer instead: a replace)
            requested = False
        elif kind == "tool/call":
            calls.add(data.get("callId"))
        elif kind == "tool/result":
            if (data.get("error") or {}).get("code") == "ABORTED_BEFORE_DISPATCH":
                refused.add((data.get("message") or {}).get("source", {}).get("callId"))
        elif kind == "approval/asked":
            asks[data.get("id")] = data.get("callId")
        elif kind == "approval/decided" and data.get("outcome") == "allowed-once":
            approved.add(asks.get(data.get("id")))
        elif kind == "step/end" and event.seq not in closing:
            steps += 1
        elif kind == "turn/end" and event.seq not in closing:
            ends += 1
    bodies = len({c for c in calls - refused if c not in asks.values() or c in approved})
    return {
        "beforeRequests": requests,
        "beforeToolBodies": bodies,
        "afterSteps": steps,
        "atTurnEnds": ends,
        "total": requests + bodies + steps + ends,
    }


def _turn_end(events: Sequence[Any], after: int) -> int:
    """The seq of the first ``turn/end`` after ``after``."""
    for seq in range(after + 1, len(events)):
        if events[seq].type == "turn/end":
            return seq
    return len(events) - 1


async def stats(args: argparse.Namespace) -> int:
    """Print the figures of one session."""
    from agent_session.cli.commands import examined_tree
    from agent_session.governance.budgets import budget_report
    from agent_session.session.events.stats import SessionStats

    looked, children = await examined_tree(args.store, args.id)
    events = looked.session.events  # (closers added in memory, as a load returns it)
    folded = SessionStats().fold(events)
    figures, more = folded.value(), beyond(events)
    more["budget"] = budget_report(events, looked.session.header.seed_length or 0)
    more.update(rolled_up(figures, more["budget"]["spent"], children))
    if args.json:
        print(
            json_line({"id": args.id, "sessionStats": figures, "asOfSeq": folded.as_of_seq, **more})
        )
        return OK
    f = figures
    per = f" ({f['ttftMs'] / f['ttftSteps']:.0f} ms per step)" if f["ttftSteps"] else ""
    rate = f", {f['decodeTokens'] / f['decodeMs'] * 1000:.0f} tokens/s" if f["decodeMs"] else ""
    lines = [
        f"{args.id}: {f['turns']} turn(s), {f['steps']} step(s), through seq {folded.as_of_seq}",
        f"  model: {f['llmMs']} ms; first token {f['ttftMs']} ms over {f['ttftSteps']} "
        f"step(s){per}",
        f"  decode: {f['decodeMs']} ms for {f['decodeTokens']} output tokens{rate}",
        f"  tools: {f['toolMs']} ms (the sum of each call's span)",
    ]
    for crash in more["crashes"]:
        codes = (("outcomeUnknown", "TOOL_OUTCOME_UNKNOWN"), ("notStarted", "TOOL_NOT_STARTED"))
        repaired = ", ".join(f"{len(crash[k])} {name}" for k, name in codes if crash[k])
        answered = f"; repair answered {repaired}" if repaired else ""
        cut = crash["lastDurableSeq"]
        lines.append(f"  crash: turn {crash['turn']} cut after seq {cut}{answered}")
    if more["settled"]:
        done = ", ".join(f"{n} {how}" for how, n in sorted(more["settled"].items()))
        lines.append(f"  settled on resume: {done}")
    points = more["checkpoints"]
    lines.append(
        f"  checkpoints: {points['total']} as the log shows them ({points['beforeRequests']} "
        f"before model requests, {points['beforeToolBodies']} before tool bodies, "
        f"{points['afterSteps']} after steps, {points['atTurnEnds']} at turn ends)"
    )
    approvals = more["approvals"]
    if approvals["asked"]:
        outcomes = ", ".join(f"{n} {o}" for o, n in sorted(approvals["decided"].items())) or "none"
        lines.append(
            f"  approvals: {approvals['asked']} asked; decided: {outcomes}; "
            f"parked: {approvals['parked']}"
        )
    if more["compactions"]:
        last = more["compactions"][-1]
        lines.append(
            f"  compactions: {len(more['compactions'])}; the last (seq {last['seq']}, "
            f"{last['trigger']}) replaced {last['shadowed']} message(s), about "
            f"{last['estimatedTokensBefore']} → {last['estimatedTokensAfter']} tokens; the "
            "figures above count the whole history"
        )
    lines.append(_spend_line(more["budget"]))
    if more["subagents"]:
        whole, spent = more["withSubagents"]["sessionStats"], more["withSubagents"]["spent"]
        names = ", ".join(child["id"] for child in more["subagents"])
        lines.append(
            f"  subagents: {len(more['subagents'])} ({names}); with them: {whole['turns']} "
            f"turn(s), {whole['steps']} step(s), model {whole['llmMs']} ms, tools "
            f"{whole['toolMs']} ms, {spent['inputTokens']} input + {spent['outputTokens']} "
            "output tokens"
        )
    print("\n".join(lines))
    return OK


def rolled_up(
    figures: dict[str, Any], spent: dict[str, Any], children: Sequence[Any]
) -> dict[str, Any]:
    """``subagents`` (each child agent's session under it, depth first: its id, parent,
    figures and spend; a child not stored has none) and ``withSubagents`` (the figures and
    the token spend of the whole tree)."""
    from agent_session.governance.budgets import budget_report
    from agent_session.session.events.stats import SessionStats

    whole = dict(figures)
    tokens = {key: spent[key] for key in ("inputTokens", "outputTokens", "requests")}
    listed: list[dict[str, Any]] = []

    def visit(child: Any, parent: str) -> None:
        entry: dict[str, Any] = {"id": child.id, "parent": parent, "callId": child.call_id}
        if child.events is not None:
            own = SessionStats().fold(child.events).value()
            used = budget_report(child.events, 0)["spent"]
            entry.update(sessionStats=own, spent=used)
            for key, value in own.items():
                whole[key] += value
            for key in tokens:
                tokens[key] += used[key]
        listed.append(entry)
        for grandchild in child.children:
            visit(grandchild, child.id)

    for child in children:
        visit(child, "")
    for entry in listed:
        entry["parent"] = entry["parent"] or None
    return {"subagents": listed, "withSubagents": {"sessionStats": whole, "spent": tokens}}


def _spend_line(report: dict[str, Any]) -> str:
    """``  spend: ...`` (and the budget's limits, when it has one)."""
    spent, budget = report["spent"], report["budget"]
    cost = f", cost {spent['cost']:.4f}" if spent["cost"] is not None else ""
    unknown = spent["unknown"]["requests"]
    cut = f" ({unknown} unanswered, at their bound)" if unknown else ""
    line = (
        f"  spend: {spent['inputTokens']} input + {spent['outputTokens']} output tokens over "
        f"{spent['requests']} response(s){cut}{cost}"
    )
    if budget is not None:
        limits = ", ".join(f"{k} {v}" for k, v in budget["limits"].items())
        parked = "; awaiting-budget" if report["parked"] is not None else ""
        line += f"; budget: {limits}{parked}"
    return line
