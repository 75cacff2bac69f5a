"""A hash chain over each log's stored lines, anchored in the log at checkpoints: its
definition (:mod:`.chain`), the writer's anchoring (:mod:`.anchoring`) and the offline check
(:mod:`.integrity`). Turned on per store: ``open_store(..., integrity=True)``."""

from agent_session.session.chain.anchoring import Anchoring
from agent_session.session.chain.chain import CHAIN, Chain, header_digest, line_digest
from agent_session.session.chain.integrity import (
    IntegrityReport,
    Unit,
    check_chain,
    stored_units,
    unit_of,
)

__all__ = [
    "CHAIN",
    "Anchoring",
    "Chain",
    "IntegrityReport",
    "Unit",
    "check_chain",
    "header_digest",
    "line_digest",
    "stored_units",
    "unit_of",
]
