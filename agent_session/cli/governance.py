"""``agent-session budget``, ``label``, ``sign``, ``audit-key``, ``verify --integrity`` and
``export --format audit``: budgets and labels kept in the log, and the tamper evidence of
chained logs (:mod:`agent_session.audit`)."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from agent_session.cli.exits import CORRUPT, OK, NotFound, UserError
from agent_session.cli.output import json_line, say

__all__ = ["audit_key", "budget", "export_audit", "label", "sign", "verify_integrity"]


async def budget(args: argparse.Namespace) -> int:
    """Set, raise or show one session's budget, or print the store's spend per window."""
    from agent_session.cli.commands import backend, check_exists, diagnose
    from agent_session.deciders import who
    from agent_session.governance.budgets import budget_report, set_stored_budget
    from agent_session.session.events.budget import LIMITS

    if args.action == "spend":
        return await _spend(args)
    if args.id is None:
        raise UserError(f"budget {args.action} needs a session id: budget {args.action} STORE ID")
    limits = {key: getattr(args, key) for key in LIMITS if getattr(args, key) is not None}
    prices = args.prices
    if args.action in ("set", "raise"):
        if not limits:
            raise UserError("give at least one limit: --output-tokens, --total-tokens, ...")
        check_exists(args.store)
        await set_stored_budget(
            args.store,
            args.id,
            limits,
            prices=prices,
            by=args.by or who(),
            reason=args.reason,
            raising=args.action == "raise",
        )
    store = backend(args.store, read_only=True)
    try:
        examined = await diagnose(store, args.store, args.id)
    finally:
        await store.aclose()
    report = budget_report(examined.session.events, examined.session.header.seed_length or 0)
    say(args.json, {"id": args.id, **report}, _budget_text(args.id, report))
    return OK


def _budget_text(id: str, report: dict[str, Any]) -> str:
    spent, budget = report["spent"], report["budget"]
    cost = f", cost {spent['cost']:.4f}" if spent["cost"] is not None else ""
    lines = [
        f"{id}: spent {spent['inputTokens']} input + {spent['outputTokens']} output tokens "
        f"over {spent['requests']} response(s){cost}"
    ]
    unknown = spent["unknown"]
    if unknown["requests"]:
        lines.append(
            f"  of which unknown: {unknown['requests']} request(s) with no recorded response, "
            f"charged at their bound ({unknown['inputTokens']} input + "
            f"{unknown['outputTokens']} output tokens)"
        )
    if budget is None:
        lines.append("  no budget")
    else:
        left = ", ".join(
            f"{key} {limit} ({report['remaining'][key]:g} left)"
            for key, limit in budget["limits"].items()
        )
        lines.append(f"  budget: {left}")
    if report["parked"] is not None:
        park = report["parked"]
        lines.append(
            f"  awaiting-budget: turn {park['turn']} step {park['step']} waits "
            f"(over: {', '.join(park.get('over') or [])}); raise it, then resume the agent"
        )
    return "\n".join(lines)


async def _spend(args: argparse.Namespace) -> int:
    from agent_session.cli.commands import check_exists
    from agent_session.governance.windows import spend_windows

    check_exists(args.store)
    windows = await spend_windows(
        args.store, label=args.label, per=args.per, since_ms=args.since, prices=args.prices
    )
    if args.json:
        for window in windows:
            print(json_line(window))
        return OK
    if not windows:
        print("no recorded spend")
    for w in windows:
        cost = f", cost {w['cost']:.4f}" if w.get("cost") is not None else ""
        unknown = f" (+{w['unknownRequests']} unanswered)" if w["unknownRequests"] else ""
        print(
            f"{w['start']}: {w['sessions']} session(s), {w['requests']} response(s){unknown}, "
            f"{w['inputTokens']} input + {w['outputTokens']} output tokens{cost}"
        )
    return OK


async def label(args: argparse.Namespace) -> int:
    """Set labels of one stored session, or print them."""
    from agent_session.cli.commands import backend, check_exists, diagnose
    from agent_session.governance.labels import labels_of, set_stored_labels

    if args.labels:
        check_exists(args.store)
        await set_stored_labels(args.store, args.id, dict(args.labels))
    store = backend(args.store, read_only=True)
    try:
        examined = await diagnose(store, args.store, args.id)
    finally:
        await store.aclose()
    found = labels_of(examined.session.events)
    text = " ".join(f"{k}={v}" for k, v in sorted(found.items())) or "(no labels)"
    say(args.json, {"id": args.id, "labels": found}, f"{args.id}: {text}")
    return OK


async def sign(args: argparse.Namespace) -> int:
    """Sign the anchors of each chained session; exits 2 when a chain is broken."""
    from agent_session.audit import check_store_log, sign_anchors
    from agent_session.cli.commands import backend, targets

    store = backend(args.store, read_only=True)
    worst = OK
    try:
        for id, _ in targets(args):
            report = await check_store_log(store, id)
            if not report.ok:  # (a broken chain is never signed)
                worst = CORRUPT
                text = f"{id}: not signed: {report.text()}"
                say(args.json, {"id": id, "signed": 0, "problem": report.problem}, text)
                continue
            count = sign_anchors(report, args.key, args.to)
            text = f"{id}: signed {count} new anchor(s) of {len(report.anchors)}"
            say(args.json, {"id": id, "signed": count, "anchors": len(report.anchors)}, text)
    finally:
        await store.aclose()
    return worst


async def audit_key(args: argparse.Namespace) -> int:
    """Write a new key pair."""
    from agent_session.audit import new_key

    private, public = new_key(args.file)
    print(f"wrote {private} (private, 0600) and {public} (public)")
    return OK


async def verify_integrity(args: argparse.Namespace) -> int:
    """``verify --integrity``: each log's chain (and signatures); the worst exit code."""
    from agent_session.audit import check_signatures, check_store_log, read_signatures
    from agent_session.cli.commands import backend, targets

    if args.public_key is not None and args.signatures is None:
        raise UserError("--public-key needs --signatures DIR (where `sign --to` keeps them)")
    store = backend(args.store, read_only=True)
    worst, counts = OK, {"intact": 0, "broken": 0, "not chained": 0}
    try:
        for id, _ in targets(args):
            report = await check_store_log(store, id)
            signed = None
            if args.public_key is not None and report.ok:
                signed = check_signatures(
                    report, args.public_key, read_signatures(args.signatures, id)
                )
            worst = max(worst, _report(args.json, report, signed, counts))
    finally:
        await store.aclose()
    if not args.json:
        summary = ", ".join(f"{n} {what}" for what, n in counts.items() if n) or "none"
        print(f"checked {sum(counts.values())} log(s): {summary}")
    return worst


