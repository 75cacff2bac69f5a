"""Naming a store and opening it: :func:`open_store` and the parsed name, :class:`StoreSpec`.

A store is a directory of JSONL logs (a path), a SQLAlchemy-style URL of a SQLite database
(``sqlite:///relative/path.db`` or ``sqlite:////absolute/path.db``), or a PostgreSQL URL
(``postgresql://user@host:port/dbname``, ``postgres://`` too). This is the one place that
turns such a name into a backend: the command line, the integrations and the docs all open
stores here.
"""

from __future__ import annotations

import inspect
import os
import re
import stat
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from agent_session.session.persistence.redaction import mask_store, remember_store

if TYPE_CHECKING:
    from agent_session.sealing.keyring import Keyring
    from agent_session.session.persistence.service import SessionPersistence

__all__ = [
    "POSTGRES_SCHEMES",
    "SQLITE_PREFIX",
    "STORE_ENV",
    "StoreSpec",
    "open_store",
    "parse_store",
    "require_postgres",
]

SQLITE_PREFIX = "sqlite:///"
"""The scheme of a SQLite store URL; what follows is the path (``/`` first when absolute)."""
POSTGRES_SCHEMES = ("postgresql://", "postgres://")
"""The schemes of a PostgreSQL store URL (libpq's)."""
STORE_ENV = "AGENT_SESSION_STORE"
"""Environment variable: the store of a command or an :func:`open_store` that names none."""
_DATABASE_SUFFIXES = (".db", ".sqlite", ".sqlite3")
"""File names that look like a SQLite database, not a directory of logs."""
_NEAR_MISS = re.compile(r"(?i)(sqlite|postgres|postgresql):/*")
"""A scheme this build serves, written with too few or too many slashes."""
_SQLITE_MAGIC = b"SQLite format 3\0"
_KINDS = {"jsonl": "a JSONL", "sqlite": "a SQLite", "postgres": "a PostgreSQL"}


@dataclass(frozen=True, slots=True)
class StoreSpec:
    """A parsed store name: its kind and the absolute path it names."""

    kind: Literal["jsonl", "sqlite", "postgres"]
    path: str
    """The absolute store root (JSONL), database file (SQLite), or the connection URL
    (PostgreSQL)."""

    @property
    def url(self) -> str:
        """The store as an absolute name (a path, ``sqlite:////abs/path.db``, or the
        PostgreSQL URL)."""
        return SQLITE_PREFIX + self.path if self.kind == "sqlite" else self.path

    @property
    def named(self) -> str:
        """:attr:`url` without any password it carries: how output names the store."""
        return mask_store(self.url)

    @property
    def shown(self) -> str:
        """The store as a user types it again from the current directory (relative when
        that is shorter; a PostgreSQL URL without its password)."""
        if self.kind == "postgres":
            return mask_store(self.path)
        relative = os.path.relpath(self.path)
        path = self.path if relative.startswith("..") else relative
        return path if self.kind == "jsonl" else SQLITE_PREFIX + path

    def open(
        self, *, integrity: bool = False, keyring: Keyring | None = None, **options: Any
    ) -> SessionPersistence:
        """A backend on this store (created on its first write if it does not exist):
        ``JsonlPersistence``, ``SqlitePersistence`` or ``PostgresPersistence``, given
        ``options`` as keyword arguments. With ``integrity``, every log it writes is
        hash-chained (``SessionPersistence.chain_logs``). With ``keyring`` (default: the one
        ``AGENT_SESSION_KEYRING`` names, if set), every session it creates is sealed
        (:mod:`agent_session.sealing`).

        Raises:
            ValueError: An option that backend does not take (naming the ones it does), or a
                PostgreSQL store in a build without the postgres extra.
        """
        backend: Callable[..., SessionPersistence]
        if self.kind == "sqlite":
            from agent_session.persistence_sqlite import SqlitePersistence as backend
        elif self.kind == "postgres":
            require_postgres()
            from agent_session.persistence_postgres import PostgresPersistence as backend
        else:
            from agent_session.persistence_jsonl import JsonlPersistence as backend
        taken = [
            name
            for name, parameter in inspect.signature(backend).parameters.items()
            if parameter.kind is inspect.Parameter.KEYWORD_ONLY
        ]
        wrong = sorted(set(options) - set(taken))
        if wrong:
            raise ValueError(
                f"{', '.join(wrong)}: not an option of {_KINDS[self.kind]} store "
                f"({getattr(backend, '__name__', 'it')} takes {', '.join(taken)})"
            )
        from agent_session.cold.tier import ColdTier

        opened = backend(self.path, **options)
        if keyring is None:
            from agent_session.sealing.keyring import keyring_from_env

            keyring = keyring_from_env()
        opened.cold = ColdTier(self, keyring)  # (read from the store's record on first use)
        if keyring is not None:
            from agent_session.sealing.storage import SealedStorage

            sealing = keyring
            opened.wrap_storage(lambda storage: SealedStorage(storage, sealing))
        if integrity:
            opened.chain_logs()
        return opened


