"""Shared pytest configuration."""

import os
import tempfile
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


@pytest.fixture(scope="session", autouse=True)
def _temporary_files_stay_in_the_run(tmp_path_factory: pytest.TempPathFactory) -> None:
    """What the code under test and its children put in the system's temporary directory
    (a demo's tool folder beside a PostgreSQL store, a server's files, sockets) goes under
    this run's pytest directory instead, which pytest rotates away, rather than piling up in
    ``/tmp``. (The system's stays named in ``AGENT_SESSION_SYSTEM_TMPDIR``, for the servers
    whose owner, the postgres user, cannot enter pytest's.)"""
    os.environ.setdefault("AGENT_SESSION_SYSTEM_TMPDIR", tempfile.gettempdir())
    os.environ["TMPDIR"] = str(tmp_path_factory.mktemp("tmp", numbered=False))
    tempfile.tempdir = None  # (read again from TMPDIR)


@pytest.fixture
def proxy() -> Iterator[tuple[Any, str]]:
    """A cutting proxy to a fresh database of the test server (``tests.pg_server``)."""
    from tests.pg_server import cutting_proxy

    yield from cutting_proxy()


# --- seeded samples of the exhaustive sweeps (tests/sweeps.py) ----------------------------


def pytest_configure(config: pytest.Config) -> None:
    from tests.sweeps import seed

    seed()  # (the controller's, before it starts the workers: they inherit it)


def pytest_report_header(config: pytest.Config) -> str:
    from tests.sweeps import EXHAUSTIVE, SEED_ENV, seed

    if EXHAUSTIVE:
        return "sweeps: exhaustive (every case)"
    return f"sweeps: a seeded sample, {SEED_ENV}={seed()} (make test-exhaustive runs all)"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    from tests.sweeps import sample, store_of

    groups: dict[str, list[pytest.Item]] = {}
    for item in items:
        if item.get_closest_marker("sweep") is not None:
            groups.setdefault(item.nodeid.split("[", 1)[0], []).append(item)
    dropped: list[pytest.Item] = []
    for name, cases in groups.items():
        marker = cases[0].get_closest_marker("sweep")
        assert marker is not None
        kept = sample(cases, marker.kwargs["share"], name=name, key=lambda i: store_of(_id(i)))
        keep = set(map(id, kept))
        dropped += [case for case in cases if id(case) not in keep]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        gone = set(map(id, dropped))
        items[:] = [item for item in items if id(item) not in gone]
    # The long ones first, so that no worker is left running one after the others are done.
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)


def _id(item: pytest.Item) -> str:
    callspec = getattr(item, "callspec", None)
    return callspec.id if callspec is not None else ""


_LONG_S = 20.0
"""A test that takes longer than this names why in its docstring."""


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    terminalreporter.write_line(pytest_report_header(config))
    unexplained = sorted(
        report.nodeid
        for report in terminalreporter.stats.get("passed", [])
        if report.when == "call"
        and report.duration > _LONG_S
        and not dict(report.user_properties).get("says why it is long")
    )
    for nodeid in unexplained:
        terminalreporter.write_line(
            f"longer than {_LONG_S:.0f} s, and its docstring does not say why: {nodeid}"
        )


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: Any) -> Any:
    outcome = yield
    docstring = getattr(getattr(item, "function", None), "__doc__", None) or ""
    says = f"longer than {_LONG_S:.0f} s" in " ".join(docstring.lower().split())
    outcome.get_result().user_properties.append(("says why it is long", says))
