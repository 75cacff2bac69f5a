"""A fork server for the tests' child interpreters: ``python -m MODULE ARGS`` (or ``python -c
CODE ARGS``) run in a process forked from an interpreter that already imported this library
and the frameworks, so that a test which starts forty commands, or kills and resumes a job
three times, does not pay for forty cold imports (about 0.5 s each for this library, 3 s for
the OpenAI Agents SDK).

Each child is a real process of its own: its own pid, files, fsyncs and event loop, killed by
a real SIGKILL; it starts as ``python -m`` would start it (``__main__`` run by ``runpy``, the
request's argv, working directory and environment, and the caller's own pipes or files as its
stdin, stdout and stderr, passed over the socket). What this library reads from the
environment when imported (its failpoints) is read again in each child, from the child's
environment.

:func:`run_module` is ``subprocess.run(capture_output=True, text=True)`` for such a child,
:func:`start_module` is ``subprocess.Popen`` with its three pipes, and :func:`run_cli` runs
the ``agent-session`` command; :func:`command_directory` gives shells such commands. Each
kind of server (:data:`PRELOADS`) starts in a test process (a pytest worker) on first use
and ends with it.
"""

from __future__ import annotations

import atexit
import contextlib
import gc
import importlib
import io
import os
import runpy
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import types
from collections.abc import Mapping
from pathlib import Path
from typing import IO, Any

from tests.fork_wire import Reply, receive_request, request, send

__all__ = ["Child", "command_directory", "run_cli", "run_code", "run_module", "start_module"]

LIBRARY = (
    "psycopg",
    "agent_session.cli.entry",
    "agent_session.demo.story",
    "agent_session.agent_loop",
    "agent_session.persistence_jsonl",
    "agent_session.persistence_sqlite",
    "agent_session.persistence_postgres",
)
PRELOADS = {
    "library": LIBRARY,
    "frameworks": ("agents", "anthropic", *LIBRARY),
    "adk": ("google.adk", "agent_session.integrations.google_adk", *LIBRARY),
    "langgraph": ("langgraph.graph", "agent_session.integrations.langgraph", *LIBRARY),
    "dbos": ("dbos", "agents", "agent_session.engines.dbos_turns", *LIBRARY),
}
"""What each server imports before it forks: this library's modules the children use, and
for the framework children the OpenAI Agents SDK and the Anthropic client, or Google ADK,
too (some seconds more to start, so only the tests that need them pay for them). Never a
module a child runs as ``__main__`` (``runpy`` would warn), nor the tests' own modules,
which each child imports afresh."""

REARM = "agent_session.session.persistence.failpoints"
"""The one module that reads the environment when imported: each child reloads it."""

REPO = Path(__file__).resolve().parent.parent
_servers: dict[str, tuple[subprocess.Popen[bytes], str]] = {}
_commands: dict[str, Path] = {}
_lock = threading.Lock()