def open_store(store: str | os.PathLike[str] | None = None, **options: Any) -> SessionPersistence:
    """The backend of ``store`` (a directory, ``sqlite:///path.db`` or ``postgresql://...``;
    ``None``: the environment's :data:`STORE_ENV`), ready for ``runtime.install``.

    Nothing is created until the first session is written. ``integrity=True`` hash-chains
    every log it writes (``agent-session verify --integrity`` checks them);
    ``keyring=Keyring(...)`` seals every session it creates (erasable by deleting its key:
    :mod:`agent_session.sealing`). Other
    ``options`` go to the backend's constructor (``write_batch_max_delay_ms`` for every
    kind; ``max_log_bytes`` or ``ops`` for JSONL; ``journal_mode`` or ``read_only`` for
    SQLite; ``transaction_pooler`` for PostgreSQL).

    Raises:
        ValueError: No store given, a name no kind of store takes (with the name it probably
            meant), an option the backend does not take, or a missing extra.
    """
    if store is None:
        store = os.environ.get(STORE_ENV) or ""
        if not store:
            raise ValueError(f"no store given, and {STORE_ENV} is not set")
    return parse_store(os.fspath(store)).open(**options)


def require_postgres() -> None:
    """Refuse, with the install hint, a PostgreSQL store in a build without the driver.

    Raises:
        ValueError: The postgres extra is not installed.
    """
    try:
        import agent_session.persistence_postgres  # noqa: F401
    except ImportError as e:
        raise ValueError(
            "a PostgreSQL store needs the postgres extra: pip install "
            f"'agent-session-runtime[postgres]' ({e})"
        ) from None


def parse_store(text: str) -> StoreSpec:
    """``text`` as a store: a ``sqlite:///`` or ``postgresql://`` URL, or else a directory.

    Raises:
        ValueError: An empty name, a URL of a scheme this build does not serve or with the
            wrong number of slashes, a SQLite URL without a path, or a path that names a
            database file rather than a directory (each with the name it probably meant).
    """
    if not text:
        raise ValueError("the store must not be empty")
    remember_store(text)  # whatever prints or logs later never shows its password
    if text.startswith(POSTGRES_SCHEMES):
        return StoreSpec("postgres", text)
    if text.startswith(SQLITE_PREFIX):
        path = text[len(SQLITE_PREFIX) :]
        if not path or path.endswith("/"):
            raise ValueError(
                f"{mask_store(text)!r} names no database file (sqlite:///path/to/file.db)"
            )
        return StoreSpec("sqlite", os.path.abspath(path))
    near = _NEAR_MISS.match(text)
    if near is not None:
        scheme, rest = near.group(1).lower(), text[near.end() :]
        meant = SQLITE_PREFIX + rest if scheme == "sqlite" else f"{scheme}://{rest.lstrip('/')}"
        raise ValueError(
            f"unsupported store {mask_store(text)!r}: did you mean {mask_store(meant)!r}?"
        )
    scheme, separator, _ = text.partition("://")
    if separator and scheme.isidentifier():
        raise ValueError(
            f"unsupported store {mask_store(text)!r}: give a directory of JSONL logs, a "
            "sqlite:///path/to/file.db URL or a postgresql:// URL"
        )
    path = os.path.abspath(text)
    if _names_a_database(path):
        raise ValueError(
            f"{text!r} names a SQLite database, not a directory of JSONL logs: did you mean "
            f"{SQLITE_PREFIX + text!r}?"
        )
    return StoreSpec("jsonl", path)


def _names_a_database(path: str) -> bool:
    """Whether a JSONL root ``path`` is really a SQLite file: an existing regular file that
    starts as one, or a path that does not exist and is named like one. Nothing but a regular
    file is opened (a FIFO would block the open)."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return path.endswith(_DATABASE_SUFFIXES)
    except OSError:
        return False
    if not stat.S_ISREG(mode):
        return False
    try:
        with open(path, "rb") as f:
            return f.read(len(_SQLITE_MAGIC)) == _SQLITE_MAGIC
    except OSError:
        return False
