"""How SDK items become events: the writing half of
:class:`agent_session.integrations.openai_agents.session.EventLogSession` (its guarantees are
stated there)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from agent_session.integrations.openai_agents.approvals import decided_in_process, parked_calls
from agent_session.integrations.openai_agents.history import HistoryIndex
from agent_session.integrations.openai_agents.items import (
    assistant_data,
    item_kind,
    tool_result_data,
    user_data,
)
from agent_session.integrations.turns import (
    BracketCursor,
    OpenTurn,
    end_turn,
    next_step,
    open_turn,
    record_call,
    start_turn,
)
from agent_session.session.errors import JsonValueError, SessionDataError, SessionEventError
from agent_session.session.events.surface import SurfaceReplace
from agent_session.session.events.types import (
    ASSISTANT_MESSAGE,
    FRAMEWORK_ITEM,
    TOOL_RESULT,
    USER_MESSAGE,
)
from agent_session.session.json.lossless import snapshot
from agent_session.session.live.session import Session

__all__ = ["ItemWriter"]


class ItemWriter:
    """Appends the events of SDK items to a live session."""

    model: str
    """The model named by assistant messages."""
    _pending: list[dict[str, Any]]
    """What the hooks wrote that ``add_items`` will repeat."""
    _brackets: BracketCursor
    """The live session's turn brackets, read as its log grows."""
    _index: HistoryIndex
    """The live session's item history, kept as its log grows."""
    _usage: dict[str, int] | None = None
    """The usage of the response the hooks record next (its ``assistant/message`` has it)."""

    def _turn(self, session: Session) -> OpenTurn | None:
        """The open turn (found without reading the history before it)."""
        return open_turn(session.events, self._brackets.marks(session))

    def _write(
        self, session: Session, batch: list[dict[str, Any]], *, from_hooks: bool = False
    ) -> None:
        """Append the events of ``batch`` (refusing an orphan output or a value no event can
        hold before anything)."""
        try:
            snapshot(batch, "items")
        except JsonValueError as e:
            raise SessionDataError(
                f'session "{session.id}": an SDK item cannot be stored: {e}; nothing of the '
                "batch was written"
            ) from None
        turn = self._turn(session)
        # what a re-add may repeat: the running turn's items (ids repeat across runs: a
        # scripted model's, a provider's placeholder)
        entries = self._index.since(session, turn.start) if turn is not None else []
        calls = {e.item["call_id"] for e in entries if e.item.get("type") == "function_call"}
        answered = {
            e.item["call_id"] for e in entries if e.item.get("type") == "function_call_output"
        }
        askable = set(turn.calls if turn else ()) | {
            i.get("call_id") for i in batch if i.get("type") == "function_call"
        }
        for item in batch:
            call_id = item.get("call_id")
            if item_kind(item) == "output" and call_id not in answered | askable:
                raise SessionEventError(
                    f'session "{session.id}": function_call_output for call {call_id!r} '
                    "answers no function_call of the running turn; nothing of the batch was "
                    "written (an orphan output makes every later model request fail)"
                )
        pending = [] if from_hooks else self._pending
        group: list[dict[str, Any]] = []
        responding = False  # only kept items since the last response: it may go on
        for item in batch:
            if item in pending:
                pending.remove(item)  # written by the hooks before the SDK saved it
                continue
            kind = item_kind(item)
            if kind == "model":
                # (a message's id is the provider's, or a test model's "1": never a key; a
                # call's id pairs it with its output, so a second one would be unanswerable)
                call_id = item.get("call_id") if item.get("type") == "function_call" else None
                if call_id is None or call_id not in calls:
                    group.append(item)
                    if call_id is not None:
                        calls.add(call_id)
                continue
            responding = self._response(session, group, responding)
            group = []
            if kind == "user":
                self._user(session, item)
                responding = False
            elif kind == "output":
                if item["call_id"] not in answered:
                    self._result(session, item)
                    answered.add(item["call_id"])
                responding = False
            else:
                session.append(FRAMEWORK_ITEM, {"item": item})
        self._response(session, group, responding)
        if not from_hooks and batch and item_kind(batch[-1]) == "model":
            self._end_if_final(session, batch[-1])

    def _run_input(self, session: Session, items: list[dict[str, Any]]) -> None:
        """Record the user items that end a run's input and are not in the log yet (a
        streamed run saves its input only after its first request started)."""
        tail: list[dict[str, Any]] = []
        for item in reversed(items):
            if item_kind(item) != "user":
                break
            tail.insert(0, item)
        if not tail:
            return
        # a tail of user items can only repeat items of the last turn (an earlier one ended
        # on a model item); runs at once interleave theirs, so each item of the tail is
        # missing only as often as the turn has fewer copies of it
        since = self._brackets.marks(session).start_index
        recorded = [
            entry.item for entry in self._index.since(session, -1 if since is None else since)
        ]
        for item in tail:
            if item in recorded:
                recorded.remove(item)
                continue
            self._user(session, item)
            self._pending.append(item)

    def _user(self, session: Session, item: dict[str, Any]) -> None:
        turn = self._turn(session)
        if turn is None or turn.answered_any:
            start_turn(session, turn, self._brackets.marks(session))
            self._pending.clear()
        else:
            next_step(session, turn, new=False)
        session.append(USER_MESSAGE, user_data(item), surface_op="append")

    def _response(self, session: Session, group: list[dict[str, Any]], responding: bool) -> bool:
        """Record a model response's items as one ``assistant/message``: in a new step,
        unless ``responding`` (the same response went on after a kept item such as a hosted
        tool call). Returns whether a response is now open (or still was)."""
        if not group:
            return responding
        turn = next_step(
            session,
            self._turn(session),
            new=not responding,
            marks=self._brackets.marks(session),
        )
        data = assistant_data(group, turn.number, turn.last_step, self.model)
        if self._usage is not None:
            data["usage"], self._usage = self._usage, None
        session.append(ASSISTANT_MESSAGE, data, surface_op="append", source_event_seqs=[])
        return True

    def _result(self, session: Session, item: dict[str, Any]) -> None:
        turn = self._turn(session)
        call_id = item["call_id"]
        if turn is None or call_id not in turn.calls:
            raise SessionEventError(
                f'session "{session.id}": function_call_output for call {call_id!r} arrived '
                "after the turn that asked for it ended"
            )
        if any(c.call_id == call_id for c in parked_calls(session.events[turn.start :])):
            decided_in_process(session, turn, call_id, "rejected")  # (the SDK's RunState)
        call_seq = record_call(session, turn, call_id)  # saved after its body ran: now
        data = tool_result_data(item, turn.number, turn.calls[call_id][0])
        session.append(TOOL_RESULT, data, surface_op="append", source_event_seqs=[call_seq])

    def _end_if_final(self, session: Session, last: Mapping[str, Any]) -> None:
        """Close the turn when the run ended on an assistant message with nothing open."""
        turn = self._turn(session)
        if last.get("type") not in (None, "message") or turn is None or turn.unanswered:
            return
        end_turn(session, turn)  # (what the hooks recorded for a run still going stays due)

    def _close_for(self, session: Session, removed: list[dict[str, Any]]) -> None:
        """Before ``removed`` items leave the history: when one is a call the open turn still
        waits on, close the turn (interrupted) so that nothing answers that call later (an
        answer to a call the history no longer has is an orphan every request fails on)."""
        turn = self._turn(session)
        if turn is None:
            return
        waiting = set(turn.unanswered)
        if any(i.get("type") == "function_call" and i.get("call_id") in waiting for i in removed):
            end_turn(session, turn, "interrupted")

    def _replace(
        self, session: Session, start: int, end: int, sources: Iterable[int], rest: list[Any]
    ) -> None:
        turn = self._turn(session)
        last = self._brackets.marks(session).start_number
        number = turn.number if turn else last if type(last) is int and last > 0 else 1
        step = turn.last_step if turn and turn.last_step else 1
        session.append(
            ASSISTANT_MESSAGE,
            assistant_data(rest, number, step, self.model),
            surface_op=SurfaceReplace(start=start, end=end),
            source_event_seqs=list(sources),
        )