class Child:
    """A forked child, used as a ``subprocess.Popen`` with text pipes is: ``pid``,
    ``stdin``/``stdout``/``stderr`` (None where the caller gave its own file), ``poll``,
    ``wait``, ``communicate``, ``kill`` and ``send_signal``. Its exit status comes from the
    server (negative: the signal that ended it)."""

    def __init__(
        self,
        args: list[str],
        reply: Reply,
        pid: int,
        pipes: tuple[IO[str] | None, IO[str] | None, IO[str] | None],
    ) -> None:
        self.args, self.pid, self.returncode = args, pid, None
        self.stdin, self.stdout, self.stderr = pipes
        self._reply = reply
        self._readers: list[tuple[threading.Thread, list[str]]] | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            self._reply.conn.setblocking(False)
            try:
                self._read_status()
            except BlockingIOError:
                pass
            finally:
                self._reply.conn.setblocking(True)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            self._reply.conn.settimeout(timeout)
            try:
                self._read_status()
            except TimeoutError:
                raise subprocess.TimeoutExpired(self.args, timeout or 0) from None
        assert self.returncode is not None
        return self.returncode

    def _read_status(self) -> None:
        self.returncode = int(self._reply.line()["returncode"])
        self._reply.conn.close()

    def send_signal(self, signum: int) -> None:
        if self.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signum)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def communicate(
        self, input: str | None = None, timeout: float | None = None
    ) -> tuple[str, str]:
        """Write ``input``, close stdin, read stdout and stderr to their ends and wait, all
        within ``timeout``, as ``Popen.communicate`` does (called again after a timeout, it
        goes on reading)."""
        if self._readers is None:
            if self.stdin is not None:
                with contextlib.suppress(BrokenPipeError):
                    if input:
                        self.stdin.write(input)
                    self.stdin.close()
            self._readers = []
            for pipe in (self.stdout, self.stderr):
                got: list[str] = []
                reader = threading.Thread(target=_drain, args=(pipe, got), daemon=True)
                reader.start()
                self._readers.append((reader, got))
        deadline = None if timeout is None else time.monotonic() + timeout
        for reader, _ in self._readers:
            reader.join(None if deadline is None else max(0.0, deadline - time.monotonic()))
            if reader.is_alive():
                raise subprocess.TimeoutExpired(self.args, timeout or 0)
        self.wait(None if deadline is None else max(0.0, deadline - time.monotonic()))
        out, err = ("".join(got) for _, got in self._readers)
        return out, err


def _drain(pipe: IO[str] | None, into: list[str]) -> None:
    if pipe is not None:
        into.append(pipe.read())
        pipe.close()


Stream = int | IO[Any] | None
"""A child's stdin, stdout or stderr: ``subprocess.PIPE``, ``subprocess.DEVNULL``, a file,
or None for this process's own."""


def start_module(
    module: str,
    *args: str,
    cwd: Path | str = REPO,
    env: Mapping[str, str] | None = None,
    stdin: Stream = subprocess.PIPE,
    stdout: Stream = subprocess.PIPE,
    stderr: Stream = subprocess.PIPE,
    server: str = "library",
) -> Child:
    """Start ``python -m module *args`` forked from the server, as ``subprocess.Popen(...,
    text=True)`` would start it with these streams. ``server``: ``"library"``;
    ``"frameworks"`` for a child that imports the OpenAI Agents SDK or the Anthropic client;
    ``"adk"`` for one that imports Google ADK (:data:`PRELOADS`)."""
    request = {"module": module}
    return _start(request, [module, *args], cwd, env, (stdin, stdout, stderr), server)


def run_module(
    module: str,
    *args: str,
    cwd: Path | str = REPO,
    env: Mapping[str, str] | None = None,
    input: str | None = None,
    timeout: float = 120,
    server: str = "library",
) -> subprocess.CompletedProcess[str]:
    """Run ``python -m module *args`` forked from the server; what it printed and its exit
    status (negative: the signal that ended it), as ``subprocess.run(capture_output=True,
    text=True)`` gives them (stdin: ``input``, else ``/dev/null``).

    Raises:
        subprocess.TimeoutExpired: It ran longer than ``timeout`` seconds (it is killed).
    """
    return _run({"module": module}, [module, *args], cwd, env, input, timeout, server)


def run_code(
    code: str,
    *args: str,
    cwd: Path | str = REPO,
    env: Mapping[str, str] | None = None,
    input: str | None = None,
    timeout: float = 120,
    server: str = "library",
) -> subprocess.CompletedProcess[str]:
    """Run ``python -c code *args`` forked from the server (see :func:`run_module`)."""
    return _run({"code": code}, ["-c", *args], cwd, env, input, timeout, server)


def run_cli(
    *args: str,
    cwd: Path | str = REPO,
    env: Mapping[str, str] | None = None,
    input: str | None = None,
    timeout: float = 300,
    server: str = "library",
) -> subprocess.CompletedProcess[str]:
    """Run ``agent-session *args`` (``python -m agent_session``) forked from the server."""
    return run_module(
        "agent_session", *args, cwd=cwd, env=env, input=input, timeout=timeout, server=server
    )


