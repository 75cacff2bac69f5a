"""A password in a store's name never shows: not in any command's output (text or
``--json``), not in a library exception, not in a log record, whatever the form of the URL
(user part, ``password=`` query, malformed) and whatever fails (a wrong password, no server,
a URL the driver cannot parse). A canary password is planted and searched for everywhere."""

from __future__ import annotations

import asyncio
import logging
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agent_session.persistence_postgres import PostgresPersistence
from agent_session.session import Runtime
from agent_session.session.persistence.redaction import mask_store, scrub, secrets_of
from tests.backends import fresh_database
from tests.forkserver import run_cli
from tests.pg_server import OwnServer
from tests.sweeps import sample

CANARY = "Pw7zQ9xCanary"


def _with_password(dsn: str, form: str) -> str:
    """``dsn`` (``postgresql://postgres@host:port/db``) carrying :data:`CANARY` in ``form``."""
    if form == "userinfo":
        return dsn.replace("postgres@", f"postgres:{CANARY}@", 1)
    if form == "query":
        return f"{dsn}?user=postgres&password={CANARY}"
    if form == "bracket":  # libpq cannot parse it, and its message quotes the URI
        host = dsn.split("@", 1)[1].split(":", 1)[0]
        return dsn.replace(f"postgres@{host}", f"postgres:{CANARY}@[::1", 1)
    assert form == "percent"  # an invalid percent-encoding in the password
    return dsn.replace("postgres@", f"postgres:{CANARY}%zz@", 1)


# --- the masking function ----------------------------------------------------------------


@pytest.mark.parametrize(
    "url",
    [
        f"postgresql://u:{CANARY}@h:5432/db",
        f"postgres://u:{CANARY}@h/db?sslmode=require",
        f"postgresql://h/db?user=u&password={CANARY}",
        f"postgresql://h/db?password={CANARY}&user=u",
        f"postgresql://u:{CANARY}@[::1/db",
        f"postgresql://u:{CANARY}%zz@h/db",
        f"host=h user=u password={CANARY} dbname=db",
        f"host=h password='{CANARY} x' dbname=db",
        f"postgresql://u:{CANARY}@h/db@odd",
        f"PASSWORD = {CANARY}",
    ],
)
def test_mask_store_removes_the_password_of_every_form(url: str) -> None:
    assert CANARY not in mask_store(url)
    assert CANARY in url
    assert "***" in mask_store(url)
    assert CANARY not in scrub(f"error in {url!r}: boom", url)


def test_mask_store_keeps_what_is_not_a_secret() -> None:
    assert mask_store("postgresql://u@h:5/db") == "postgresql://u@h:5/db"
    assert mask_store("postgresql://u:pw@h:5/db?sslmode=x") == "postgresql://u:***@h:5/db?sslmode=x"
    assert mask_store("sqlite:///some/path.db") == "sqlite:///some/path.db"
    assert mask_store("/a/dir") == "/a/dir"
    assert secrets_of("postgresql://u:p%40ss@h/db") == {"p%40ss", "p@ss"}


@given(
    st.text(
        alphabet=st.characters(whitelist_categories=("L", "N"), whitelist_characters="!$*+,-._~"),
        min_size=4,
        max_size=30,
    )
)
def test_any_password_in_the_user_part_or_the_query_is_masked(password: str) -> None:
    for url in (
        f"postgresql://user:{password}@host:1/db",
        f"postgresql://host:1/db?password={password}&x=1",
    ):
        assert password not in mask_store(url).replace("user", "").replace("host", "")


# --- the library -------------------------------------------------------------------------


async def _first_flush(dsn: str) -> BaseException:
    runtime = Runtime()
    try:
        backend = PostgresPersistence(dsn)
    except ValueError as e:
        return e
    runtime.install(backend)
    session = runtime.sessions.create("s")
    session.append("turn/start", {"turn": 1})
    try:
        await runtime.sessions.flush(session)
    except BaseException as e:
        return e
    finally:
        await runtime.sessions.dispose(session)
        await backend.aclose()
    raise AssertionError("the flush succeeded")


