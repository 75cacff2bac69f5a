"""A fork server for the kill tests' child interpreters: ``python -m MODULE ARGS`` run in a
process forked from an interpreter that already imported the frameworks (the OpenAI Agents
SDK, with the ``openai`` client, takes about 3 s to import), so that a test which kills and
resumes a job three times does not pay for three cold imports.

Each child is a real process of its own: its own pid, files, fsyncs and event loop, killed by
a real SIGKILL; it starts as ``python -m`` would start it (``__main__`` run by ``runpy``, the
request's argv, working directory and environment, stdin from ``/dev/null``). Only the
frameworks' modules are imported before the fork (:data:`PRELOAD`); none of this library's.

:func:`run_module` is ``subprocess.run(capture_output=True, text=True)`` for such a child.
One server per test process (a pytest worker) starts on first use and ends with it.
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import runpy
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import traceback
from pathlib import Path
from typing import Any

__all__ = ["run_module"]

PRELOAD = ("agents", "anthropic")
"""What the server imports before it forks: the frameworks only. This library is imported
afresh by each child, so whatever it reads from the environment when imported (failpoints)
is the child's."""

REPO = Path(__file__).resolve().parent.parent
_server: tuple[subprocess.Popen[bytes], str] | None = None
_lock = threading.Lock()


def run_module(
    module: str, *args: str, cwd: Path | str = REPO, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """Run ``python -m module *args`` forked from the server; what it printed and its exit
    status (negative: the signal that ended it), as ``subprocess.run`` gives them.

    Raises:
        subprocess.TimeoutExpired: It ran longer than ``timeout`` seconds (it is killed).
    """
    address = _address()
    with tempfile.TemporaryDirectory() as scratch:
        out, err = Path(scratch, "stdout"), Path(scratch, "stderr")
        request = {
            "module": module,
            "argv": [module, *args],
            "cwd": str(cwd),
            "env": dict(os.environ),
            "stdout": str(out),
            "stderr": str(err),
        }
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
            conn.settimeout(timeout)
            conn.connect(address)
            conn.sendall(json.dumps(request).encode() + b"\n")
            replies = conn.makefile("rb")
            pid = json.loads(replies.readline())["pid"]
            try:
                line = replies.readline()
            except TimeoutError:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
                raise subprocess.TimeoutExpired([module, *args], timeout) from None
            returncode = int(json.loads(line)["returncode"])
        return subprocess.CompletedProcess(
            [sys.executable, "-m", module, *args],
            returncode,
            out.read_text(errors="replace"),
            err.read_text(errors="replace"),
        )


def _address() -> str:
    """The server's socket (started on first use; it exits when this process does)."""
    global _server
    with _lock:
        if _server is None or _server[0].poll() is not None:
            address = os.path.join(tempfile.mkdtemp(prefix="agent-session-forkserver-"), "sock")
            server = subprocess.Popen(
                [sys.executable, "-m", "tests.forkserver", address, str(os.getpid())],
                cwd=REPO,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
            )
            assert server.stdout is not None
            ready = server.stdout.readline()  # (after its imports, once it listens)
            assert ready == b"ready\n", f"the fork server did not start: {ready!r}"
            _server = (server, address)
        return _server[1]


# --- the server --------------------------------------------------------------------------


def _serve(address: str, parent: int) -> None:
    for name in PRELOAD:
        __import__(name)
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
                os.unlink(address)
                os.rmdir(os.path.dirname(address))
                return
            continue
        if os.fork() == 0:  # a handler: forks the child, reports its pid and its end
            listener.close()
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            _handle(conn)
            os._exit(0)
        conn.close()


def _handle(conn: socket.socket) -> None:
    request: dict[str, Any] = json.loads(conn.makefile("rb").readline())
    pid = os.fork()
    if pid == 0:
        conn.close()
        _child(request)
    conn.sendall(json.dumps({"pid": pid}).encode() + b"\n")
    _, status = os.waitpid(pid, 0)
    conn.sendall(json.dumps({"returncode": os.waitstatus_to_exitcode(status)}).encode() + b"\n")
    conn.close()


def _child(request: dict[str, Any]) -> None:
    """Become ``python -m MODULE``: never returns."""
    code = 0
    try:
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        for fd, path in ((1, request["stdout"]), (2, request["stderr"])):
            os.dup2(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), fd)
        sys.argv = list(request["argv"])
        sys.path[0] = request["cwd"]
        runpy.run_module(request["module"], run_name="__main__", alter_sys=True)
    except SystemExit as exit:
        code = exit.code if isinstance(exit.code, int) else (0 if exit.code is None else 1)
        if not isinstance(exit.code, int | None):
            print(exit.code, file=sys.stderr)
    except BaseException:
        traceback.print_exc()
        code = 1
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)


if __name__ == "__main__":
    _serve(sys.argv[1], int(sys.argv[2]))
