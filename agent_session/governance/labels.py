"""Labels of a session (``tenant``, ``user``, anything), kept as ``label/set`` events of its
log, so no store needs a new column and a crash never loses one: set on a live session
(:func:`set_labels`) or a stored one from any process (:func:`set_stored_labels`,
``agent-session label``), read back with :func:`labels_of`.

Guarantees: a key is letters, digits, ``_``, ``-`` and ``.`` (so a query can name it
safely); a value is a string; ``None`` removes a key; a stored session a live writer holds
is refused (``SessionCollisionError``); bad labels write nothing (``ValueError``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from agent_session.deciders import append_judged
from agent_session.session.events.event import SessionEvent
from agent_session.session.events.eventlog import is_run, iter_parts
from agent_session.session.events.holds import records_in_lines
from agent_session.session.events.types import LABEL_SET
from agent_session.session.live.session import Session

if TYPE_CHECKING:
    from agent_session.session.persistence.service import SessionPersistence
    from agent_session.stores import StoreSpec

__all__ = ["check_labels", "labels_in_lines", "labels_of", "set_labels", "set_stored_labels"]


def check_labels(labels: Mapping[str, str | None]) -> dict[str, str | None]:
    """``labels`` checked (see the module docstring).

    Raises:
        ValueError: Naming the label that is wrong.
    """
    if not labels:
        raise ValueError("no labels given")
    out: dict[str, str | None] = {}
    for key, value in labels.items():
        if not isinstance(key, str) or not key or not all(c.isalnum() or c in "_-." for c in key):
            raise ValueError(f"label key {key!r}: use letters, digits, _, - and .")
        if value is not None and not isinstance(value, str):
            raise ValueError(f"label {key}: a value is a string (or None to remove it)")
        out[key] = value
    return out


def set_labels(session: Session, labels: Mapping[str, str | None]) -> None:
    """Set (or, with ``None``, remove) labels of a live session."""
    session.append(LABEL_SET, {"labels": check_labels(labels)})


async def set_stored_labels(
    store: str | StoreSpec | SessionPersistence,
    session_id: str,
    labels: Mapping[str, str | None],
) -> None:
    """Set labels of a stored session from any process (``""`` as a value removes the
    key, as ``agent-session label ID KEY=`` does).

    Raises:
        ValueError: Bad labels (nothing is written).
        SessionCollisionError: A live writer holds the session.
    """
    given = check_labels({k: (v if v != "" else None) for k, v in labels.items()})

    def judge(_: Sequence[SessionEvent]) -> tuple[str, dict[str, Any]]:
        return LABEL_SET, {"labels": given}

    await append_judged(store, session_id, judge)


def labels_of(events: Iterable[Any]) -> dict[str, str]:
    """A log's labels now (the last value of each key, removed keys left out)."""
    return _fold(
        event.data for event in iter_parts(events) if not is_run(event) and event.type == LABEL_SET
    )


def labels_in_lines(content: bytes) -> dict[str, str]:
    """:func:`labels_of` a log's stored JSONL text (``read_raw``), each line read on its own
    (``session.events.holds.records_in_lines``)."""
    return _fold(data for _, _, _, data in records_in_lines(content, (LABEL_SET,)))


def _fold(datas: Iterable[Mapping[str, Any]]) -> dict[str, str]:
    found: dict[str, str] = {}
    for data in datas:
        labels = data.get("labels")
        if not isinstance(labels, Mapping):
            continue
        for key, value in labels.items():
            if isinstance(value, str):
                found[key] = value
            else:
                found.pop(key, None)
    return found
