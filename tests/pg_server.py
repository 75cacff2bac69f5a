"""PostgreSQL servers and connections for the tests that attack them: a cluster of a test's
own (to kill, restart or protect with a password) and a TCP proxy that cuts connections at the
worst moment or refuses new ones."""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from tests.backends import fresh_database

__all__ = ["CuttingProxy", "OwnServer", "cutting_proxy"]


class CuttingProxy:
    """A TCP proxy to the test server that can drop a connection at the worst moment: after
    forwarding an append to the server (``after_send``: the commit happens, its
    acknowledgement is lost) or instead of forwarding it (the commit never happens). An
    append is a statement that inserts into ``agent_session_event``, or the execution of one
    the backend prepared on an event loop's connection (named ``agent_session_<n>``)."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.cut: str | None = None  # "after_send" | "before_send"
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.cuts = 0
        self.refusing = False
        """While set, every new connection is closed at once (the server seems gone)."""
        self.answered: socket.socket | None = None  # after_send: the server side to cut at
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            if self.refusing:  # as if nothing listened: closed before the first byte
                client.close()
                continue
            server = socket.create_connection(self.target)
            threading.Thread(target=self._pump, args=(client, server, True), daemon=True).start()
            threading.Thread(target=self._pump, args=(server, client, False), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket, upstream: bool) -> None:
        tail = b""  # the end of the bytes before: a statement the network split is still seen
        with contextlib.suppress(OSError):
            while data := source.recv(65536):
                if not upstream and self.answered is source:
                    # the server's answer to the marked statement: drop both sides unanswered
                    self.answered = None
                    break
                seen, before = tail + data, len(tail)
                tail = seen[-_TAIL:]
                if upstream and self.cut and _appends(seen, before):
                    mode, self.cut = self.cut, None
                    self.cuts += 1
                    if mode == "before_send":
                        break
                    # after_send: forward it (and the rest of the statement, which a client
                    # may send in several pieces); the server's next bytes are its answer
                    self.answered = sink
                sink.sendall(data)
        for s in (source, sink):
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)

    def dsn(self, dsn: str) -> str:
        """``dsn`` through this proxy."""
        return dsn.replace(f":{self.target[1]}/", f":{self.port}/")


_TAIL = 128
"""How many bytes of a connection's stream before a chunk are matched with it: more than the
words an append is recognized by, so how a load splits the stream never hides one."""


_APPEND = re.compile(rb"INSERT INTO agent_session_event|agent_session_[0-9]+\x00")
"""An append: an insert of event lines, or the execution of a statement the backend prepared
(its name)."""


def _appends(data: bytes, start: int) -> bool:
    """Whether ``data`` holds an append that ends past ``start`` (the bytes before it were
    looked at already)."""
    return any(match.end() > start for match in _APPEND.finditer(data))


def cutting_proxy() -> Iterator[tuple[CuttingProxy, str]]:
    """A proxy to a fresh database of the test server, and that database's own DSN."""
    dsn = fresh_database()
    info = psycopg.conninfo.conninfo_to_dict(dsn)
    cutter = CuttingProxy((str(info["host"]), int(str(info["port"]))))
    yield cutter, dsn
    cutter.listener.close()


def _directory(prefix: str) -> Path:
    """A new directory in the system's temporary directory: pytest's, where the tests' other
    temporary files go (``tests/conftest.py``), is closed to the postgres user."""
    system = os.environ.get("AGENT_SESSION_SYSTEM_TMPDIR") or tempfile.gettempdir()
    return Path(tempfile.mkdtemp(prefix=prefix, dir=system))


