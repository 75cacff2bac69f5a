"""Shared pytest configuration."""

from collections.abc import Iterator
from pathlib import Path
from typing import Any

# Import hypothesis while the interpreter is fresh. On CPython 3.11.x before the fix for
# gh-106905, pytest's assertion rewriter can hit a spurious "AST constructor recursion depth
# mismatch" SystemError when the hypothesis plugin first imports it late, at session finish.
import hypothesis  # noqa: F401
import pytest

from agent_session.session import register_event_type
from tests.backends import fresh_database

# The plugin event types the suite's own tests append. Appending a type readers would refuse
# is an error (register it first), as it is for a user's plugin.
for _name in (
    "plugin/e",
    "plugin/inner",
    "plugin/next",
    "plugin/note",
    "plugin/outer",
    "plugin/step-note",
    "plugin/test",
    "plugin/thing",
    "plugin/x",
    "plugin/y",
):
    register_event_type(_name)


@pytest.fixture(params=["jsonl", "sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A store of each kind, for a test that takes ``store``: a JSONL directory, a SQLite
    database, or a new database on the PostgreSQL test server."""
    if request.param == "postgres":
        return fresh_database()
    return str(tmp_path) if request.param == "jsonl" else f"sqlite:///{tmp_path}/sessions.db"


@pytest.fixture
def proxy() -> Iterator[tuple[Any, str]]:
    """A cutting proxy to a fresh database of the test server (``tests.pg_server``)."""
    from tests.pg_server import cutting_proxy

    yield from cutting_proxy()
