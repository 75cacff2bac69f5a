"""The JSONL backend: one append-only, fsync'd log per session, byte-compatible with the
TypeScript reference."""

from agent_session.persistence_jsonl.backend import JsonlPersistence
from agent_session.persistence_jsonl.fileio import FileOps
from agent_session.persistence_jsonl.layout import encode_segment, project_key

__all__ = ["FileOps", "JsonlPersistence", "encode_segment", "project_key"]
