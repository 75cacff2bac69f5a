"""One event's ``data`` sealed with its session's key (AES-256-GCM) and opened again.

A sealed event keeps its envelope (``type``, ``seq``, ``time``, the surface fields) and a
``data`` of ``{"sealed": "v1.<key id>.<nonce and ciphertext, base64url>", ...}``: the key id
rides in each sealed value (a SQLite row has no header column for it). What stays in clear,
so budgets, listings, holds and retention work without the key:

- every field of the governance and structure events (:data:`CLEAR_TYPES`): budgets,
  labels, holds, anchors, turn and step brackets, the seed's end;
- of an ``assistant/message``: its ``usage``, ``turn``, ``step`` and ``message.source`` (the
  provider and model that answered), for spend windows.

Guarantees: the ciphertext is bound to the session id, the seq and the type (the associated
data), so a sealed value moved to another event or session does not open; the nonce is
derived from the key, the associated data and the plaintext (HMAC-SHA256, 96 bits), so
sealing the same event twice gives the same bytes (a chain digests what the store writes)
and two different plaintexts never share a nonce in practice; a session that is sealed
fails closed on an event of a sealed type that is not (:func:`open_event`).
"""

from __future__ import annotations

import base64
import hmac
from collections.abc import Mapping
from typing import Any, Final

from agent_session.sealing.keyring import Keyring
from agent_session.session import SessionSealError
from agent_session.session.events import types as t
from agent_session.session.events.event import SessionEvent, with_data
from agent_session.session.json.codec import decode_json, encode_json
from agent_session.session.json.lossless import snapshot

__all__ = [
    "CLEAR_TYPES",
    "SEALED",
    "is_sealed",
    "key_of_value",
    "open_event",
    "seal_event",
    "sealed_value",
]

SEALED: Final = "sealed"
CLEAR_TYPES: Final = frozenset(
    {
        t.AUDIT_ANCHOR,
        t.BUDGET_EXCEEDED,
        t.BUDGET_RESERVED,
        t.BUDGET_SET,
        t.END_SEED,
        t.HOLD_RELEASED,
        t.HOLD_SET,
        t.LABEL_SET,
        t.STEP_END,
        t.STEP_START,
        t.TURN_END,
        t.TURN_START,
    }
)
"""Types whose data is never sealed: they say how the session went, not what was said."""
_CLEAR_KEYS: Final = ("usage", "turn", "step")


def _clear_part(kind: str, data: Any) -> dict[str, Any]:
    if kind != t.ASSISTANT_MESSAGE or not isinstance(data, Mapping):
        return {}
    kept = {key: data[key] for key in _CLEAR_KEYS if key in data}
    message = data.get("message")
    if isinstance(message, Mapping) and isinstance(message.get("source"), Mapping):
        kept["message"] = {"source": message["source"]}
    return kept


def _aad(session_id: str, event: SessionEvent) -> bytes:
    return f"{session_id}\0{event.seq}\0{event.type}".encode()


def is_sealed(event: SessionEvent) -> bool:
    """Whether ``event``'s data is a sealed value (``{"sealed": "v1.<key id>.…"}``)."""
    return sealed_value(event.data) is not None


def sealed_value(data: Any) -> str | None:
    """The sealed value ``data`` holds, if it is one."""
    value = data.get(SEALED) if isinstance(data, Mapping) else None
    return value if isinstance(value, str) and key_of_value(value) is not None else None


def seal_event(keyring: Keyring, kid: str, session_id: str, event: SessionEvent) -> SessionEvent:
    """``event`` with its data sealed (an event of a clear type, or one sealed already, as
    it is)."""
    if event.type in CLEAR_TYPES or is_sealed(event):
        return event
    cipher, nonce_key = keyring.keys(kid, session_id)
    plain = encode_json(event.data)
    aad = _aad(session_id, event)
    nonce = hmac.digest(nonce_key, aad + b"\0" + plain, "sha256")[:12]
    sealed = nonce + cipher.encrypt(nonce, plain, aad)
    value = f"v1.{kid}.{base64.urlsafe_b64encode(sealed).decode().rstrip('=')}"
    data = snapshot({SEALED: value, **_clear_part(event.type, event.data)}, "data")
    return with_data(event, data)


def key_of_value(value: str) -> str | None:
    """The key id a sealed value (``v1.<key id>.<sealed bytes>``) names."""
    parts = value.split(".")
    return parts[1] if len(parts) == 3 and parts[0] == "v1" else None


def open_event(
    keyring: Keyring, session_id: str, event: SessionEvent, *, sealed_session: bool
) -> SessionEvent:
    """``event`` with its data opened.

    Raises:
        SessionSealError: ``sealed_session`` and ``event`` is of a sealed type but not sealed
            (fail closed), a sealed value that does not authenticate, or a key the keyring
            does not hold.
        SessionErasedError: Its key was erased.
    """
    value = sealed_value(event.data)
    if value is None:
        if sealed_session and event.type not in CLEAR_TYPES:
            raise SessionSealError(
                f'session "{session_id}" is sealed, but its event at seq {event.seq} '
                f"({event.type}) is stored in clear: refusing to read it"
            )
        return event
    _, kid, text = value.split(".")
    cipher, _ = keyring.keys(kid, session_id)
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
        plain = cipher.decrypt(raw[:12], raw[12:], _aad(session_id, event))
    except Exception as e:  # (InvalidTag, a bad base64 or a short value)
        raise SessionSealError(
            f'session "{session_id}": the sealed event at seq {event.seq} ({event.type}) '
            "does not open with its key (changed, or moved from another event)"
        ) from e
    return with_data(event, snapshot(decode_json(plain), "data", js_numbers=True))
