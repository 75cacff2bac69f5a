"""``EventLogSaver``: LangGraph's ``BaseCheckpointSaver`` over this library's event log, on any
store (a directory of JSONL logs, ``sqlite:///``, ``postgresql://``); one class serves both
``graph.invoke`` (the sync methods) and ``graph.ainvoke`` (the ``a``-methods).

Guarantees (beyond LangGraph's own savers):

- ``put`` and ``put_writes`` return once what they stored is durable, and every write made
  before them too: a thread's log is one ordered queue flushed as a prefix, so a checkpoint
  on disk never lacks a pending write that was acknowledged before it.
- One writer per thread: a thread this saver wrote stays its own (the store's writer lock)
  until :meth:`release`, :meth:`close` or ``max_open`` other threads were written after it. A
  second worker's write of it, in another process, is refused with
  :class:`~agent_session.SessionCollisionError` naming the holder, instead of both
  succeeding while the checkpoint chain forks; a worker that let a thread go and finds
  another holding it learns so at its next write. Reads take nothing.
- The log keeps everything: the reference still loads it (the events are marked
  ``ignorable``); ``agent-session ls``, ``verify``, ``copy``, ``rm`` and ``show`` work on
  threads as on any session (``show`` names checkpoints and writes, and never turns a
  stored value back into an object).
- ``delete_thread`` deletes the thread's log; ``copy_thread`` writes the target as a fork of
  the whole source log. ``prune`` and ``delete_for_runs`` are not offered: on an append-only
  log they could only be a rewrite of it (``docs/langgraph.md`` says why).
"""

from __future__ import annotations

import asyncio
import os
import random
import threading
from collections.abc import AsyncIterator, Coroutine, Iterator, Mapping, Sequence
from typing import Any, TypeVar

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    get_checkpoint_id,
    get_checkpoint_metadata,
)
from langgraph.checkpoint.serde.base import SerializerProtocol

from agent_session.integrations.held_logs import HeldLogs
from agent_session.integrations.home_loop import HomeLoop
from agent_session.integrations.langgraph.records import (
    LOG_PREFIX,
    Saved,
    Thread,
    Typed,
    Write,
    checkpoint_data,
    log_id,
    thread_of,
    writes_data,
)
from agent_session.session.events.types import LANGGRAPH_CHECKPOINT, LANGGRAPH_WRITES
from agent_session.session.json.lossless import thaw

__all__ = ["EventLogSaver"]

T = TypeVar("T")

_Found = tuple[str, str, str, Saved, Thread, list[Write]]
"""(thread, namespace, checkpoint id, checkpoint, its thread, its pending writes)."""


def _thread_id(config: RunnableConfig) -> str:
    configurable = config.get("configurable") or {}
    if "thread_id" not in configurable:
        raise ValueError('a LangGraph checkpoint config needs configurable["thread_id"]')
    return str(configurable["thread_id"])


def _ns(config: RunnableConfig) -> str:
    return str((config.get("configurable") or {}).get("checkpoint_ns") or "")


def _named(id: str) -> str:
    return f"LangGraph thread {thread_of(id)!r}"


def _matches(metadata: Mapping[str, Any], filter: Mapping[str, Any] | None) -> bool:
    return not filter or all(metadata.get(k) == v for k, v in filter.items())


