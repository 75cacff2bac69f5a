"""Secrets in the names of stores: one place that masks them wherever a store is named.

A store named by a URL or a connection string may carry a password: in its user part
(``postgresql://user:secret@host/db``), as a ``password=`` query parameter or conninfo
keyword, or in a string a driver cannot even parse (whose error messages then quote it).

Guarantees:

- :func:`mask_store` gives a store's name with every password it carries replaced by
  ``***``, for any text (a URL that does not parse included), and never fails.
- :func:`scrub` removes from any text every secret of the stores this process has named
  (:func:`remember_store`), in the form they were written and percent-decoded, and the
  ``PGPASSWORD`` of the environment: the last guard for messages that quote a connection
  string (a driver's exception, a pool's log record, a traceback).
- :func:`install_log_filter` makes every record of a logger pass through :func:`scrub` before
  any handler sees it.

Internal to ``session.persistence``: a backend imports what it needs of this module from
:mod:`session.persistence.kit`, whose names stay.
"""

from __future__ import annotations

import logging
import os
import re
import threading
from urllib.parse import unquote

__all__ = ["MASK", "install_log_filter", "mask_store", "remember_store", "scrub", "secrets_of"]

MASK = "***"
"""What a secret is replaced by."""

_KEYWORD = re.compile(
    r"""(?P<key>\bpassword\s*=\s*)(?P<value>'(?:[^'\\]|\\.)*'?|[^&\s#;]*)""", re.IGNORECASE
)
"""``password=...`` in a URL's query or a ``key=value`` connection string (quoted or not)."""

_known: set[str] = set()
_known_lock = threading.Lock()


def secrets_of(store: str) -> set[str]:
    """The passwords ``store`` carries, as written and percent-decoded (empty when none)."""
    found: set[str] = set()
    scheme, separator, rest = store.partition("://")
    if separator and not any(c.isspace() for c in scheme):
        authority = rest.split("?", 1)[0]
        credentials, at, _ = authority.rpartition("@")
        if at and ":" in credentials:
            found.add(credentials.split(":", 1)[1])
    for match in _KEYWORD.finditer(store):
        value = match.group("value")
        found.add(value)
        if value.startswith("'"):
            found.add(value.strip("'"))
    found |= {unquote(secret) for secret in found}
    return {secret for secret in found if secret and secret not in ("'", "''")}


def mask_store(store: str) -> str:
    """``store`` with every password it carries replaced by :data:`MASK`."""
    masked = _KEYWORD.sub(lambda m: m.group("key") + MASK, store)
    scheme, separator, rest = masked.partition("://")
    if separator and not any(c.isspace() for c in scheme):
        query_at = rest.find("?")
        authority = rest if query_at < 0 else rest[:query_at]
        credentials, at, host = authority.rpartition("@")
        if at and ":" in credentials:
            user = credentials.split(":", 1)[0]
            masked = f"{scheme}://{user}:{MASK}@{host}{'' if query_at < 0 else rest[query_at:]}"
    return _replace(masked, secrets_of(store))


def remember_store(store: str) -> None:
    """Have :func:`scrub` remove ``store``'s secrets from every later text."""
    secrets = secrets_of(store)
    if secrets:
        with _known_lock:
            _known.update(secrets)


def scrub(text: str, *stores: str) -> str:
    """``text`` without any secret of ``stores``, of the stores remembered, or of the
    environment's ``PGPASSWORD``."""
    secrets = set().union(*(secrets_of(store) for store in stores)) if stores else set()
    with _known_lock:
        secrets |= _known
    environment = os.environ.get("PGPASSWORD")
    if environment:
        secrets.add(environment)
    return _replace(text, secrets)


def _replace(text: str, secrets: set[str]) -> str:
    for secret in sorted(secrets, key=len, reverse=True):  # a longer one may hold a shorter
        if secret != MASK:
            text = text.replace(secret, MASK)
    return text


class _ScrubbingFilter(logging.Filter):
    """Rewrites a record's message through :func:`scrub` (keeps every record)."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        cleaned = scrub(message)
        if cleaned != message:
            record.msg, record.args = cleaned, None
        if record.exc_info and record.exc_info[1] is not None:
            error = record.exc_info[1]
            if scrub(str(error)) != str(error):
                record.exc_info, record.exc_text = None, None
                record.msg = f"{record.msg} ({type(error).__name__}: {scrub(str(error))})"
        return True


_FILTER = _ScrubbingFilter()


def install_log_filter(name: str) -> None:
    """Scrub every record of logger ``name`` (and of the loggers below it that propagate to
    it) before its handlers see it; idempotent."""
    logger = logging.getLogger(name)
    if _FILTER not in logger.filters:
        logger.addFilter(_FILTER)
