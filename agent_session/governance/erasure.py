"""Erasure of a sealed session: :func:`erase` deletes its keys from the keyring, so its
content is unreadable in the store and in every copy, archive and backup of it, while its
seqs, sizes and chain still verify (the stored bytes are untouched).

Guarantees: refused while a legal hold stands or a live writer holds the session (nothing
is erased); a session stored in clear is refused (``rm`` or ``purge`` delete it); the keys
are gone for good when it returns, and a receipt (:mod:`.receipts`) says which keys, when,
and the SHA-256 of the sealed bytes that can no longer be read.
"""

from __future__ import annotations

import hashlib
import re
from typing import TYPE_CHECKING, Any

from agent_session.governance.receipts import receipts_for, utc_stamp
from agent_session.session import SessionError, SessionNotFoundError
from agent_session.session.events.holds import check_not_held, holds_in_lines

if TYPE_CHECKING:
    from agent_session.sealing.keyring import Keyring
    from agent_session.session.persistence.service import SessionPersistence
    from agent_session.stores import StoreSpec

__all__ = ["erase", "sealing_keys"]

_SEALED = re.compile(rb'"sealed":"v1\.([0-9a-f]+)\.')


def sealing_keys(content: bytes) -> list[str]:
    """The key ids a log's stored text (``read_raw``) is sealed with."""
    return sorted({kid.decode() for kid in _SEALED.findall(content)})


async def erase(
    store: StoreSpec, backend: SessionPersistence, id: str, keyring: Keyring
) -> tuple[dict[str, Any], str]:
    """Erase the sealed session ``id``; its receipt and where receipts are kept.

    Raises:
        SessionNotFoundError: It is not stored.
        SessionHeldError: A legal hold stands on it.
        SessionCollisionError: A live writer holds it.
        SessionError: It is stored in clear.
    """
    storage = backend.storage
    taken = await storage.acquire(id)  # (refused while a writer holds it)
    try:
        raw = await backend.read_raw(id)
        if raw is None:
            raise SessionNotFoundError(f'session "{id}" not found')
        check_not_held(holds_in_lines(raw.content), id)
        kids = sealing_keys(raw.content)
        if not kids:
            raise SessionError(
                f'session "{id}" is stored in clear: erasure deletes a sealed session\'s key '
                "(rm or purge delete a session in clear); nothing was erased"
            )
        erased = [kid for kid in kids if keyring.erase(kid, id)]
    finally:
        if taken:
            await storage.release(id)
    receipt = {
        "receipt": "erase",
        "id": id,
        "state": "erased",
        "keys": kids,
        "newlyErased": erased,
        "at": utc_stamp(),
        "sealed": {
            "lines": raw.content.count(b"\n"),
            "bytes": len(raw.content),
            "sha256": hashlib.sha256(raw.content).hexdigest(),
        },
    }
    receipts = receipts_for(store)
    try:
        receipts.add(receipt)
        return receipt, receipts.where
    finally:
        receipts.close()