def verify_export_file(args: argparse.Namespace, path: str) -> int:
    """``verify --integrity FILE`` on an audit export."""
    from agent_session.audit import check_signatures, verify_export

    report, signatures = verify_export(path)
    signed = None
    if args.public_key is not None and report.ok:
        signed = check_signatures(report, args.public_key, signatures)
    return _report(args.json, report, signed, {"intact": 0, "broken": 0, "not chained": 0})


def _report(as_json: bool, report: Any, signed: Any, counts: dict[str, int]) -> int:
    broken = not report.ok or (signed is not None and signed.problem is not None)
    counts["broken" if broken else "intact" if report.anchors else "not chained"] += 1
    value = report.to_json()
    if signed is not None:
        value["signatures"] = {
            "signed": signed.signed,
            "unsigned": signed.unsigned,
            "problem": signed.problem,
        }
    text = f"{report.id}: {report.text()}"
    if signed is not None:
        text += f"; {signed.text()}"
    say(as_json, value, text)
    return CORRUPT if broken else OK


async def export_audit(args: argparse.Namespace) -> int:
    """``export --format audit``: the log's chain as JSON Lines on stdout."""
    from agent_session.audit import audit_lines, read_signatures
    from agent_session.cli.commands import backend

    store = backend(args.store, read_only=True)
    try:
        raw = await store.read_raw(args.id)
    finally:
        await store.aclose()
    if raw is None:
        raise NotFound(f'no session "{args.id}" in {args.store.shown}')
    signatures = read_signatures(args.signatures, args.id) if args.signatures else []
    rules = args.redact or []
    if any(rule != "content" for rule in rules):
        raise UserError(
            "--format audit takes --redact content only (each line is left out whole: its "
            "digest stays, so the chain still verifies)"
        )
    out = sys.stdout
    for line in audit_lines(args.id, raw.content, redact=bool(rules), signatures=signatures):
        out.write(line + "\n")
    return OK


def is_export_argument(args: argparse.Namespace) -> str | None:
    """The file ``verify --integrity`` was given in the store's place (an audit export; a
    SQLite store is named ``sqlite:///...``), if it was."""
    root = getattr(args, "root", None)
    if args.command == "verify" and args.integrity and root and os.path.isfile(root):
        return str(root)
    return None
