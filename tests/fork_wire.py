"""The fork server's wire, and the commands that talk it from a shell.

A request is one JSON line sent with the child's three descriptors (stdin, stdout, stderr)
as ``SCM_RIGHTS``; the server answers with two JSON lines, ``{"pid": N}`` once the child is
forked and ``{"returncode": N}`` once it has ended (negative: the signal that ended it).

This module imports only ``json``, ``os``, ``signal``, ``socket`` and ``sys``, so that a
command a test's shell runs (``agent-session``, ``python FILE``, ``python -m MODULE``: see
:func:`main`) starts in a few hundredths of a second before the server forks the real one.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import sys
from typing import Any

__all__ = ["Reply", "main", "receive_request", "request", "send"]


class Reply:
    """The server's lines for one request, read as they come."""

    def __init__(self, conn: socket.socket) -> None:
        self.conn, self._buffer = conn, b""

    def line(self) -> dict[str, Any]:
        """The next line (blocking as the socket's timeout says: ``TimeoutError``, or
        ``BlockingIOError`` on a non-blocking socket, with nothing lost)."""
        while b"\n" not in self._buffer:
            chunk = self.conn.recv(4096)
            if not chunk:
                raise RuntimeError("the fork server closed the connection")
            self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        answer: dict[str, Any] = json.loads(line)
        return answer


def request(address: str, what: dict[str, Any], fds: list[int]) -> tuple[Reply, int]:
    """Ask the server at ``address`` for a child; the reply to read its end from, and its
    pid."""
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    conn.connect(address)
    socket.send_fds(conn, [json.dumps(what).encode() + b"\n"], fds)
    reply = Reply(conn)
    return reply, int(reply.line()["pid"])


def receive_request(conn: socket.socket) -> tuple[dict[str, Any], list[int]] | None:
    """On the server: one request and its descriptors (None: the client went away)."""
    data, fds, _, _ = socket.recv_fds(conn, 1 << 16, 3)
    while not data.endswith(b"\n"):
        more = conn.recv(1 << 16)
        if not more:
            for fd in fds:
                os.close(fd)
            return None
        data += more
    what: dict[str, Any] = json.loads(data)
    return what, fds


def send(conn: socket.socket, **fields: int) -> None:
    """On the server: one reply line."""
    conn.sendall(json.dumps(fields).encode() + b"\n")


def main(argv: list[str]) -> int:
    """``fork_wire.py ADDRESS COMMAND ARGS``, where COMMAND is the path of an
    ``agent-session`` or ``python`` command of :func:`tests.forkserver.command_directory`:
    run it forked from the server, on this process's own streams, and exit as it did (a
    signal that killed it kills this process too). ``agent-session`` runs the console script
    installed beside this interpreter, with COMMAND as its ``argv[0]``; ``python`` forwards
    ``python FILE ...`` and ``python -m MODULE ...``, and runs any other ``python`` command
    itself."""
    address, command, *args = argv
    if os.path.basename(command) == "agent-session":
        script = os.path.join(os.path.dirname(sys.executable), "agent-session")
        what: dict[str, Any] = {"path": script, "argv": [command, *args]}
    elif args and args[0] == "-m" and len(args) > 1:
        what = {"module": args[1], "argv": [args[1], *args[2:]]}
    elif args and not args[0].startswith("-"):
        what = {"path": args[0], "argv": args}
    else:
        os.execv(sys.executable, [sys.executable, *args])
    what.update(cwd=os.getcwd(), env=dict(os.environ))
    reply, _ = request(address, what, [0, 1, 2])
    code = int(reply.line()["returncode"])
    if code < 0:
        if -code not in (signal.SIGKILL, signal.SIGSTOP):  # (these have no handler to reset)
            signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
