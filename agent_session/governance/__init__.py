"""Governance kept in the log: spend budgets a crash cannot reset (:mod:`.budgets`), labels
(:mod:`.labels`) and spend across sessions per window (:mod:`.windows`). Tamper evidence is
:mod:`agent_session.audit`'s."""

from agent_session.governance.budgets import budget_report, set_budget, set_stored_budget
from agent_session.governance.labels import labels_of, set_labels, set_stored_labels
from agent_session.governance.windows import spend_windows

__all__ = [
    "budget_report",
    "labels_of",
    "set_budget",
    "set_labels",
    "set_stored_budget",
    "set_stored_labels",
    "spend_windows",
]