def _run(
    what: dict[str, str],
    argv: list[str],
    cwd: Path | str,
    env: Mapping[str, str] | None,
    input: str | None,
    timeout: float,
    server: str,
) -> subprocess.CompletedProcess[str]:
    stdin = subprocess.DEVNULL if input is None else subprocess.PIPE
    streams = (stdin, subprocess.PIPE, subprocess.PIPE)
    child = _start(what, argv, cwd, env, streams, server)
    try:
        out, err = child.communicate(input, timeout)
    except subprocess.TimeoutExpired:
        child.kill()
        child.wait()
        raise
    assert child.returncode is not None
    return subprocess.CompletedProcess([sys.executable, *child.args], child.returncode, out, err)


def _start(
    what: dict[str, str],
    argv: list[str],
    cwd: Path | str,
    env: Mapping[str, str] | None,
    streams: tuple[Stream, ...],
    server: str,
) -> Child:
    theirs: list[int] = []  # the child's ends, sent to the server and closed here
    ours: list[IO[str] | None] = []
    with contextlib.ExitStack() as opened:
        for fd, stream in enumerate(streams):
            if stream == subprocess.PIPE:
                read, write = os.pipe()
                child_end, our_end = (read, write) if fd == 0 else (write, read)
                theirs.append(child_end)
                opened.callback(os.close, child_end)
                mode = "w" if fd == 0 else "r"
                ours.append(open(our_end, mode, encoding="utf-8"))  # noqa: SIM115 (the Child's)
            elif stream == subprocess.DEVNULL:
                null = os.open(os.devnull, os.O_RDWR)
                opened.callback(os.close, null)
                theirs.append(null)
                ours.append(None)
            else:
                given = fd if stream is None else stream
                theirs.append(given if isinstance(given, int) else given.fileno())
                ours.append(None)
        what = {
            **what,
            "argv": argv,
            "cwd": str(cwd),
            "env": dict(os.environ if env is None else env),
        }
        reply, pid = request(_address(server), what, theirs)
    return Child(argv, reply, pid, (ours[0], ours[1], ours[2]))


def command_directory(server: str = "library") -> Path:
    """A folder holding ``agent-session`` and ``python`` commands that run forked from the
    server, for a shell a test runs (at the front of its ``PATH``): each is a client of a few
    stdlib imports that hands the server its own stdin, stdout and stderr and exits as the
    child did (:func:`tests.fork_wire.main`; ``python`` forwards ``python FILE`` and ``python
    -m MODULE`` only)."""
    address = _address(server)
    with _lock:
        made = _commands.get(server)
        if made is None:  # (in the server's own folder, which it removes when it ends)
            made = _commands[server] = Path(address).parent / "bin"
            made.mkdir()
            wire = Path(__file__).with_name("fork_wire.py")
            for name in ("agent-session", "python"):
                script = made / name
                script.write_text(
                    f'#!/bin/sh\nexec "{sys.executable}" -S "{wire}" "{address}" "$0" "$@"\n'
                )
                script.chmod(0o755)
    return made


def _address(server: str) -> str:
    """The server's socket (started on first use; it exits when this process does)."""
    with _lock:
        running = _servers.get(server)
        if running is None or running[0].poll() is not None:
            address = os.path.join(tempfile.mkdtemp(prefix="agent-session-forkserver-"), "sock")
            process = subprocess.Popen(
                [sys.executable, "-m", "tests.forkserver", address, str(os.getpid()), server],
                cwd=REPO,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
            )
            assert process.stdout is not None
            ready = process.stdout.readline()  # (after its imports, once it listens)
            assert ready == b"ready\n", f"the fork server did not start: {ready!r}"
            running = _servers[server] = (process, address)
        return running[1]


# --- the server --------------------------------------------------------------------------


def _serve(address: str, parent: int, server: str) -> None:
    for name in PRELOADS[server]:
        importlib.import_module(name)
    gc.freeze()  # (no child's collections walk the preloaded objects, nor copy their pages)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # (its handlers are reaped at once)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(address)
    listener.listen(64)
    listener.settimeout(1.0)
    print("ready", flush=True)
    while True:
        try:
            conn, _ = listener.accept()
        except TimeoutError:
            if os.getppid() != parent:  # (the test process is gone)
                shutil.rmtree(os.path.dirname(address), ignore_errors=True)
                return
            continue
        if os.fork() == 0:  # a handler: forks the child, reports its pid and its end
            listener.close()
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            _handle(conn)
            os._exit(0)
        conn.close()


