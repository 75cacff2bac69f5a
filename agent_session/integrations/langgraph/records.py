"""LangGraph checkpoints and writes as events, both ways (pure: no LangGraph import, no I/O).

A thread's log holds one ``langgraph/checkpoint`` event per ``put`` and one
``langgraph/writes`` event per ``put_writes`` (both :data:`MARKED_IGNORABLE`, so the
reference skips them and still loads the log). A serialized value is kept as the serializer
gave it, ``[type, base64 of its bytes]``, and is only ever turned back into an object by the
saver's own serializer: nothing here unpickles or decodes a value.

- checkpoint: ``{"ns", "id", "parent", "checkpoint": typed (the checkpoint without its
  channel values), "metadata": the metadata as JSON, or "metadataTyped": typed when it is
  not JSON, "blobs": [[channel, version, typed | null], ...]}`` (a ``null`` blob: the
  channel had no value at that version);
- writes: ``{"ns", "checkpoint", "task", "path", "writes": [[idx, channel, typed], ...]}``.

:class:`Thread` folds a thread's events into what ``get_tuple`` and ``list`` answer, with
the rules of LangGraph's own savers: a later ``put`` of a checkpoint id replaces the earlier;
a write of a regular channel (``idx >= 0``) is kept once per ``(task, idx)`` (the first one
wins), a special one (``idx < 0``: error, interrupt ...) is replaced by a later one.
"""

from __future__ import annotations

import base64
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from agent_session.integrations.log_ids import joined, split
from agent_session.session.errors import JsonValueError, SessionPersistenceCorruptionError
from agent_session.session.events.types import LANGGRAPH_CHECKPOINT, LANGGRAPH_WRITES
from agent_session.session.json.lossless import snapshot

__all__ = [
    "LOG_PREFIX",
    "Saved",
    "Thread",
    "Typed",
    "Write",
    "checkpoint_data",
    "log_id",
    "thread_of",
    "typed_of",
    "writes_data",
]

LOG_PREFIX: Final = "langgraph:"
"""What the id of a thread's log starts with."""

Typed = tuple[str, bytes]
"""A value as LangGraph's serializer gives it: its type and its bytes."""


def log_id(thread_id: str) -> str:
    """The id of the log of LangGraph thread ``thread_id``."""
    return joined(LOG_PREFIX, [thread_id])


def thread_of(id: str) -> str | None:
    """The thread id of a log :func:`log_id` named; ``None`` for another id."""
    parts = split(LOG_PREFIX, id)
    return parts[0] if parts is not None and len(parts) == 1 else None


def _json_typed(value: Typed) -> list[str]:
    return [value[0], base64.b64encode(value[1]).decode("ascii")]


def typed_of(value: Any, where: str) -> Typed:
    """The serialized value ``[type, base64]`` stands for."""
    if (
        not isinstance(value, list | tuple)
        or len(value) != 2
        or not all(isinstance(part, str) for part in value)
    ):
        raise SessionPersistenceCorruptionError(f"{where}: not a [type, base64] pair")
    try:
        return value[0], base64.b64decode(value[1], validate=True)
    except ValueError:
        raise SessionPersistenceCorruptionError(f"{where}: its bytes are not base64") from None


def checkpoint_data(
    ns: str,
    checkpoint_id: str,
    parent: str | None,
    checkpoint: Typed,
    metadata: Mapping[str, Any],
    metadata_typed: Typed,
    blobs: Iterable[tuple[str, Any, Typed | None]],
) -> dict[str, Any]:
    """The data of the event of one ``put`` (the metadata as JSON when it is, else typed)."""
    data: dict[str, Any] = {"ns": ns, "id": checkpoint_id, "parent": parent}
    data["checkpoint"] = _json_typed(checkpoint)
    try:
        data["metadata"] = snapshot(dict(metadata), "metadata")
    except (JsonValueError, TypeError):
        data["metadataTyped"] = _json_typed(metadata_typed)
    data["blobs"] = [
        [channel, version, None if value is None else _json_typed(value)]
        for channel, version, value in blobs
    ]
    return data


