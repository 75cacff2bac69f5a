"""``JsonlPersistence``: the persistence service over :class:`JsonlStorage` (the service
holding a JSONL storage), with the reference's repair as its default."""

from __future__ import annotations

import os

from agent_session.persistence_jsonl.encoding import Compression
from agent_session.persistence_jsonl.fileio import FileOps
from agent_session.persistence_jsonl.reader import DEFAULT_MAX_LOG_BYTES
from agent_session.persistence_jsonl.storage import JsonlStorage
from agent_session.recovery import closers as default_repair
from agent_session.session import SessionHeader
from agent_session.session.persistence.kit import Repair, Scheduler, SessionPersistence

__all__ = ["JsonlPersistence"]


class JsonlPersistence(SessionPersistence):
    """Sessions as ``<root>/<project dir>/<encoded id>/session.jsonl`` or, compressed,
    ``session.jsonl.zstd`` (``compression``: ``auto`` reads and appends each log in its own
    encoding and creates new ones as ``new_session_compression``, plain by default; ``none``
    or ``zstd`` accept only that one, as the reference does), byte-compatible with the
    reference. The guarantees, and where the I/O runs, are
    :class:`persistence_jsonl.storage.JsonlStorage`'s; this class only builds it and hands it
    to the service."""

    def __init__(
        self,
        root: str | os.PathLike[str],
        *,
        write_batch_max_delay_ms: int = 200,
        prepared_session_cache_size: int = 5,
        pack_chunks: bool = True,
        repair: Repair = default_repair,
        ops: FileOps | None = None,
        scheduler: Scheduler | None = None,
        inline_fsync_budget_ms: float = 2.0,
        max_log_bytes: int = DEFAULT_MAX_LOG_BYTES,
        compression: Compression = "auto",
        new_session_compression: str | None = None,
    ) -> None:
        storage = JsonlStorage(
            root,
            pack_chunks=pack_chunks,
            ops=ops,
            inline_fsync_budget_ms=inline_fsync_budget_ms,
            max_log_bytes=max_log_bytes,
            compression=compression,
            new_session_compression=new_session_compression,
        )
        super().__init__(
            storage,
            repair=repair,
            write_batch_max_delay_ms=write_batch_max_delay_ms,
            prepared_session_cache_size=prepared_session_cache_size,
            scheduler=scheduler,
        )
        self.jsonl = storage
        """The JSONL storage this backend holds."""

    @property
    def root(self) -> str:
        """The absolute store root."""
        return self.jsonl.root

    @property
    def ops(self) -> FileOps:
        """The system-call seam."""
        return self.jsonl.ops

    def locate(self, header: SessionHeader) -> str:
        """The transcript path of a session (it may not exist yet)."""
        return self.jsonl.locate(header)