def _handle(conn: socket.socket) -> None:
    conn.settimeout(None)
    received = receive_request(conn)
    if received is None:
        return
    what, fds = received
    pid = os.fork()
    if pid == 0:
        conn.close()
        _child(what, fds)
    for fd in fds:
        os.close(fd)
    send(conn, pid=pid)
    _, status = os.waitpid(pid, 0)
    with contextlib.suppress(OSError):  # (the test may have stopped listening)
        send(conn, returncode=os.waitstatus_to_exitcode(status))
    conn.close()


def _fresh_streams() -> None:
    """New ``sys.stdin``, ``stdout`` and ``stderr`` over the child's descriptors, as an
    interpreter starting with its environment makes them (the server's were made for its own
    descriptors: buffering, seekability), ``PYTHONIOENCODING`` and ``PYTHONUNBUFFERED``
    included."""
    given = os.environ.get("PYTHONIOENCODING", "")
    encoding, _, errors = given.partition(":")
    unbuffered = bool(os.environ.get("PYTHONUNBUFFERED"))
    for fd, name in enumerate(("stdin", "stdout", "stderr")):
        old: Any = getattr(sys, name)
        raw = io.FileIO(fd, "r" if fd == 0 else "w", closefd=False)
        buffered: Any = raw if unbuffered and fd > 0 else None  # (as ``python -u`` does)
        if buffered is None:
            buffered = io.BufferedReader(raw) if fd == 0 else io.BufferedWriter(raw)
        stream = io.TextIOWrapper(
            buffered,
            encoding=encoding or old.encoding,
            errors=(errors or old.errors) if fd < 2 else "backslashreplace",
            line_buffering=fd == 2 or raw.isatty(),
            write_through=unbuffered and fd > 0,
        )
        setattr(sys, name, stream)
        setattr(sys, f"__{name}__", stream)


def _child(what: dict[str, Any], fds: list[int]) -> None:
    """Become ``python -m MODULE``, ``python -c CODE`` or ``python FILE``: never returns."""
    code = 0
    try:
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
        for fd in fds:
            if fd > 2:
                os.close(fd)
        os.chdir(what["cwd"])
        os.environ.clear()
        os.environ.update(what["env"])
        _fresh_streams()
        importlib.reload(sys.modules[REARM])
        sys.argv = list(what["argv"])
        if "module" in what:
            sys.path[0] = what["cwd"]
            runpy.run_module(what["module"], run_name="__main__", alter_sys=True)
        else:  # ``python -c CODE`` or ``python FILE`` (whose argv[0] is the request's)
            path = what.get("path")
            sys.path[0] = "" if path is None else os.path.dirname(os.path.abspath(path))
            source = what["code"] if path is None else Path(path).read_bytes()
            # as ``python`` runs it: a ``__main__`` module of its own (which
            # ``typing.get_type_hints`` finds), compiled without this file's ``__future__``
            main = types.ModuleType("__main__")
            if path is not None:
                main.__file__ = path
            sys.modules["__main__"] = main
            exec(compile(source, path or "<string>", "exec", dont_inherit=True), main.__dict__)
    except SystemExit as exit:
        code = exit.code if isinstance(exit.code, int) else (0 if exit.code is None else 1)
        if not isinstance(exit.code, int | None):
            print(exit.code, file=sys.stderr)
    except BaseException:
        traceback.print_exc()
        code = 1
    finally:
        # What an interpreter does as it exits: wait for its threads, run its atexit
        # functions, flush its streams.
        with contextlib.suppress(BaseException):
            threading._shutdown()  # type: ignore[attr-defined]
        with contextlib.suppress(BaseException):
            atexit._run_exitfuncs()
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)


if __name__ == "__main__":
    _serve(sys.argv[1], int(sys.argv[2]), sys.argv[3])