class OwnServer:
    """A PostgreSQL cluster of one test's own (the binaries ``scripts/with-postgres`` found),
    so that killing it disturbs no other test."""

    def __init__(self, password: str | None = None, *, settings: str = "") -> None:
        """``settings``: more ``-c name=value`` options of the server."""
        self.password = password
        self.settings = settings
        self.bin = os.environ["AGENT_SESSION_PG_BIN"]
        self.prefix = shlex.split(os.environ.get("AGENT_SESSION_PG_AS", ""))
        directory = self.directory = _directory("agent-session-pg-")
        if self.prefix:  # (as root, the cluster belongs to the postgres user)
            shutil.chown(directory, "postgres")
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        auth = ["-A", "trust"]
        if password is not None:  # every connection must give it
            (directory / "pw").write_text(password)
            if self.prefix:
                shutil.chown(directory / "pw", "postgres")
            auth = ["-A", "scram-sha-256", f"--pwfile={directory / 'pw'}"]
        self._run("initdb", "-D", str(directory / "data"), "-U", "postgres", *auth)
        self.start()

    def _run(self, tool: str, *args: str) -> None:
        command = [*self.prefix, os.path.join(self.bin, tool), *args]
        subprocess.run(command, check=True, capture_output=True, timeout=120)

    def start(self) -> None:
        options = f"-c listen_addresses=127.0.0.1 -p {self.port}"
        options += f" -c unix_socket_directories={self.directory} {self.settings}"
        data, log = str(self.directory / "data"), str(self.directory / "server.log")
        self._run("pg_ctl", "-D", data, "-l", log, "-w", "-t", "60", "-o", options, "start")

    def stop(self) -> None:
        """A clean, fast shutdown."""
        self._run("pg_ctl", "-D", str(self.directory / "data"), "-m", "fast", "-w", "stop")

    def restart(self) -> None:
        """Killed (``-m immediate``, as a crash) and started again."""
        self.kill()
        self.start()

    def kill(self) -> None:
        self._run("pg_ctl", "-D", str(self.directory / "data"), "-m", "immediate", "-w", "stop")

    def remove(self) -> None:
        with contextlib.suppress(subprocess.CalledProcessError):
            self.kill()
        shutil.rmtree(self.directory, ignore_errors=True)

    @property
    def dsn(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"


class PgBouncer:
    """PgBouncer (Debian's package) in front of a database of the test server, in
    transaction mode (each statement outside a transaction may run on another server
    connection), on a free port, run as the cluster's owner."""

    def __init__(self, dsn: str) -> None:
        binary = os.environ.get("AGENT_SESSION_PGBOUNCER", "/usr/sbin/pgbouncer")
        if not os.access(binary, os.X_OK):
            pytest.fail(
                f"PgBouncer is not installed at {binary} (scripts/with-postgres installs it)"
            )
        info = psycopg.conninfo.conninfo_to_dict(dsn)
        prefix = shlex.split(os.environ.get("AGENT_SESSION_PG_AS", ""))
        directory = self.directory = _directory("agent-session-pgb-")
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        config = directory / "pgbouncer.ini"
        config.write_text(
            "[databases]\n"
            f"* = host={info['host']} port={info['port']} user={info.get('user', 'postgres')}\n"
            "[pgbouncer]\n"
            f"listen_addr = 127.0.0.1\nlisten_port = {self.port}\n"
            "unix_socket_dir =\nauth_type = any\npool_mode = transaction\n"
            f"logfile = {directory / 'pgbouncer.log'}\npidfile = {directory / 'pgbouncer.pid'}\n"
            "max_client_conn = 200\ndefault_pool_size = 20\n"
        )
        if prefix:
            for path in (directory, config):
                shutil.chown(path, "postgres")
        self.process = subprocess.Popen(
            [*prefix, binary, str(config)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT
        )
        self.dsn = f"postgresql://postgres@127.0.0.1:{self.port}/{info['dbname']}"
        while True:  # wait for the fact: it accepts connections (or it died)
            if self.process.poll() is not None:
                log = (directory / "pgbouncer.log").read_text(errors="replace")
                pytest.fail(f"PgBouncer exited: {log}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                    break
            except OSError:
                time.sleep(0.02)  # (the next look: listening is the fact waited for)

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=60)
        shutil.rmtree(self.directory, ignore_errors=True)
