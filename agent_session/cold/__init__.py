"""A cold tier for a store's stopped sessions on S3-compatible object storage (extra
``[s3]``): :func:`.archive.archive_store` moves them there, and a store opened by name reads
them and brings one back when it is resumed (:mod:`.tier`)."""

from agent_session.cold.archive import Archived, archive_store

__all__ = ["Archived", "archive_store"]
