"""``agent-session serve STORE [--port N] [--host 127.0.0.1]``: a read-only local web app over
any store: the session list (:mod:`agent_session.see.session_list`, drawn from the summaries
:mod:`agent_session.see.catalog` keeps) and each session's timeline page
(:mod:`agent_session.see.view`), which follows a session being written and leads back to the
list.

Built on the standard library's ``http.server``: a handful of GET pages for one user on one
machine need no framework, and the command then needs no extra. Every read goes through a
read-only backend (nothing is written, nothing repaired); pages carry a strict
Content-Security-Policy and show content as text. It binds to 127.0.0.1 unless told otherwise,
and refuses an address that is not a loopback one without ``--allow-remote``.
"""

from __future__ import annotations

import argparse
import asyncio
import errno
import ipaddress
import json
import threading
from dataclasses import replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, quote, unquote, urlsplit

from agent_session.cli.exits import IO_ERROR, OK, UserError
from agent_session.governance.redaction import Redaction, redaction
from agent_session.see.catalog import Catalog
from agent_session.see.prices import PriceTable

__all__ = ["serve"]


def _loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


def _session(store: Any, id: str, rules: Redaction | None) -> tuple[dict[str, Any], Any]:
    from agent_session.cli.commands import open_backend

    async def read() -> tuple[dict[str, Any], Any]:
        reader = open_backend(store, read_only=True)
        try:
            examined = await reader.diagnose(id)
            events = examined.session.events
            return examined.session.header.to_json(), rules.events(events) if rules else events
        finally:
            await reader.aclose()

    return asyncio.run(read())


class _Handler(BaseHTTPRequestHandler):
    store: Any = None
    catalog: Catalog | None = None
    prices: PriceTable | None = None
    rules: Redaction | None = None

    def do_GET(self) -> None:
        from agent_session.see.session_list import list_page
        from agent_session.see.view import page, timeline
        from agent_session.session import SessionError

        url = urlsplit(self.path)
        shown = {"prices": self.prices, "store": self.store.shown}
        try:
            if url.path == "/":
                assert self.catalog is not None
                query = {k: v[0] for k, v in parse_qs(url.query).items()}
                found, complete = self.catalog.current()
                if self.rules is not None:  # (a title is the first message's text)
                    rules = self.rules
                    found = [replace(row, title=rules.text(row.title)) for row in found]
                currency = self.prices.currency if self.prices else None
                body = list_page(found, complete, query, self.store.shown, currency)
                self._send(200, "text/html", body)
            elif url.path.startswith("/session/"):
                id = unquote(url.path.removeprefix("/session/"))
                header, events = _session(self.store, id, self.rules)
                live = f"/api/session/{quote(id, safe='')}"
                parent = header.get("parentSession")
                up = f"/session/{quote(parent, safe='')}" if isinstance(parent, str) else None
                body = page(header, events, live=live, back="/", parent_url=up, **shown)
                self._send(200, "text/html", body)
            elif url.path.startswith("/api/session/"):
                header, events = _session(
                    self.store, unquote(url.path.removeprefix("/api/session/")), self.rules
                )
                self._send(200, "application/json", json.dumps(timeline(header, events, **shown)))
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
    catalog = Catalog(args.store, args.prices)
    given = {"store": args.store, "catalog": catalog, "prices": args.prices}
    handler = type("Handler", (_Handler,), {**given, "rules": redaction(args.redact)})
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