def writes_data(
    ns: str, checkpoint_id: str, task: str, path: str, writes: Iterable[tuple[int, str, Typed]]
) -> dict[str, Any]:
    """The data of the event of one ``put_writes``."""
    return {
        "ns": ns,
        "checkpoint": checkpoint_id,
        "task": task,
        "path": path,
        "writes": [[idx, channel, _json_typed(value)] for idx, channel, value in writes],
    }


@dataclass(frozen=True, slots=True)
class Saved:
    """One stored checkpoint."""

    seq: int
    parent: str | None
    checkpoint: Typed
    metadata: Mapping[str, Any] | Typed
    """The metadata as JSON, or typed when it was not JSON."""


@dataclass(frozen=True, slots=True)
class Write:
    """One pending write."""

    task: str
    channel: str
    value: Typed
    path: str
    idx: int


@dataclass
class Thread:
    """What a thread's log holds, folded (see the module docstring)."""

    checkpoints: dict[str, dict[str, Saved]] = field(default_factory=dict)
    """namespace -> checkpoint id -> checkpoint, in the order first put."""
    blobs: dict[tuple[str, str, Any], Typed | None] = field(default_factory=dict)
    """(namespace, channel, version) -> value (``None``: none at that version)."""
    writes: dict[tuple[str, str], dict[tuple[str, int], Write]] = field(default_factory=dict)
    """(namespace, checkpoint id) -> (task, idx) -> write."""
    folded: int = 0
    """How many events of the log are folded in."""

    def fold(self, events: Iterable[Any], where: str) -> None:
        """Fold in ``events`` (the log's events from :attr:`folded` on; others are skipped).

        Raises:
            SessionPersistenceCorruptionError: An event of this saver without its fields,
                named by ``where`` and its seq.
        """
        fold = {LANGGRAPH_CHECKPOINT: self._checkpoint, LANGGRAPH_WRITES: self._writes}
        for event in events:
            if event.seq < self.folded:
                continue
            self.folded = event.seq + 1
            into = fold.get(event.type)
            if into is None:
                continue
            here = f"{where} seq {event.seq}"
            try:
                into(event.seq, event.data, here)
            except SessionPersistenceCorruptionError:
                raise
            except (KeyError, TypeError, ValueError) as e:
                raise SessionPersistenceCorruptionError(
                    f"{here}: a {event.type} event without its fields ({e!r})"
                ) from None

    def _checkpoint(self, seq: int, data: Any, where: str) -> None:
        ns, cid, parent = data["ns"], data["id"], data["parent"]
        metadata: Mapping[str, Any] | Typed = (
            data["metadata"] if "metadata" in data else typed_of(data["metadataTyped"], where)
        )
        checkpoint = typed_of(data["checkpoint"], where)
        for channel, version, value in data["blobs"]:
            self.blobs[(ns, channel, version)] = None if value is None else typed_of(value, where)
        self.checkpoints.setdefault(ns, {})[cid] = Saved(seq, parent, checkpoint, metadata)

    def _writes(self, seq: int, data: Any, where: str) -> None:
        task, path = data["task"], data["path"]
        stored = self.writes.setdefault((data["ns"], data["checkpoint"]), {})
        for idx, channel, value in data["writes"]:
            if idx >= 0 and (task, idx) in stored:
                continue
            stored[(task, idx)] = Write(task, channel, typed_of(value, where), path, idx)

    def has_write(self, ns: str, checkpoint_id: str, task: str, idx: int) -> bool:
        """Whether a regular write ``(task, idx)`` of the checkpoint is stored (a second one
        would be ignored)."""
        return idx >= 0 and (task, idx) in self.writes.get((ns, checkpoint_id), {})

    def ordered_writes(self, ns: str, checkpoint_id: str) -> list[Write]:
        """The checkpoint's pending writes, in the order LangGraph applies them (task path,
        task id, index)."""
        stored = self.writes.get((ns, checkpoint_id), {})
        return sorted(stored.values(), key=lambda w: (w.path, w.task, w.idx))

    def values(self, ns: str, versions: Mapping[str, Any]) -> dict[str, Typed]:
        """The serialized channel values of a checkpoint with ``versions``."""
        out: dict[str, Typed] = {}
        for channel, version in versions.items():
            value = self.blobs.get((ns, channel, version))
            if value is not None:
                out[channel] = value
        return out
