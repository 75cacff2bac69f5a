"""The grammar of the governance commands: ``budget``, ``label``, ``sign`` and ``audit-key``
(the rest of the command line is in :mod:`agent_session.cli.arguments`)."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping

from agent_session.cli.arguments_looking import Command, add_redact, age, prices_file, whole

__all__ = [
    "GOVERNANCE",
    "GOVERNANCE_EXAMPLES",
    "STORE_AFTER_ACTION",
    "add_governance",
    "label_pair",
]

GOVERNANCE = ("budget", "label", "sign")
"""The commands of this module that take a store."""
STORE_AFTER_ACTION = ("budget",)
"""Commands whose store comes after their action word (``budget set STORE ID``)."""
GOVERNANCE_EXAMPLES = {
    "budget": "agent-session budget raise ./agent-sessions chat-1 --output-tokens 50000",
    "label": "agent-session label ./agent-sessions chat-1 tenant=acme user=ana",
    "sign": "agent-session sign ./agent-sessions --key /etc/audit/anchors.key --to /var/audit",
    "audit-key": "agent-session audit-key /etc/audit/anchors.key",
}


def label_pair(text: str) -> tuple[str, str]:
    """``KEY=VALUE`` (a key of letters, digits, ``_``, ``-`` and ``.``)."""
    key, sep, value = text.partition("=")
    if not sep or not key or not all(c.isalnum() or c in "_-." for c in key):
        raise argparse.ArgumentTypeError(
            f"not KEY=VALUE with a key of letters, digits, _, - and .: {text!r}"
        )
    return key, value


def _amount(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not value >= 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a finite number ≥ 0, not {text}")
    return value


def add_governance(
    command: Command,
    add_store: Callable[[argparse.ArgumentParser], None],
    made: Mapping[str, argparse.ArgumentParser],
) -> None:
    """Add the commands through ``command(name, help, description)`` (``add_store`` adds a
    store's arguments to a parser: for ``budget``, after its action), and the integrity
    options to ``verify`` and ``export`` (of ``made``, the commands made so far)."""
    verify = made["verify"]
    verify.add_argument(
        "--integrity",
        action="store_true",
        help="check each log's hash chain instead (exit 2 names the first seq that does not "
        "match); STORE may also be an audit export file",
    )
    verify.add_argument("--public-key", metavar="FILE", help="with --integrity: check signatures")
    verify.add_argument(
        "--signatures", metavar="DIR", help="with --public-key: where `sign --to` keeps them"
    )
    export = made["export"]
    add_redact(export)
    export.add_argument(
        "--whole",
        action="store_true",
        help="the history as if no compaction had summarized it: every message a summary "
        "replaced, in order, and no summary",
    )
    export.add_argument(
        "--signatures", metavar="DIR", help="--format audit: carry the anchors' signatures"
    )
    budget = command(
        "budget",
        "set, raise or show a session's budget; spend per label",
        "set: the session's budget from now on (limits not given are dropped); raise: "
        "higher limits over the current ones (never lower), which lets a turn parked over "
        "its budget go on when the agent resumes; show: the budget, what was spent (usage "
        "recorded per response, plus requests a crash cut, charged at their max-tokens "
        "bound) and what is left; spend: the store's recorded spend per window, for the "
        "sessions with --label (one aggregate query on SQLite and PostgreSQL). A session a "
        "live writer holds is refused: set its budget in that process.",
    )
    budget.add_argument("action", choices=["set", "raise", "show", "spend"])
    add_store(budget)
    budget.add_argument("id", nargs="?", help="the session id (not for spend)")
    for flag, key in (
        ("--input-tokens", "inputTokens"),
        ("--output-tokens", "outputTokens"),
        ("--total-tokens", "totalTokens"),
    ):
        budget.add_argument(flag, dest=key, type=whole, metavar="N", help=f"limit {key}")
    budget.add_argument("--cost", type=_amount, metavar="X", help="limit cost (needs --prices)")
    budget.add_argument(
        "--prices",
        type=prices_file,
        metavar="FILE",
        help="a price table (JSON; see docs/see.md): costs count",
    )
    budget.add_argument("--reason", help="why (kept in the log)")
    budget.add_argument("--by", help="who sets it (default: user@host)")
    budget.add_argument(
        "--label", type=label_pair, metavar="K=V", help="spend: only sessions labelled so"
    )
    budget.add_argument(
        "--per", choices=["hour", "day"], default="day", help="spend: the window (default day)"
    )
    budget.add_argument("--since", type=age, metavar="AGE", help="spend: only the last AGE")
    budget.add_argument("--json", action="store_true", help="one JSON object")

    label = command(
        "label",
        "label a session (tenant, user, anything)",
        "Add or change labels of a stored session (KEY=VALUE; KEY= removes one), kept as an "
        "event of its log; with none, print its labels. A session a live writer holds is "
        "refused: label it in that process (agent_session.set_labels).",
    )
    label.add_argument("id", help="the session id")
    label.add_argument("labels", nargs="*", type=label_pair, metavar="K=V")
    label.add_argument("--json", action="store_true", help="one JSON object")

    sign = command(
        "sign",
        "sign chained logs' anchors with a key writers lack",
        "Check each session's chain and sign its anchors not signed yet with an Ed25519 "
        "private key, appending the signatures to DIR/<id>.anchors.jsonl. Run it as a party "
        "the agents' processes are not (another account or host): then verify --integrity "
        "--public-key shows whether a signed anchor was changed since. A broken chain is "
        "never signed.",
    )
    sign.add_argument("ids", nargs="*", metavar="ID", help="sessions to sign (default: all)")
    sign.add_argument("--key", required=True, metavar="FILE", help="the private key (PEM)")
    sign.add_argument("--to", required=True, metavar="DIR", help="where signatures are kept")
    sign.add_argument("--json", action="store_true", help="one JSON object per session")

    keys = command(
        "audit-key",
        "make an Ed25519 key pair for signing anchors",
        "Write a new private key to FILE (mode 0600; an existing file is never overwritten) "
        "and its public key to FILE.pub. Keep the private key where the agents' processes "
        "cannot read it.",
    )
    keys.add_argument("file", metavar="FILE", help="the private key's path")
