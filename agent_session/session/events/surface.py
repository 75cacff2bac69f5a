"""The surface: the ordered list of events the model sees.

Only ``user/message``, ``assistant/message`` and ``tool/result`` enter it, each with a
``surfaceOp``: ``"append"`` pushes the event, ``{op: "replace", start, end}`` swaps a range of
current nodes for the event. Every rule is checked before anything changes, so a rejected event
leaves log and surface untouched. Messages are the reference's texts.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Literal

from pydantic import ConfigDict

from agent_session.session.errors import SessionEventError
from agent_session.session.events.types import ASSISTANT_MESSAGE, TOOL_RESULT, USER_MESSAGE
from agent_session.session.events.wire import WireModel
from agent_session.session.json.codec import comparison_key
from agent_session.session.json.lossless import MAX_SAFE_INTEGER, is_safe_int

if TYPE_CHECKING:
    from agent_session.session.events.event import SessionEvent

__all__ = [
    "SURFACE_EVENT_TYPES",
    "Surface",
    "SurfaceOp",
    "SurfaceReplace",
    "SurfaceView",
    "parse_surface_metadata",
    "projected_message",
]

SURFACE_EVENT_TYPES: Final = frozenset({USER_MESSAGE, ASSISTANT_MESSAGE, TOOL_RESULT})
"""The only types that enter the surface; they must carry ``surfaceOp``."""


class SurfaceReplace(WireModel):
    """Replace the current surface nodes ``start..end`` (seqs, inclusive) with this event."""

    model_config = ConfigDict(extra="forbid")

    op: Literal["replace"] = "replace"
    start: int
    """Seq of the first shadowed surface node."""
    end: int
    """Seq of the last shadowed surface node."""


SurfaceOp = Literal["append"] | SurfaceReplace
"""How a surface event changes the surface."""


@dataclass(frozen=True, slots=True)
class SurfaceView:
    """A read-only snapshot of the surface."""

    nodes: tuple[int, ...]
    """Seqs of the surface events, in model order."""
    replace_generation: int
    """How many replacements have been applied; changes whenever history is rewritten."""


def _fail(event_type: str, detail: str) -> SessionEventError:
    return SessionEventError(f'session event "{event_type}" {detail}')


def parse_surface_metadata(
    event_type: str, seq: int, raw_op: Any, raw_sources: Any
) -> tuple[SurfaceOp | None, tuple[int, ...] | None]:
    """Check the event-local surface rules and return the typed ``surfaceOp`` and sources.

    Rules: surface types require ``surfaceOp``, other types carry neither field; the op is
    exactly ``"append"`` or ``{op: "replace", start, end}`` with seq values; sources are an array
    of distinct non-negative safe integers below ``seq``, empty only on ``assistant/message``.
    """
    eligible = event_type in SURFACE_EVENT_TYPES
    if not eligible:
        if raw_op is not None:
            raise _fail(event_type, "is not surface-eligible and cannot carry surfaceOp")
        if raw_sources is not None:
            raise _fail(event_type, "is not surface-eligible and cannot carry sourceEventSeqs")
        return None, None
    if raw_op is None:
        raise _fail(event_type, "is surface-eligible and requires a surfaceOp marker")
    op = _parse_op(event_type, raw_op)
    return op, _parse_sources(event_type, seq, raw_sources)


def _parse_op(event_type: str, raw: Any) -> SurfaceOp:
    if raw == "append" and isinstance(raw, str):
        return "append"
    if isinstance(raw, SurfaceReplace):
        raw = raw.to_json()
    if not isinstance(raw, Mapping) or raw.get("op") != "replace":
        raise _fail(event_type, "carries an invalid surfaceOp")
    start, end = raw.get("start"), raw.get("end")
    if set(raw) != {"op", "start", "end"} or not all(
        is_safe_int(v) and v >= 0 for v in (start, end)
    ):
        raise _fail(event_type, "carries an invalid replace surfaceOp")
    return SurfaceReplace(start=start, end=end)


def _parse_sources(event_type: str, seq: int, raw: Any) -> tuple[int, ...] | None:
    if raw is None:
        return None
    kind = raw.__class__
    if (  # (the usual ones skip the ABC checks)
        kind is not tuple
        and kind is not list
        and (not isinstance(raw, Sequence) or isinstance(raw, str | bytes))
    ):
        raise _fail(event_type, "sourceEventSeqs must be an array")
    if not raw:
        if event_type != ASSISTANT_MESSAGE:
            raise _fail(event_type, "sourceEventSeqs must not be empty except on assistant/message")
        return ()
    sources = tuple(raw)
    if len(sources) == 1:  # (a tool result's one call: the usual case, checked directly)
        valid = is_safe_int(sources[0]) and sources[0] >= 0
    else:  # (each check a C loop: a compaction's summary cites every message it replaces)
        valid = set(map(type, sources)) == {int} and 0 <= min(sources) <= max(sources) <= (
            MAX_SAFE_INTEGER
        )
        if valid and len(set(sources)) != len(sources):
            raise _fail(event_type, "sourceEventSeqs must not contain duplicates")
    if not valid:
        raise _fail(event_type, "sourceEventSeqs must contain non-negative safe integers")
    if max(sources) >= seq:
        source = next(s for s in sources if s >= seq)
        raise _fail(
            event_type,
            f"sourceEventSeqs must reference earlier events: {source} >= current seq {seq}",
        )
    return sources


def _without_result_content(data: Any) -> Any:
    """``tool/result`` data with the inner block's ``content`` removed, for comparison."""
    if not isinstance(data, Mapping):
        return data
    message = data.get("message")
    if not isinstance(message, Mapping):
        return data
    blocks = message.get("content")
    if isinstance(blocks, Sequence) and len(blocks) == 1 and isinstance(blocks[0], Mapping):
        block = {k: v for k, v in blocks[0].items() if k != "content"}
        message = {**message, "content": [block]}
    return {**data, "message": message}


