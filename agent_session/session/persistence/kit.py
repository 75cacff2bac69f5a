"""Everything a persistence backend imports, in one module: the :class:`Storage` base class it
derives from, the values its methods return, the service that holds it
(:class:`SessionPersistence`) and the helpers the four backends of this project share.

A backend is a ``Storage`` subclass plus, if it likes, a convenience constructor::

    class MyPersistence(SessionPersistence):
        def __init__(self, where, *, repair: Repair = recovery.closers) -> None:
            super().__init__(MyStorage(where), repair=repair)

The other modules of ``session.persistence`` are internal: their names may change between
releases; these do not without notice. The contract suite a backend must pass is
:mod:`agent_session.testing`.
"""

from agent_session.session.persistence.api import (
    Diagnosis,
    ListedSession,
    RawArtifact,
    SessionSnapshot,
    SessionTail,
    StoredLog,
    StoredSession,
    StoredTail,
)
from agent_session.session.persistence.failpoints import armed, failpoint
from agent_session.session.persistence.futures import follow
from agent_session.session.persistence.io_threads import IOThreads
from agent_session.session.persistence.ledger import Repair
from agent_session.session.persistence.redaction import (
    install_log_filter,
    mask_store,
    remember_store,
    scrub,
)
from agent_session.session.persistence.service import SessionPersistence
from agent_session.session.persistence.storage import Storage, check_text_id, tail_of
from agent_session.session.persistence.write_behind import Scheduler

__all__ = [
    "Diagnosis",
    "IOThreads",
    "ListedSession",
    "RawArtifact",
    "Repair",
    "Scheduler",
    "SessionPersistence",
    "SessionSnapshot",
    "SessionTail",
    "Storage",
    "StoredLog",
    "StoredSession",
    "StoredTail",
    "armed",
    "check_text_id",
    "failpoint",
    "follow",
    "install_log_filter",
    "mask_store",
    "remember_store",
    "scrub",
    "tail_of",
]
