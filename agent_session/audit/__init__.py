"""Tamper evidence for stored logs: signed anchors (:mod:`.signing`, extra ``[audit]``) and
the self-checking audit export (:mod:`.export`). The chain itself, and the check of a log's
stored lines, are :mod:`agent_session.session.chain`'s."""

from agent_session.audit.export import FORMAT, audit_lines, verify_export
from agent_session.audit.signing import (
    SignatureCheck,
    SigningError,
    check_signatures,
    new_key,
    read_signatures,
    sign_anchors,
    signatures_path,
)
from agent_session.audit.stored import check_store_log

__all__ = [
    "FORMAT",
    "SignatureCheck",
    "SigningError",
    "audit_lines",
    "check_signatures",
    "check_store_log",
    "new_key",
    "read_signatures",
    "sign_anchors",
    "signatures_path",
    "verify_export",
]