class Surface:
    """The live surface state of one session: node seqs in model order and a replace
    generation. ``check`` validates a candidate; ``apply`` commits a checked one."""

    __slots__ = ("_nodes", "_replace_generation")

    def __init__(self) -> None:
        self._nodes: list[int] = []
        self._replace_generation = 0

    @property
    def nodes(self) -> list[int]:
        """The live node list (do not mutate; use :meth:`view` for a snapshot)."""
        return self._nodes

    @property
    def replace_generation(self) -> int:
        """How many replacements have been applied."""
        return self._replace_generation

    @classmethod
    def of_nodes(cls, nodes: Sequence[int]) -> Surface:
        """A surface holding ``nodes`` (seqs, in model order), with no replacement counted:
        the surface a log read from a compaction boundary starts from."""
        surface = cls()
        surface._nodes = list(nodes)
        return surface

    def copy(self) -> Surface:
        """An independent surface in the same state."""
        twin = Surface()
        twin._nodes = list(self._nodes)
        twin._replace_generation = self._replace_generation
        return twin

    def view(self) -> SurfaceView:
        """An immutable snapshot."""
        return SurfaceView(tuple(self._nodes), self._replace_generation)

    def check(
        self,
        event_type: str,
        op: SurfaceOp | None,
        sources: tuple[int, ...] | None,
        data: Any,
        events: Sequence[SessionEvent],
    ) -> None:
        """Raise :class:`SessionEventError` if a ``replace`` cannot apply to the current
        surface. ``append`` and non-surface events always apply."""
        if not isinstance(op, SurfaceReplace):
            return
        nodes = self._nodes
        start_at = self._position(op.start, "start")
        end_at = self._position(op.end, "end")
        if start_at > end_at:
            raise SessionEventError(
                f"surface replace: start seq {op.start} is after end seq {op.end}"
            )
        shadowed = nodes[start_at : end_at + 1]
        cited = set(sources or ())
        missing = [seq for seq in shadowed if seq not in cited]
        if missing:
            raise SessionEventError(
                "surface replace: sourceEventSeqs must include every shadowed surface node; "
                f"missing {', '.join(map(str, missing))}"
            )
        if event_type == TOOL_RESULT:
            prefix = "tool/result surface replacement"
            if len(shadowed) != 1:
                raise SessionEventError(f"{prefix} must rewrite exactly one current node")
            target = events[shadowed[0]]
            if target.type != TOOL_RESULT:
                raise SessionEventError(f"{prefix} must target a current tool/result")
            before = comparison_key(_without_result_content(target.data))
            if before != comparison_key(_without_result_content(data)):
                raise SessionEventError(f"{prefix} may change only content")

    def _position(self, seq: int, which: str) -> int:
        try:
            return self._nodes.index(seq)
        except ValueError:
            raise SessionEventError(
                f"surface replace: {which} seq {seq} not found in surface"
            ) from None

    def apply(self, seq: int, op: SurfaceOp | None) -> None:
        """Commit an event already accepted by :meth:`check`."""
        if op is None:
            return
        if op == "append":
            self._nodes.append(seq)
            return
        assert isinstance(op, SurfaceReplace)
        start_at = self._nodes.index(op.start)
        end_at = self._nodes.index(op.end)
        self._nodes[start_at : end_at + 1] = [seq]
        self._replace_generation += 1


def projected_message(event: SessionEvent) -> Any:
    """The message a surface event projects into the model's history, or ``None``:
    ``user/message`` its data, ``assistant/message`` and ``tool/result`` their
    ``data.message``; an assistant message with empty content projects nothing."""
    data = event.data
    if event.type == USER_MESSAGE:
        return data
    if event.type in (ASSISTANT_MESSAGE, TOOL_RESULT) and isinstance(data, Mapping):
        message = data.get("message")
        if event.type == ASSISTANT_MESSAGE and isinstance(message, Mapping):
            content = message.get("content")
            if isinstance(content, Sequence) and len(content) == 0:
                return None
        return message
    return None
