"""Sealed sessions: content encrypted at rest with a key per session, so erasing a session
(deleting its key) leaves every copy of its content unreadable (:mod:`.keyring`,
:mod:`.seal`, :mod:`.storage`; ``open_store(..., keyring=...)``)."""

from agent_session.sealing.keyring import KEYRING_ENV, MASTER_KEY_ENV, Keyring, keyring_from_env
from agent_session.sealing.storage import SealedStorage

__all__ = ["KEYRING_ENV", "MASTER_KEY_ENV", "Keyring", "SealedStorage", "keyring_from_env"]
