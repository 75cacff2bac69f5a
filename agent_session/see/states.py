"""The words a session's state is said in (``ls``, ``verify``, ``serve``): one place, light to
import (the command line's grammar offers them as choices)."""

from __future__ import annotations

from typing import Final

__all__ = ["AWAITING_APPROVAL", "AWAITING_BUDGET", "LISTED_STATES"]

AWAITING_APPROVAL: Final = "awaiting-approval"
"""The state of a session whose last turn is parked until a tool call is decided."""
AWAITING_BUDGET: Final = "awaiting-budget"
"""The state of a session whose last turn is parked until its budget is raised."""
LISTED_STATES: Final = (
    "balanced",
    "open",
    "interrupted",
    AWAITING_APPROVAL,
    AWAITING_BUDGET,
    "torn tail",
)
"""The states ``ls`` gives a readable session, in order (an entry that is not one is listed
with its problem instead)."""