@pytest.mark.parametrize("form", ["userinfo", "query", "bracket", "percent"])
async def test_a_failed_connection_says_why_without_the_password(
    form: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A stopped server (a port nothing listens on): an ``OSError`` at once, naming the cause
    (refused), or a ``ValueError`` for a URL the driver cannot parse; no record of any logger
    holds the canary."""
    caplog.set_level(logging.DEBUG)
    with __import__("socket").socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    dsn = _with_password(f"postgresql://postgres@127.0.0.1:{port}/postgres", form)
    error = await _first_flush(dsn)
    if form in ("bracket", "percent"):
        assert isinstance(error, ValueError), error
        assert "invalid PostgreSQL connection string" in str(error)
    else:
        assert isinstance(error, ConnectionRefusedError), repr(error)
        assert "Connection refused" in str(error)
    assert CANARY not in str(error)
    assert error.__cause__ is None or CANARY not in str(error.__cause__)
    assert not any(CANARY in record.getMessage() for record in caplog.records)


async def test_a_wrong_password_is_final_and_says_so(caplog: pytest.LogCaptureFixture) -> None:
    """A server that refuses the password: a ``PermissionError`` with the server's reason, on
    the first attempt (no pool retrying it for 30 s), without the password."""
    caplog.set_level(logging.DEBUG)
    server = OwnServer(password="the-right-one")
    try:
        dsn = server.dsn.replace("postgres@", f"postgres:{CANARY}@")
        error = await asyncio.wait_for(_first_flush(dsn), 60)
        assert isinstance(error, PermissionError), repr(error)
        assert "password authentication failed" in str(error)
        assert CANARY not in str(error)
        assert not any(CANARY in record.getMessage() for record in caplog.records)
        right = server.dsn.replace("postgres@", "postgres:the-right-one@")
        assert isinstance(await _first_flush(right.replace("/postgres", "/nosuchdb")), OSError)
    finally:
        server.remove()


# --- every command -----------------------------------------------------------------------


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return run_cli(*args, cwd=cwd)


def _commands(store: str, local: str) -> list[list[str]]:
    return [
        ["ls", store],
        ["ls", store, "--json"],
        ["verify", store],
        ["verify", store, "--json"],
        ["verify", store, "s1"],
        ["recover", store],
        ["recover", store, "s1", "--json"],
        ["show", store, "s1"],
        ["show", store, "s1", "--json"],
        ["export", store, "s1", "--format", "openai"],
        ["rm", store, "nosuch"],
        ["convert", store, "s1", "--to", "zstd"],
        ["copy", store, local + "-out"],
        ["copy", local, store],
        ["ls", "--store", store],
    ]


def _demos(store: str) -> list[list[str]]:
    return [
        ["demo", "--store", store, "--session-id", "d1", "--crash", "tool", "--no-recover"],
        ["demo", "--store", store, "--session-id", "d2", "--crash", "tool", "--json"],
    ]


@pytest.mark.process
def test_no_command_prints_the_password(tmp_path: Path) -> None:
    """Every command, on a reachable server with the password in the user part and in the
    query (the server trusts it: the commands succeed), on a server that refuses it, on a
    stopped server and on malformed URLs: the canary is in no stdout or stderr (every
    command on every form when exhaustive, else a seeded share with each command and each
    form at least once). Longer than 20 s: each command runs in a child process, and it
    starts a PostgreSQL server of its own."""
    reachable = fresh_database()
    own = OwnServer(password="the-right-one")
    local = tmp_path / "local"
    seeded = _cli("demo", "--store", str(local), "--session-id", "s1", cwd=tmp_path)
    assert seeded.returncode == 0, seeded.stderr
    with __import__("socket").socket() as probe:
        probe.bind(("127.0.0.1", 0))
        stopped = f"postgresql://postgres@127.0.0.1:{probe.getsockname()[1]}/postgres"
    stores = [
        _with_password(reachable, "userinfo"),
        _with_password(reachable, "query"),
        _with_password(own.dsn, "userinfo"),  # refused: the wrong password
        _with_password(stopped, "query"),
        _with_password(reachable, "bracket"),
        _with_password(reachable, "percent"),
    ]
    demos = [command for store in stores for command in _demos(store)]
    every = [(store, command) for store in stores for command in _commands(store, str(local))]
    # a seeded share of (URL form, command), with every command and every form at least once
    chosen = sample(
        every,
        0.35,
        name="secrets",
        key=lambda pair: tuple(word for word in pair[1] if word != pair[0]),
        also=lambda pair: pair[0],
    )
    listing = [(store, ["ls", store, "--json"]) for store in stores[:2]]  # (both reachable)
    rest = [command for _, command in chosen + [p for p in listing if p not in chosen]]
    try:
        with ThreadPoolExecutor(4) as pool:  # the demos first: the other commands read them
            results = list(pool.map(lambda run: _cli(*run, cwd=tmp_path), demos))
            results += list(pool.map(lambda run: _cli(*run, cwd=tmp_path), rest))
    finally:
        own.remove()
    causes = {
        stores[2]: "password authentication failed",  # the server's own reason, in one line
        stores[3]: "Connection refused",
    }
    listed = 0
    for command, result in zip(demos + rest, results, strict=True):
        cause = next((why for store, why in causes.items() if store in command), None)
        where = f"{command}: rc {result.returncode}\n{result.stdout}\n{result.stderr}"
        if command[0] == "convert":  # refused before connecting: JSONL only
            assert result.returncode == 4, where
        elif cause is not None:
            assert result.returncode == 5, where
            assert len(result.stderr.strip().splitlines()) <= 1, where  # (verify: on stdout)
            assert cause in result.stdout + result.stderr, where
        where = f"{command}: rc {result.returncode}\n{result.stdout}\n{result.stderr}"
        assert CANARY not in result.stdout + result.stderr, where
        assert "Traceback" not in result.stderr, where
        assert "error connecting" not in result.stderr, where  # no pool retrying in the back
        if command[0] == "ls" and "--json" in command and result.returncode == 0:
            assert '"id":"d1"' in result.stdout, where
            assert "***" in result.stdout, where
            listed += 1
    assert listed == 2  # both reachable stores listed their sessions, their paths masked
    env_run = subprocess.run(
        [sys.executable, "-m", "agent_session", "ls", "--json"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env={**os.environ, "AGENT_SESSION_STORE": _with_password(reachable, "query")},
    )
    assert env_run.returncode == 0, env_run.stderr
    assert "d1" in env_run.stdout
    assert CANARY not in env_run.stdout + env_run.stderr
