"""Signed anchors: an Ed25519 signature over each anchor of a log, made with a key the
writer process does not hold, kept outside the store (extra ``[audit]``, ``cryptography``).

A chain alone proves nothing against whoever can write the store: they can rewrite a line
and every anchor after it. A signer (another account, another host, a scheduled job) that
checks the chain and signs its anchors as they appear turns "was it changed?" into "was it
changed by someone without the key, after it was signed?": a rewritten anchor no longer
matches its signature, and a removed one is named by the signature that remains.

Files: a key pair is two PEM files (:func:`new_key`: the private key ``0600``, the public one
beside it as ``<name>.pub``). A log's signatures are ``<dir>/<quoted id>.anchors.jsonl``, one
JSON object per signed anchor, ``{session, seq, hash, key, signature}``, appended and
fsync'd; ``key`` is the first 16 hex digits of the public key's SHA-256. The signed message
is ``agent-session anchor v1``, the session id, the anchor's seq and its hash, joined by NUL.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

from agent_session.session import SessionError
from agent_session.session.chain import IntegrityReport

__all__ = [
    "SignatureCheck",
    "SigningError",
    "check_signatures",
    "new_key",
    "read_signatures",
    "sign_anchors",
    "signatures_path",
]


class SigningError(SessionError, ValueError):
    """A key or a signature file that cannot be used (naming the file and why), or a log
    whose chain is broken (never signed)."""


def _crypto() -> Any:
    try:
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric import ed25519
    except ImportError:
        raise SigningError(
            "signed anchors need the cryptography package: "
            "pip install 'agent-session-runtime[audit]'"
        ) from None
    return serialization, ed25519


def new_key(path: str | os.PathLike[str]) -> tuple[Path, Path]:
    """Write a new Ed25519 private key to ``path`` (mode ``0600``, refusing to overwrite)
    and its public key to ``<path>.pub``; return both paths."""
    serialization, ed25519 = _crypto()
    private = Path(path)
    public = private.with_name(private.name + ".pub")
    key = ed25519.Ed25519PrivateKey.generate()
    private.parent.mkdir(parents=True, exist_ok=True)
    pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    try:
        fd = os.open(private, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        raise SigningError(f"{private}: exists; a key is never overwritten") from None
    with os.fdopen(fd, "wb") as out:
        out.write(pem)
    public.write_bytes(
        key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    return private, public


def _load(path: str | os.PathLike[str], private: bool) -> Any:
    serialization, ed25519 = _crypto()
    try:
        data = Path(path).read_bytes()
        key = (
            serialization.load_pem_private_key(data, password=None)
            if private
            else serialization.load_pem_public_key(data)
        )
    except (OSError, ValueError, TypeError) as e:
        kind = "private" if private else "public"
        raise SigningError(f"{path}: not a readable {kind} key ({type(e).__name__})") from None
    wanted = ed25519.Ed25519PrivateKey if private else ed25519.Ed25519PublicKey
    if not isinstance(key, wanted):
        raise SigningError(f"{path}: not an Ed25519 key")
    return key


def _key_id(public: Any) -> str:
    serialization, _ = _crypto()
    raw = public.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return hashlib.sha256(raw).hexdigest()[:16]


def _message(id: str, seq: int, hash: str) -> bytes:
    return b"\0".join((b"agent-session anchor v1", id.encode(), str(seq).encode(), hash.encode()))


def signatures_path(directory: str | os.PathLike[str], id: str) -> Path:
    """Where the signatures of log ``id`` are kept under ``directory``."""
    return Path(directory) / (quote(id, safe="") + ".anchors.jsonl")


def read_signatures(directory: str | os.PathLike[str], id: str) -> list[Mapping[str, Any]]:
    """The signatures kept for log ``id`` under ``directory`` (none when it has none).

    Raises:
        SigningError: A line of the file is damaged (naming it).
    """
    return _read(signatures_path(directory, id))


def _read(path: Path) -> list[Mapping[str, Any]]:
    if not path.exists():
        return []
    out: list[Mapping[str, Any]] = []
    for number, line in enumerate(path.read_bytes().splitlines(), start=1):
        try:
            value = json.loads(line)
        except ValueError:
            raise SigningError(f"{path}: line {number} is not JSON") from None
        if not isinstance(value, dict) or not isinstance(value.get("seq"), int):
            raise SigningError(f"{path}: line {number} is not a signature")
        out.append(value)
    return out


def sign_anchors(
    report: IntegrityReport, key: str | os.PathLike[str], directory: str | os.PathLike[str]
) -> int:
    """Sign the anchors of a checked log that are not signed yet; return how many.

    Raises:
        SigningError: The chain is broken (nothing is signed), or the key or the file
            cannot be used.
    """
    if not report.ok:
        raise SigningError(f'session "{report.id}": not signed: {report.text()}')
    private = _load(key, private=True)
    key_id = _key_id(private.public_key())
    path = signatures_path(directory, report.id)
    done = {entry["seq"] for entry in _read(path)}
    lines = []
    for seq, hash in report.anchors.items():
        if seq in done:
            continue
        signature = base64.b64encode(private.sign(_message(report.id, seq, hash))).decode()
        entry = {"session": report.id, "seq": seq, "hash": hash, "key": key_id}
        lines.append(json.dumps({**entry, "signature": signature}) + "\n")
    if lines:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "a", encoding="utf-8") as out:
            out.write("".join(lines))
            out.flush()
            os.fsync(out.fileno())
    return len(lines)


@dataclass(frozen=True, slots=True)
class SignatureCheck:
    """What the signatures of one log say about it."""

    signed: int
    """Anchors whose signature holds."""
    unsigned: int
    """Anchors of the log no signature covers (newer than the last signing)."""
    problem: str | None
    """The first signature that does not hold, in words."""

    def text(self) -> str:
        """One line for a person."""
        if self.problem is not None:
            return f"signature check failed: {self.problem}"
        said = f"{self.signed} anchor(s) signed"
        return said + (f", {self.unsigned} not signed yet" if self.unsigned else "")


def check_signatures(
    report: IntegrityReport,
    public_key: str | os.PathLike[str],
    signatures: Sequence[Mapping[str, Any]],
) -> SignatureCheck:
    """Check a log's signatures (:func:`read_signatures`) against its anchors as ``report``
    found them."""
    public = _load(public_key, private=False)
    key_id = _key_id(public)
    signed = 0
    for entry in signatures:
        seq, hash = entry["seq"], entry.get("hash")
        where = f"anchor at seq {seq}"
        if entry.get("key") != key_id:
            return SignatureCheck(signed, 0, f"{where} was signed by key {entry.get('key')}")
        try:
            public.verify(
                base64.b64decode(str(entry.get("signature"))), _message(report.id, seq, str(hash))
            )
        except Exception:
            return SignatureCheck(signed, 0, f"the signature of the {where} does not hold")
        held = report.anchors.get(seq)
        if held is None:
            why = f"the log has no anchor at seq {seq} (it holds {report.events} event(s))"
            return SignatureCheck(signed, 0, f"signed {where}: {why}")
        if held != hash:
            return SignatureCheck(
                signed, 0, f"the {where} records hash {held[:16]}…, signed as {str(hash)[:16]}…"
            )
        signed += 1
    return SignatureCheck(signed, len(report.anchors) - signed, None)
