"""``agent-session serve STORE [--port N] [--host 127.0.0.1]``: a read-only local web app over
any store: the session list (state, last write, events, size; filtered by state, sorted) and
each session's timeline page (:mod:`agent_session.see.view`), which follows a session being
written.

Built on the standard library's ``http.server``: a handful of GET pages for one user on one
machine need no framework, and the command then needs no extra. Every request reads through a
read-only backend (nothing is written, nothing repaired); pages carry a strict
Content-Security-Policy and show content as text. It binds to 127.0.0.1 unless told otherwise,
and refuses an address that is not a loopback one without ``--allow-remote``.
"""

from __future__ import annotations

import argparse
import asyncio
import errno
import html
import ipaddress
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, quote, unquote, urlsplit

from agent_session.cli.exits import IO_ERROR, OK, UserError
from agent_session.see.view import csp_hash

__all__ = ["serve"]

_STYLE = (
    "body{font:14px/1.5 system-ui,sans-serif;margin:16px;color:#1d2330}"
    "table{border-collapse:collapse}td,th{padding:4px 10px;border-bottom:1px solid #e3e6ee;"
    "text-align:left}th a{color:inherit}.interrupted,.awaiting-approval{color:#c62828;"
    "font-weight:600}"
)
_STATES = ("balanced", "open", "interrupted", "awaiting-approval", "torn tail")


def _loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


def _list_page(store: Any, query: dict[str, list[str]]) -> str:
    from agent_session.cli.commands import max_log_bytes, open_backend
    from agent_session.see.inventory import refine, rows

    async def listed() -> list[Any]:
        reader = open_backend(store, read_only=True)
        try:
            found = []
            for row in rows(store, max_log_bytes()):
                await refine(reader, row)
                found.append(row)
            return found
        finally:
            await reader.aclose()

    found = asyncio.run(listed())
    state = (query.get("state") or [""])[0]
    if state:
        found = [row for row in found if row.state == state]
    order = (query.get("sort") or ["updated"])[0]
    if order == "id":
        found.sort(key=lambda row: row.id)
    else:
        found.sort(key=lambda row: -(row.updated_at or -1))
    e = html.escape
    filters = (
        " ".join(f'<a href="/?state={quote(s)}">{e(s)}</a>' for s in _STATES)
        + ' <a href="/">all</a>'
    )
    body = "".join(
        f'<tr><td><a href="/session/{quote(row.id, safe="")}">{e(row.id)}</a></td>'
        f'<td class="{e(row.state)}">{e(row.state)}</td><td>{e(str(row.updated_at or "-"))}</td>'
        f"<td>{e(str(row.turns if row.turns is not None else '-'))}</td>"
        f"<td>{row.events}</td><td>{e(str(row.size if row.size is not None else '-'))}</td></tr>"
        for row in found
    )
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; '
        f"style-src '{csp_hash(_STYLE)}'; base-uri 'none'; form-action 'none'\">"
        f"<title>sessions of {e(store.shown)}</title><style>{_STYLE}</style></head><body>"
        f"<h1>Sessions of {e(store.shown)}</h1><p>state: {filters}</p><table><thead><tr>"
        '<th><a href="?sort=id">session</a></th><th>state</th>'
        '<th><a href="?sort=updated">updated (ms)</a></th><th>turns</th><th>events</th>'
        "<th>bytes</th>"
        f'</tr></thead><tbody id="sessions">{body}</tbody></table></body></html>'
    )


def _session(store: Any, id: str) -> tuple[dict[str, Any], Any]:
    from agent_session.cli.commands import open_backend

    async def read() -> tuple[dict[str, Any], Any]:
        reader = open_backend(store, read_only=True)
        try:
            examined = await reader.diagnose(id)
            return examined.session.header.to_json(), examined.session.events
        finally:
            await reader.aclose()

    return asyncio.run(read())


class _Handler(BaseHTTPRequestHandler):
    store: Any = None

    def do_GET(self) -> None:
        from agent_session.see.view import page, timeline
        from agent_session.session import SessionError

        url = urlsplit(self.path)
        try:
            if url.path == "/":
                self._send(200, "text/html", _list_page(self.store, parse_qs(url.query)))
            elif url.path.startswith("/session/"):
                id = unquote(url.path.removeprefix("/session/"))
                header, events = _session(self.store, id)
                live = f"/api/session/{quote(id, safe='')}"
                self._send(200, "text/html", page(header, events, live=live))
            elif url.path.startswith("/api/session/"):
                header, events = _session(
                    self.store, unquote(url.path.removeprefix("/api/session/"))
                )
                self._send(200, "application/json", json.dumps(timeline(header, events)))
            else:
                self._send(404, "text/plain", "not found")
        except (SessionError, OSError, ValueError) as e:
            self._send(404 if "not found" in str(e) else 500, "text/plain", str(e))

    def _send(self, status: int, kind: str, body: str) -> None:
        data = body.encode()
        self.send_response(status)
        self.send_header("Content-Type", f"{kind}; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        return None


async def serve(args: argparse.Namespace) -> int:
    """Serve until interrupted (Ctrl-C)."""
    from agent_session.cli.commands import check_exists

    if not _loopback(args.host) and not args.allow_remote:
        raise UserError(
            f"{args.host} is not a loopback address: the pages show everything the sessions "
            "hold; pass --allow-remote to serve them there anyway"
        )
    check_exists(args.store)
    handler = type("Handler", (_Handler,), {"store": args.store})
    try:
        server = ThreadingHTTPServer((args.host, args.port), handler)
    except OSError as e:
        if e.errno != errno.EADDRINUSE:
            raise
        raise UserError(
            f"port {args.port} on {args.host} is already in use by another program: pass "
            "--port N for another one, or --port 0 for any free port",
            code=IO_ERROR,
        ) from None
    host, port = server.server_address[:2]
    host = host.decode() if isinstance(host, bytes) else host
    print(
        f"serving {args.store.shown} at http://{host}:{port}/ (read-only; Ctrl-C stops)", flush=True
    )
    # (it looks for shutdown() every 0.05 s, not the default 0.5 s each stop would wait)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        await asyncio.Event().wait()
    finally:
        server.shutdown()
        server.server_close()
    return OK
