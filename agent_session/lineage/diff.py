"""Comparing two sessions by what their agents did (two runs of one task, or a session and its
replay): the first divergence in the tool calls (name and arguments, in order), else in the
tool results (content, error flag and code: crash repair's answers and a settlement's are
results too), else the first difference in the text the model wrote. Prose alone is a
difference of text, not of behaviour: the same calls with the same results are the same
behaviour, however the model worded its answers. Ids and times are never compared."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from agent_session.session.events.types import ASSISTANT_MESSAGE, TOOL_CALL, TOOL_RESULT

__all__ = ["Compared", "Difference", "compare"]

Kind = Literal["tool call", "tool result", "text"]


@dataclass(frozen=True)
class Difference:
    """Where two sessions first differ in one kind of thing."""

    kind: Kind
    index: int
    """Which one of its kind, from 0 (the third tool call: 2)."""
    seqs: tuple[int | None, int | None]
    """Its seq in each session (``None``: that session has no such one)."""
    where: str
    """The turn and step (and call) it belongs to, in the first session that has it."""
    said: tuple[str | None, str | None]
    """What each session had there."""


@dataclass(frozen=True)
class Compared:
    """Two sessions compared."""

    calls: int
    """The first session's tool calls (the second's are as many when the behaviour is the
    same)."""
    results: int
    """The first session's tool results."""
    behaviour: Difference | None
    """The first divergence of behaviour (a tool call, else a tool result); ``None``: the
    same calls with the same results."""
    text: Difference | None
    """The first difference of the model's text."""

    @property
    def same_behaviour(self) -> bool:
        """Whether the agents did the same (the text may still differ)."""
        return self.behaviour is None


@dataclass(frozen=True)
class _Item:
    seq: int
    where: str
    key: str
    """What is compared."""


def _where(data: Mapping[str, Any], call: Any = None) -> str:
    said = f"turn {data.get('turn')}, step {data.get('step')}"
    return f"{said}, call {call}" if call is not None else said


def _arguments(text: Any) -> str:
    """Arguments as compared: parsed and written canonically where they are JSON."""
    try:
        return json.dumps(json.loads(text), sort_keys=True, ensure_ascii=False)
    except (TypeError, ValueError):
        return str(text)


def _items(events: Sequence[Any]) -> dict[Kind, list[_Item]]:
    items: dict[Kind, list[_Item]] = {"tool call": [], "tool result": [], "text": []}
    for event in events:
        data = event.data if isinstance(event.data, Mapping) else {}
        if event.type == TOOL_CALL:
            key = f"{data.get('name')}({_arguments(data.get('arguments'))})"
            items["tool call"].append(_Item(event.seq, _where(data, data.get("callId")), key))
        elif event.type == TOOL_RESULT:
            message = data.get("message") or {}
            block = (message.get("content") or [{}])[0]
            text = "".join(
                str(part.get("text", json.dumps(part, sort_keys=True)))
                for part in block.get("content") or ()
            )
            error = (data.get("error") or {}).get("code")
            flag = " (error" + (f" {error}" if error else "") + ")" if block.get("isError") else ""
            call = (message.get("source") or {}).get("callId")
            items["tool result"].append(_Item(event.seq, _where(data, call), text + flag))
        elif event.type == ASSISTANT_MESSAGE:
            message = data.get("message") or {}
            text = "".join(
                str(block.get("text", ""))
                for block in message.get("content") or ()
                if block.get("type") == "text"
            )
            if text:
                items["text"].append(_Item(event.seq, _where(data), text))
    return items


def _first(kind: Kind, a: list[_Item], b: list[_Item]) -> Difference | None:
    for index in range(max(len(a), len(b))):
        left = a[index] if index < len(a) else None
        right = b[index] if index < len(b) else None
        if left is not None and right is not None and left.key == right.key:
            continue
        shown = left if left is not None else right
        assert shown is not None
        return Difference(
            kind,
            index,
            (left.seq if left else None, right.seq if right else None),
            shown.where,
            (left.key if left else None, right.key if right else None),
        )
    return None


def compare(a: Sequence[Any], b: Sequence[Any]) -> Compared:
    """Compare the events of two sessions (see the module docstring)."""
    left, right = _items(a), _items(b)
    behaviour = _first("tool call", left["tool call"], right["tool call"]) or _first(
        "tool result", left["tool result"], right["tool result"]
    )
    return Compared(
        len(left["tool call"]),
        len(left["tool result"]),
        behaviour,
        _first("text", left["text"], right["text"]),
    )
