"""The logs and fixtures the contract suite's cases share: wire-shaped messages, headers, turns,
and the base of every contract class (its ``backend`` fixture, over your ``kit``)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from agent_session.session import Session
from agent_session.session.events.event import register_event_type
from agent_session.session.persistence.kit import SessionPersistence
from agent_session.testing.kits import Kit

__all__ = [
    "ContractBase",
    "assistant",
    "closed_turn",
    "detached",
    "header",
    "open_turn",
    "user",
    "wire",
    "with_calls",
]


def user(text: str = "hi", id: str = "u1") -> dict[str, Any]:
    """A user message in wire shape."""
    return {
        "content": [{"type": "text", "text": text}],
        "source": {"kind": "user"},
        "role": "user",
        "id": id,
    }


def assistant(
    *, text: str | None = "ok", calls: tuple[str, ...] = (), id: str = "a1"
) -> dict[str, Any]:
    """An assistant message in wire shape, asking for ``read_file`` once per call id."""
    content: list[dict[str, Any]] = []
    if text is not None:
        content.append({"type": "text", "text": text})
    content += [
        {"type": "tool-call", "id": c, "name": "read_file", "arguments": "{}"} for c in calls
    ]
    return {
        "role": "assistant",
        "content": content,
        "source": {"kind": "model", "provider": "p", "model": "m"},
        "id": id,
    }


register_event_type("plugin/test")  # an extension type the cases store and load


def header(id: str = "s", **extra: Any) -> dict[str, Any]:
    """A session header in wire shape."""
    return {"version": 0, "id": id, "createdAt": 1000, "delegationDepth": 0, **extra}


def closed_turn(session: Session, turn: int = 1) -> None:
    """Append one whole turn (a user message and an answer) to ``session``."""
    session.append("turn/start", {"turn": turn})
    session.append("step/start", {"turn": turn, "step": 1})
    session.append("user/message", user(id=f"u{turn}"), surface_op="append")
    session.append(
        "assistant/message",
        {"turn": turn, "step": 1, "message": assistant(id=f"a{turn}")},
        surface_op="append",
        source_event_seqs=[],
    )
    session.append("step/end", {"turn": turn, "step": 1})
    session.append("turn/end", {"turn": turn, "reason": {"kind": "completed"}})


def detached(id: str = "s", build: Callable[[Session], None] = closed_turn) -> Session:
    """A session outside any runtime, built by ``build``."""
    session = Session.create(id, clock=lambda: 5)
    build(session)
    return session


def wire(events: Any) -> list[dict[str, Any]]:
    """Events as wire dicts."""
    return [e.to_json() for e in events]


def open_turn(session: Session) -> None:
    """A closed turn, then a turn left open mid-step (as a crash leaves it)."""
    closed_turn(session)
    session.append("turn/start", {"turn": 2})
    session.append("step/start", {"turn": 2, "step": 1})


def with_calls(recorded: tuple[str, ...]) -> Callable[[Session], None]:
    """A turn whose message asks for ``c1`` and ``c2``; ``recorded`` get a ``tool/call``."""

    def build(session: Session) -> None:
        session.append("turn/start", {"turn": 1})
        session.append("step/start", {"turn": 1, "step": 1})
        session.append("user/message", user(), surface_op="append")
        session.append(
            "assistant/message",
            {"turn": 1, "step": 1, "message": assistant(calls=("c1", "c2"))},
            surface_op="append",
            source_event_seqs=[],
        )
        for call in recorded:
            session.append(
                "tool/call",
                {"turn": 1, "step": 1, "callId": call, "name": "read_file", "arguments": "{}"},
            )

    return build


class ContractBase:
    """The fixtures every contract class uses. Subclass a contract and define ``kit``."""

    @pytest.fixture
    def kit(self) -> Kit:
        raise NotImplementedError("define a kit fixture that returns your backend's Kit")

    @pytest.fixture
    async def backend(self, kit: Kit) -> AsyncIterator[SessionPersistence]:
        instance = kit.make()
        yield instance
        await instance.aclose()
