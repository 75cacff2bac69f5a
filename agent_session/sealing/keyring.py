"""The keys of sealed sessions: one key per session, derived with HKDF-SHA256 from a master
key the user supplies and a random 32-byte salt kept in a keyring directory, one file per
key id. Erasing a session deletes its salt: with the master key alone its key cannot be
derived again, so every copy of its sealed content (a backup, an archive, a ``copy``) stays
unreadable from then on.

Guarantees: a new key's file is durable (synced, then its directory) before a sealed line
that needs it is written; a key file is ``0600`` in a ``0700`` directory; an erased key is
overwritten with zeros and synced before it is unlinked, and a tombstone names the session
and the time, so a read says "erased" rather than "missing"; a missing key or master key
fails closed (:class:`SessionSealError`), never as plaintext. Keep the keyring out of the
logs' backups (the point of erasure is that the logs' copies outlive it), and the master key
in a secret store.
"""

from __future__ import annotations

import base64
import json
import os
import secrets
from pathlib import Path
from typing import Any

from agent_session.beside_logs.replace_file import replace_durably, sync_directory
from agent_session.governance.receipts import utc_stamp
from agent_session.session import SessionErasedError, SessionSealError

__all__ = ["KEYRING_ENV", "MASTER_KEY_ENV", "Keyring", "keyring_from_env"]

KEYRING_ENV = "AGENT_SESSION_KEYRING"
"""The keyring directory the command line and ``open_store`` use when none is given."""
MASTER_KEY_ENV = "AGENT_SESSION_MASTER_KEY_FILE"
"""The file that holds the master key (32 or more random bytes)."""
_INFO = b"agent-session sealed content v1 "


_LOADED: list[tuple[Any, Any, Any]] = []


def _crypto() -> tuple[Any, Any, Any]:
    if _LOADED:
        return _LOADED[0]
    try:
        from cryptography.hazmat.primitives import hashes
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM
        from cryptography.hazmat.primitives.kdf.hkdf import HKDF
    except ImportError as e:
        raise SessionSealError(
            "sealed sessions need the cryptography package: "
            f"pip install 'agent-session-runtime[encryption]' ({e})"
        ) from None
    _LOADED.append((hashes, AESGCM, HKDF))
    return _LOADED[0]


class Keyring:
    """Per-session keys in ``directory``, derived from ``master_key`` (raw bytes, 32 or more;
    ``None``: this keyring can erase keys but not read or seal)."""

    def __init__(self, directory: str | os.PathLike[str], master_key: bytes | None) -> None:
        if master_key is not None and (not isinstance(master_key, bytes) or len(master_key) < 32):
            raise ValueError("the master key must be 32 or more random bytes")
        self.directory = Path(directory)
        self._master = master_key
        self._keys: dict[str, tuple[Any, bytes]] = {}

    @classmethod
    def from_files(cls, directory: str | os.PathLike[str], master_key_file: str | None) -> Keyring:
        """A keyring on ``directory`` with the master key read from ``master_key_file``.

        Raises:
            ValueError: The file holds fewer than 32 bytes.
            OSError: It cannot be read.
        """
        master = Path(master_key_file).read_bytes() if master_key_file else None
        return cls(directory, master)

    def _file(self, kid: str, suffix: str) -> Path:
        if not kid.isalnum():
            raise SessionSealError(f"not a key id: {kid!r}")
        return self.directory / f"{kid}.{suffix}"

    def new_key(self, session_id: str) -> str:
        """Make a key for ``session_id``, durably; its id."""
        self._need_master()
        kid = secrets.token_hex(12)
        os.makedirs(self.directory, mode=0o700, exist_ok=True)
        record = {"session": session_id, "salt": base64.b64encode(secrets.token_bytes(32)).decode()}
        replace_durably(str(self._file(kid, "key")), json.dumps(record).encode())
        return kid

    def keys(self, kid: str, session_id: str) -> tuple[Any, bytes]:
        """The content cipher (AES-256-GCM, keyed) and the nonce key of ``kid`` (for
        ``session_id``).

        Raises:
            SessionErasedError: The key was erased.
            SessionSealError: No master key, or the keyring has no such key.
        """
        found = self._keys.get(kid)
        if found is not None:
            return found
        self._need_master()
        try:
            record = json.loads(self._file(kid, "key").read_bytes())
        except FileNotFoundError:
            if self._file(kid, "erased").exists():
                raise SessionErasedError(
                    f'session "{session_id}" was erased (its key {kid} is deleted from '
                    f"{self.directory}): its content cannot be read again"
                ) from None
            raise SessionSealError(
                f'session "{session_id}" is sealed with key {kid}, which the keyring '
                f"{self.directory} does not hold"
            ) from None
        hashes, aesgcm, hkdf = _crypto()
        derived = hkdf(
            algorithm=hashes.SHA256(),
            length=64,
            salt=base64.b64decode(record["salt"]),
            info=_INFO + kid.encode(),
        ).derive(self._master)
        found = self._keys[kid] = (aesgcm(derived[:32]), derived[32:])
        return found

    def erase(self, kid: str, session_id: str) -> bool:
        """Delete ``kid`` for good (zeros over it, synced, unlinked, a tombstone); ``False``
        when it was erased already."""
        path = self._file(kid, "key")
        self._keys.pop(kid, None)
        tombstone = {"session": session_id, "erased": utc_stamp()}
        try:
            fd = os.open(path, os.O_WRONLY)
        except FileNotFoundError:
            if self._file(kid, "erased").exists():
                return False
            raise SessionSealError(f"the keyring {self.directory} holds no key {kid}") from None
        try:
            os.write(fd, b"\0" * max(os.fstat(fd).st_size, 1))
            os.fsync(fd)
        finally:
            os.close(fd)
        replace_durably(str(self._file(kid, "erased")), json.dumps(tombstone).encode())
        os.unlink(path)
        sync_directory(str(self.directory))
        return True

    def _need_master(self) -> None:
        if self._master is None:
            raise SessionSealError(
                f"no master key for the keyring {self.directory}: set {MASTER_KEY_ENV} to the "
                "file that holds it"
            )


def keyring_from_env() -> Keyring | None:
    """The keyring :data:`KEYRING_ENV` and :data:`MASTER_KEY_ENV` name, if set."""
    directory = os.environ.get(KEYRING_ENV)
    if not directory:
        return None
    return Keyring.from_files(directory, os.environ.get(MASTER_KEY_ENV) or None)
