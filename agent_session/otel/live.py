"""The live exporter: ``runtime.install(otel_exporter(store, endpoint))`` sends each turn of the
runtime's sessions as it ends, once it is durable, and at start everything the receiver has not
acknowledged: the turns a crash cut included (the process that died could not send them; the
next one does).

Guarantees: at least once, as ``agent-session export-otel`` (the same cursor, the same span
ids); the agent never waits for the receiver (exports run in the background, one at a time, off
the event loop); a receiver that fails is logged once per failure and retried at the next turn
or the next start, never raised into the agent.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from agent_session.session.live.hooks import SESSION_EVENT, takes_runs
from agent_session.session.persistence.redaction import scrub

if TYPE_CHECKING:
    from agent_session.otel.spans import Content
    from agent_session.see.prices import PriceTable
    from agent_session.session.live.runtime import PluginScope

__all__ = ["OtelExporter", "otel_exporter"]

log = logging.getLogger("agent_session.otel")


class OtelExporter:
    """The plugin :func:`otel_exporter` makes (install it with ``runtime.install``)."""

    def __init__(
        self,
        spec: Any,
        sink: Any,
        content: Content,
        redact: Callable[[str], str],
        prices: PriceTable | None = None,
    ) -> None:
        self._spec = spec
        self._sink = sink
        self._shown = (content, redact, prices)
        self._queue: asyncio.Queue[Any] | None = None
        self._worker: asyncio.Task[None] | None = None

    def install(self, scope: PluginScope) -> Callable[[], None]:
        """Watch for turn ends, and start the catch-up (now, or at the first turn's end
        when no event loop runs yet)."""

        @takes_runs
        def ended(session: Any, event: Any) -> None:
            if getattr(event, "type", None) == "turn/end":
                with contextlib.suppress(RuntimeError):  # no loop: the next start sends it
                    self._start(scope).put_nowait(session)

        scope.observe(SESSION_EVENT, ended)
        with contextlib.suppress(RuntimeError):
            self._start(scope)
        return self._stop

    async def drain(self) -> None:
        """Wait until everything handed to the exporter so far was sent (or failed and was
        logged): before a process exits, say."""
        if self._queue is not None:
            await self._queue.join()

    def _start(self, scope: PluginScope) -> asyncio.Queue[Any]:
        if self._queue is None or self._worker is None or self._worker.done():
            loop = asyncio.get_running_loop()  # (raises RuntimeError without one)
            self._queue = asyncio.Queue()
            self._queue.put_nowait(None)  # the catch-up of everything not acknowledged
            self._worker = loop.create_task(
                _work(self._spec, self._sink, self._queue, self._shown, scope)
            )
        return self._queue

    def _stop(self) -> None:
        if self._worker is not None:
            self._worker.cancel()
        self._sink.close()


def otel_exporter(
    store: str,
    endpoint: str | None = None,
    *,
    headers: Mapping[str, str] | None = None,
    content: Content = "off",
    redact: Callable[[str], str] | None = None,
    timeout: float | None = None,
    attempts: int = 5,
    prices: PriceTable | None = None,
) -> OtelExporter:
    """A plugin exporting the sessions of ``store`` (the name given to ``open_store``) to the
    OTLP/HTTP receiver at ``endpoint`` (its traces URL, or a base URL); the receiver, its
    headers and timeout not given are the OpenTelemetry SDK's environment's
    (:mod:`agent_session.otel.settings`). With ``content="full"``, every text put on a span
    goes through ``redact`` (after the masking of the secrets this process knows of). With
    ``prices`` (:func:`agent_session.see.prices.read_prices`), each model request's span has
    its cost.

    Raises:
        TraceSettingsError: The receiver's URL or timeout cannot be used.
    """
    from agent_session.otel.export import OtlpSink
    from agent_session.otel.settings import otlp_settings
    from agent_session.stores import parse_store

    settings = otlp_settings(endpoint=endpoint, headers=headers, timeout=timeout)
    sink = OtlpSink(
        settings.url, headers=settings.headers, timeout=settings.timeout, attempts=attempts
    )

    def masked(text: str) -> str:
        text = scrub(text)
        return redact(text) if redact is not None else text

    return OtelExporter(parse_store(store), sink, content, masked, prices)


async def _work(
    spec: Any,
    sink: Any,
    queue: asyncio.Queue[Any],
    shown: tuple[Content, Callable[[str], str], PriceTable | None],
    scope: PluginScope,
) -> None:
    """Export what the queue names, one at a time: ``None`` the whole store, a session its
    turns past the cursor once they are durable. The cursors are opened once the store
    exists, and kept for the worker's life."""
    from agent_session.cli.commands import check_exists
    from agent_session.cli.exits import NotFound
    from agent_session.otel.cursor import Cursors, cursors_for
    from agent_session.otel.export import (
        Exported,
        export_store,
        first_unsent,
        fork_link,
        send_turns,
    )
    from agent_session.otel.lineage_spans import adopted, adoptions
    from agent_session.otel.spans import turn_traces

    content, redact, prices = shown
    cursors: Cursors | None = None
    try:
        while True:
            item = await queue.get()
            try:
                sessions = scope.runtime.sessions
                if item is not None and sessions.is_live(item):
                    await sessions.flush(item)  # durable first: a lost turn/end is a crash
                if cursors is None:
                    try:
                        check_exists(spec)
                    except NotFound:
                        continue  # nothing stored yet: nothing to send
                    cursors = cursors_for(spec)
                if item is None:
                    await export_store(
                        spec, sink, content=content, redact=redact, cursors=cursors, prices=prices
                    )
                    continue
                header = item.header
                cursor = cursors.position(sink.name, item.id, header.created_at)
                after = first_unsent(cursor, header)
                parent = sessions.get(header.parent_session or "")
                incarnation = parent.header.created_at if parent is not None else None
                traces = turn_traces(
                    item.id,
                    header.created_at,
                    _unsent_events(item.events, after),
                    after_seq=after,
                    content=content,
                    redact=redact,
                    parent=fork_link(header, item.events, cursor, incarnation),
                    prices=prices,
                )
                if header.origin == "subagent" and parent is not None:  # (in its trace)
                    ran = adoptions(parent.id, parent.header.created_at, parent.events, item.id)
                    traces = adopted(traces, ran)
                turns = [(t.end_seq, t.spans) for t in traces]
                await asyncio.to_thread(
                    send_turns, sink, cursors, item.id, header.created_at, turns, Exported()
                )
            except asyncio.CancelledError:
                raise
            except Exception as e:  # the agent goes on; the next turn or start sends it
                log.warning("OpenTelemetry export to %s failed: %s", sink.endpoint, scrub(str(e)))
            finally:
                queue.task_done()
    finally:
        if cursors is not None:
            cursors.close()


def _unsent_events(events: Any, after: int) -> list[Any]:
    """The events from the request context in force at the first turn past ``after`` on
    (a backward scan: a long log is not read whole at every turn's end)."""
    first = len(events)
    at = len(events) - 1
    while at > after:  # back to the first turn/start past the cursor
        if events[at].type == "turn/start":
            first = at
        at -= 1
    context = first - 1
    while context >= 0 and events[context].type != "request/context":
        context -= 1
    head = [events[context]] if context >= 0 else []
    return head + list(events[first:])