class EventLogSaver(BaseCheckpointSaver[str]):
    """LangGraph checkpoints kept as crash-safe event logs in ``store`` (what
    :func:`agent_session.open_store` accepts, with ``store_options``), one log per thread.
    Pass it as ``graph.compile(checkpointer=saver)``; close it with :meth:`close` (or
    ``with``/``async with``). It can be used from any thread and any event loop (its store
    runs on a private one)."""

    def __init__(
        self,
        store: str | os.PathLike[str],
        *,
        max_open: int = 256,
        serde: SerializerProtocol | None = None,
        **store_options: Any,
    ) -> None:
        """Raises ``ValueError`` for a store name this build cannot serve or a ``max_open``
        that is not a positive integer; nothing is opened before the first call."""
        from agent_session.stores import parse_store

        spec = parse_store(os.fspath(store))
        super().__init__(serde=serde)
        self._logs = HeldLogs(spec, store_options, max_open, _named)
        self._home: HomeLoop | None = None
        self._home_lock = threading.Lock()

    # --- where the work runs ------------------------------------------------------------

    def _loop(self) -> HomeLoop:
        with self._home_lock:
            if self._home is None:
                self._home = HomeLoop("agent-session langgraph")
            return self._home

    async def _call(self, work: Coroutine[Any, Any, T]) -> T:
        return await self._loop().run(work)

    def _wait(self, work: Coroutine[Any, Any, T]) -> T:
        return self._loop().wait(work)

    # --- writing ------------------------------------------------------------------------

    def _put_data(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> tuple[str, dict[str, Any], RunnableConfig]:
        thread_id, ns = _thread_id(config), _ns(config)
        rest = dict(checkpoint)
        values: Mapping[str, Any] = checkpoint.get("channel_values") or {}
        rest.pop("channel_values", None)
        blobs: list[tuple[str, Any, Typed | None]] = [
            (
                channel,
                version,
                self.serde.dumps_typed(values[channel]) if channel in values else None,
            )
            for channel, version in new_versions.items()
        ]
        full = get_checkpoint_metadata(config, metadata)
        data = checkpoint_data(
            ns,
            checkpoint["id"],
            get_checkpoint_id(config),
            self.serde.dumps_typed(rest),
            full,
            self.serde.dumps_typed(full),
            blobs,
        )
        stored: RunnableConfig = {
            "configurable": {
                "thread_id": thread_id,
                "checkpoint_ns": ns,
                "checkpoint_id": checkpoint["id"],
            }
        }
        return thread_id, data, stored

    def _writes_of(self, writes: Sequence[tuple[str, Any]]) -> list[tuple[int, str, Typed]]:
        return [
            (WRITES_IDX_MAP.get(channel, idx), channel, self.serde.dumps_typed(value))
            for idx, (channel, value) in enumerate(writes)
        ]

    async def _append(self, thread_id: str, type: str, data: dict[str, Any]) -> None:
        await self._logs.append(log_id(thread_id), [(type, data)])

    async def _put_writes(
        self, config: RunnableConfig, writes: list[tuple[int, str, Typed]], task: str, path: str
    ) -> None:
        thread_id, ns = _thread_id(config), _ns(config)
        checkpoint_id = str((config.get("configurable") or {})["checkpoint_id"])
        lid = log_id(thread_id)
        await self._logs.take(lid)
        thread = await self._read(lid)
        assert thread is not None  # (held: read from its live session)
        new = [w for w in writes if not thread.has_write(ns, checkpoint_id, task, w[0])]
        if new:
            data = writes_data(ns, checkpoint_id, task, path, new)
            await self._append(thread_id, LANGGRAPH_WRITES, data)

    # --- reading ------------------------------------------------------------------------

    async def _read(self, lid: str) -> Thread | None:
        """The thread of log ``lid`` as it is now (``None``: no log): a held one's fold is
        kept while it is held, and only the events since are folded in."""
        session = self._logs.held(lid)
        if session is None:
            events = await self._logs.events(lid)
            if events is None:
                return None
            thread = Thread()
        else:
            thread, events = self._logs.kept(lid, Thread), session.events
        thread.fold(events, f'session "{lid}"')
        return thread

    async def _find(
        self,
        config: RunnableConfig | None,
        filter: Mapping[str, Any] | None,
        before: RunnableConfig | None,
        limit: int | None,
        *,
        one: bool = False,
    ) -> list[_Found]:
        """The checkpoints a read selects, newest first per namespace, as their threads
        hold them now (decoded by the caller, off the home loop); with ``one``, the first of
        them in the config's namespace (the root one by default)."""
        threads = (
            [_thread_id(config)]
            if config
            else [t for t in map(thread_of, await self._logs.ids(LOG_PREFIX)) if t is not None]
        )
        want_ns = (config.get("configurable") or {}).get("checkpoint_ns") if config else None
        if one and want_ns is None:
            want_ns = ""
        want_id = get_checkpoint_id(config) if config else None
        before_id = get_checkpoint_id(before) if before else None
        found: list[_Found] = []
        for thread_id in threads:
            thread = await self._read(log_id(thread_id))
            if thread is None:
                continue
            for ns, saved in list(thread.checkpoints.items()):
                if want_ns is not None and ns != want_ns:
                    continue
                for cid in sorted(saved, reverse=True):
                    if (want_id and cid != want_id) or (before_id and cid >= before_id):
                        continue
                    entry = saved[cid]
                    if filter and not _matches(self._metadata(entry), filter):
                        continue
                    if limit is not None and len(found) >= limit:
                        return found
                    found.append(
                        (thread_id, ns, cid, entry, thread, thread.ordered_writes(ns, cid))
                    )
                    if one:
                        return found
        return found

    def _metadata(self, saved: Saved) -> dict[str, Any]:
        if isinstance(saved.metadata, tuple):
            return dict(self.serde.loads_typed(saved.metadata))
        return dict(thaw(saved.metadata))

    def _tuple(self, found: _Found) -> CheckpointTuple:
        thread_id, ns, cid, saved, thread, writes = found
        checkpoint = self.serde.loads_typed(saved.checkpoint)
        values = thread.values(ns, checkpoint.get("channel_versions", {}))
        checkpoint["channel_values"] = {
            channel: self.serde.loads_typed(value) for channel, value in values.items()
        }
        parent = saved.parent

        def config_of(checkpoint_id: str) -> RunnableConfig:
            return {
                "configurable": {
                    "thread_id": thread_id,
                    "checkpoint_ns": ns,
                    "checkpoint_id": checkpoint_id,
                }
            }

        return CheckpointTuple(
            config=config_of(cid),
            checkpoint=checkpoint,
            metadata=self._metadata(saved),  # type: ignore[arg-type]
            parent_config=config_of(parent) if parent else None,
            pending_writes=[(w.task, w.channel, self.serde.loads_typed(w.value)) for w in writes],
        )

    def _get_work(self, config: RunnableConfig) -> Coroutine[Any, Any, list[_Found]]:
        return self._find(config, None, None, None, one=True)

    # --- BaseCheckpointSaver: sync ------------------------------------------------------

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        found = self._wait(self._get_work(config))
        return self._tuple(found[0]) if found else None

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        for found in self._wait(self._find(config, filter, before, limit)):
            yield self._tuple(found)

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        thread_id, data, stored = self._put_data(config, checkpoint, metadata, new_versions)
        self._wait(self._append(thread_id, LANGGRAPH_CHECKPOINT, data))
        return stored

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        self._wait(self._put_writes(config, self._writes_of(writes), task_id, task_path))

    def delete_thread(self, thread_id: str) -> None:
        self._wait(self._logs.delete(log_id(str(thread_id))))

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        self._wait(self._copy(source_thread_id, target_thread_id))

    # --- BaseCheckpointSaver: async -----------------------------------------------------

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        found = await self._call(self._get_work(config))
        return self._tuple(found[0]) if found else None

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        for found in await self._call(self._find(config, filter, before, limit)):
            yield self._tuple(found)

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        thread_id, data, stored = self._put_data(config, checkpoint, metadata, new_versions)
        await self._call(self._append(thread_id, LANGGRAPH_CHECKPOINT, data))
        return stored

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        await self._call(self._put_writes(config, self._writes_of(writes), task_id, task_path))

    async def adelete_thread(self, thread_id: str) -> None:
        await self._call(self._logs.delete(log_id(str(thread_id))))

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        await self._call(self._copy(source_thread_id, target_thread_id))

    async def _copy(self, source: str, target: str) -> None:
        await self._logs.copy(log_id(str(source)), log_id(str(target)))

    def get_next_version(self, current: str | None, channel: None) -> str:
        """``<32-digit counter>.<16-digit random>``, as LangGraph's own savers make them:
        increasing, and different on two branches forked from one checkpoint (a thread's
        values are kept per channel and version)."""
        number = 0 if current is None else int(str(current).split(".")[0])
        return f"{number + 1:032}.{random.random():016}"

    # --- threads held here --------------------------------------------------------------

    def release(self, thread_id: str) -> None:
        """Stop writing the thread here, so that another process may (its writes are
        durable already)."""
        self._wait(self._logs.let_go(log_id(str(thread_id))))

    async def arelease(self, thread_id: str) -> None:
        """:meth:`release`, awaited."""
        await self._call(self._logs.let_go(log_id(str(thread_id))))

    def close(self) -> None:
        """Let every thread go and close the store (the saver opens it again if used)."""
        with self._home_lock:
            home, self._home = self._home, None
        if home is None:
            return
        try:
            home.wait(self._logs.close())
        finally:
            home.close()

    async def aclose(self) -> None:
        """:meth:`close`, awaited."""
        await asyncio.to_thread(self.close)

    def __enter__(self) -> EventLogSaver:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> EventLogSaver:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
