"""Redaction at the sinks: ``export``, ``export-otel``, ``view`` and ``serve`` rewrite what
leaves the store by ``--redact``'s rules, and the log is never changed."""

from __future__ import annotations

import asyncio
import json
import re
import urllib.request
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agent_session.cli import main
from agent_session.governance.redaction import redaction
from tests.forkserver import start_module
from tests.otlp_receiver import receiver
from tests.test_cli import cli
from tests.test_integrity import raw
from tests.test_retention import write_session

SECRET = "sk-ant-api03-Zq8v2LmN4pR7tX1yB6cD"
EMAIL = "ana.lopez@example.org"
TEXT = f"my key is {SECRET}, mail {EMAIL}, case ana-4471, password=hunter2 please"


@pytest.fixture
def store(tmp_path: Path) -> str:
    root = str(tmp_path / "s")
    asyncio.run(write_session(root, "c", text=TEXT, turns=2))
    return root


def leaked(text: str) -> list[str]:
    return [s for s in (SECRET, EMAIL, "hunter2", "ana-4471") if s in text]


def test_export_redacts_by_rule_and_stays_a_valid_request(store: str) -> None:
    before = raw(store, "c")
    plain = cli("export", store, "c", "--format", "openai").stdout
    assert leaked(plain) == [SECRET, EMAIL, "hunter2", "ana-4471"]
    rules = ("--redact", "secrets", "--redact", "emails", "--redact", r"pattern:ana-\d+")
    shown = cli("export", store, "c", "--format", "openai", *rules).stdout
    assert leaked(shown) == []
    assert "password=[redacted secret]" in shown
    assert "[redacted email]" in shown
    content = cli("export", store, "c", "--format", "anthropic", "--redact", "content").stdout
    assert leaked(content) == []
    assert "please" not in content
    request = json.loads(content)
    assert [m["role"] for m in request["messages"]] == ["user", "assistant"] * 2
    assert raw(store, "c") == before  # the log is never changed


def test_view_and_an_audit_export_redact(store: str, tmp_path: Path) -> None:
    page = tmp_path / "c.html"
    cli("view", store, "c", "-o", str(page), "--redact", "secrets", "--redact", "emails")
    html = page.read_text()
    assert leaked(html) == ["ana-4471"]
    assert "[redacted secret]" in html
    refused = cli("export", store, "c", "--format", "audit", "--redact", "emails", check_rc=4)
    assert "--redact content only" in refused.stderr
    bad = cli("view", store, "c", "--redact", "pattern:(", check_rc=4)
    assert "not a regular expression" in bad.stderr


def test_serve_redacts_the_list_and_each_page(store: str) -> None:
    server = start_module("agent_session", "serve", store, "--port", "0", "--redact", "content")
    try:
        assert server.stdout is not None
        line = server.stdout.readline()
        base = line.split(" at ")[1].split()[0].rstrip("/")
        for path in ("/", "/session/c", "/api/session/c"):
            with urllib.request.urlopen(base + path, timeout=30) as response:
                body = response.read().decode()
            assert leaked(body) == [], path
            assert "please" not in body
        assert "redacted: " in body
    finally:
        server.kill()
        server.wait(timeout=30)


def test_export_otel_redacts_full_content(store: str) -> None:
    with receiver() as got:
        rules = ["--redact", "secrets", "--redact", "emails"]
        code = main(["export-otel", store, "--endpoint", got.url, "--content", "full", *rules])
        assert code == 0
        sent = json.dumps([span["attributes"] for span in got.spans])
    assert SECRET not in sent
    assert EMAIL not in sent
    assert "[redacted secret]" in sent


_SHAPE = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=30),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(
            st.sampled_from(["type", "role", "id", "text", "args"]), inner, max_size=4
        )
    ),
    max_leaves=20,
)


@given(_SHAPE, st.sampled_from([["secrets"], ["emails"], ["content"], ["secrets", "emails"]]))
def test_redaction_keeps_keys_and_non_text_and_is_stable(value: object, rules: list[str]) -> None:
    redact = redaction(rules)
    assert redact is not None
    once = redact.value(value)

    def skeleton(v: object) -> object:
        if isinstance(v, dict):
            return {k: skeleton(x) for k, x in v.items()}
        if isinstance(v, list):
            return [skeleton(x) for x in v]
        return "s" if isinstance(v, str) else v

    assert skeleton(once) == skeleton(value)
    if "content" not in rules:
        assert redact.value(once) == once  # (a mask is not a secret or an address again)


@given(st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789", min_size=16, max_size=40))
def test_every_key_shaped_secret_is_masked(tail: str) -> None:
    redact = redaction(["secrets"])
    assert redact is not None
    for secret in (f"sk-{tail}", f"sk-ant-{tail}", f"Bearer {tail}"):
        shown = redact.text(f"use {secret} now")
        assert secret not in shown
        assert re.fullmatch(r"use \[redacted secret\] now", shown)
