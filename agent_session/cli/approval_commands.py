"""``agent-session approvals``, ``approve`` and ``reject``: list the parked tool calls of a store
and decide them (:mod:`agent_session.deciders`). Each returns its exit code from the table in
:mod:`agent_session.cli.exits`: a call that is not parked (or already decided) is not found (3);
a digest that does not match, or a deadline that passed, is refused as a usage error (4); a
live writer holding the session is 2."""

from __future__ import annotations

import argparse
import datetime
from typing import TYPE_CHECKING

from agent_session.cli.commands import check_exists, open_backend
from agent_session.cli.exits import CORRUPT, NOT_FOUND, OK, UserError
from agent_session.cli.output import json_line, print_table

if TYPE_CHECKING:
    from agent_session.session.events.parked import ParkedCall

__all__ = ["approvals", "decide"]

_ARGUMENTS_SHOWN = 48
"""How many characters of a call's arguments the table shows (``--json`` has them all)."""


def _when(ms: int | None) -> str:
    if ms is None:
        return "-"
    moment = datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC)
    return moment.strftime("%Y-%m-%d %H:%M:%S")


async def approvals(args: argparse.Namespace) -> int:
    """One row (or JSON line) per parked call of the store, or of the sessions named."""
    from agent_session.agent_loop.parking import DIGEST_PREFIX
    from agent_session.deciders import pending_approvals
    from agent_session.session import SessionNotFoundError

    check_exists(args.store)
    backend = open_backend(args.store, read_only=True)
    try:
        found = await pending_approvals(backend, args.ids or None)
    except SessionNotFoundError as e:
        raise UserError(str(e), code=NOT_FOUND) from None
    finally:
        await backend.aclose()
    if args.json:
        for pending in found:
            print(json_line(pending.to_json()))
        return OK
    if not found:
        print("no tool call waits for approval")
        return OK
    header = ["SESSION", "CALL", "TOOL", "ARGUMENTS", "DIGEST", "ASKED (UTC)", "EXPIRES", "STATE"]
    table = [[*header, "REASON"]]
    for pending in found:
        call = pending.call
        arguments = call.arguments if isinstance(call.arguments, str) else json_line(call.arguments)
        if len(arguments) > _ARGUMENTS_SHOWN:
            arguments = arguments[: _ARGUMENTS_SHOWN - 1] + "…"
        cells = [pending.session_id, call.call_id, call.tool_name, arguments]
        cells += [call.arguments_digest[:DIGEST_PREFIX], _when(call.asked_at)]
        cells += [_when(call.expires_at), _state(call), call.reason or ""]
        table.append(cells)
    print_table(table)
    return OK


def _state(call: ParkedCall) -> str:
    """What waits: nobody decided, or the decision the agent carries out when it resumes."""
    from agent_session.agent_loop.parking import mismatch

    if call.decision is None:
        return "waiting" if call.matches else "waiting (arguments differ: reject it)"
    if mismatch(call) is not None:
        return "decided allowed-once (arguments differ: refused when it resumes)"
    return f"decided {call.decision.outcome}"


async def decide(args: argparse.Namespace) -> int:
    """``approve`` or ``reject`` one parked call; say what was decided."""
    from agent_session.agent_loop.approval import Outcome
    from agent_session.deciders import decide_stored, who
    from agent_session.session import (
        ApprovalExpiredError,
        ApprovalMismatchError,
        ApprovalNotPendingError,
        SessionCollisionError,
        SessionNotFoundError,
    )

    check_exists(args.store)
    outcome: Outcome = "allowed-once" if args.command == "approve" else "rejected"
    backend = open_backend(args.store)
    try:
        call = await decide_stored(
            backend,
            args.id,
            args.call_id,
            outcome,
            by=args.by or who(),
            reason=args.reason,
            digest=getattr(args, "digest", None),
        )
    except (ApprovalNotPendingError, SessionNotFoundError) as e:
        raise UserError(str(e), code=NOT_FOUND) from None
    except (ApprovalMismatchError, ApprovalExpiredError) as e:
        raise UserError(str(e)) from None
    except SessionCollisionError as e:
        raise UserError(
            f"{e} (a live process holds the session: decide there, or once it exits)",
            code=CORRUPT,
        ) from None
    finally:
        await backend.aclose()
    print(
        f'{args.id}: call "{call.call_id}" (tool "{call.tool_name}") decided {outcome}; the '
        "agent carries it out when it resumes"
    )
    return OK
