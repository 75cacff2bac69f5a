"""The receiver, its headers and timeout, and the resource, configured the OpenTelemetry SDK's
way (``agent_session.otel.settings``): the standard ``OTEL_*`` variables under what is passed,
in the SDK's precedence; then the command and the live exporter against a real receiver."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_session import TraceSettingsError
from agent_session.cli import main
from agent_session.otel.settings import otlp_settings
from tests.otlp_receiver import receiver
from tests.test_otel_export import _plant

BASE = "OTEL_EXPORTER_OTLP_"


def test_an_explicit_endpoint_wins_and_a_base_url_gains_the_signal_s_path() -> None:
    env = {BASE + "ENDPOINT": "http://generic:4318", BASE + "TRACES_ENDPOINT": "http://t:1/x"}
    assert otlp_settings(endpoint="http://mine:9", environ=env).url == "http://mine:9/v1/traces"
    assert otlp_settings(endpoint="http://mine:9/", environ=env).url == "http://mine:9/v1/traces"
    assert otlp_settings(endpoint="http://mine:9/in", environ=env).url == "http://mine:9/in"
    assert otlp_settings("logs", endpoint="http://m:9", environ={}).url == "http://m:9/v1/logs"


def test_the_signal_s_own_variable_is_used_as_given_then_the_generic_one_gains_the_path() -> None:
    both = {BASE + "ENDPOINT": "http://generic:4318/base", BASE + "TRACES_ENDPOINT": "http://t:1"}
    assert otlp_settings(environ=both).url == "http://t:1"
    assert otlp_settings("logs", environ=both).url == "http://generic:4318/base/v1/logs"
    assert otlp_settings(environ={BASE + "ENDPOINT": "http://g:2/"}).url == "http://g:2/v1/traces"
    assert otlp_settings(environ={}).url == "http://localhost:4318/v1/traces"
    assert otlp_settings(environ={BASE + "TRACES_ENDPOINT": ""}).url == (
        "http://localhost:4318/v1/traces"
    )


def test_headers_come_from_the_signal_s_variable_then_the_generic_one_percent_decoded() -> None:
    env = {BASE + "HEADERS": "a=1,b=two%20words", BASE + "TRACES_HEADERS": "c=3"}
    assert otlp_settings(environ=env).headers == {"c": "3"}
    assert otlp_settings("logs", environ=env).headers == {"a": "1", "b": "two words"}
    assert otlp_settings(headers={"k": "v"}, environ=env).headers == {"k": "v"}
    assert otlp_settings(environ={}).headers == {}


def test_the_timeout_is_explicit_then_the_signal_s_then_the_generic_one_in_seconds() -> None:
    env = {BASE + "TIMEOUT": "3", BASE + "TRACES_TIMEOUT": "1.5"}
    assert otlp_settings(environ=env).timeout == 1.5
    assert otlp_settings("logs", environ=env).timeout == 3.0
    assert otlp_settings(timeout=7, environ=env).timeout == 7
    assert otlp_settings(environ={}).timeout == 10.0
    for bad in ("soon", "0", "-2", "nan"):
        with pytest.raises(TraceSettingsError, match=f"{BASE}TIMEOUT must be a positive"):
            otlp_settings(environ={BASE + "TIMEOUT": bad})
    with pytest.raises(TraceSettingsError, match="positive number of seconds: 0"):
        otlp_settings(timeout=0, environ={})


def test_a_url_that_is_not_http_names_its_source_and_never_its_password() -> None:
    with pytest.raises(TraceSettingsError, match=f"{BASE}TRACES_ENDPOINT must be an http") as e:
        otlp_settings(environ={BASE + "TRACES_ENDPOINT": "ftp://u:hunter2@h/x"})
    assert "hunter2" not in str(e.value)
    with pytest.raises(TraceSettingsError, match="--endpoint must be an http"):
        otlp_settings(endpoint="localhost:4318", environ={})
    assert isinstance(e.value, ValueError)


def test_the_command_sends_where_the_environment_says_as_the_service_it_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _plant(tmp_path, "complete:2")
    with receiver() as got:
        monkeypatch.setenv(BASE + "ENDPOINT", got.url.removesuffix("/v1/traces"))
        monkeypatch.setenv(BASE + "HEADERS", "authorization=Bearer%20s3cret")
        monkeypatch.setenv("OTEL_SERVICE_NAME", "support-bot")
        monkeypatch.setenv("OTEL_RESOURCE_ATTRIBUTES", "service.name=ignored,team=agents")
        assert main(["export-otel", str(tmp_path), "--attempts", "1"]) == 0
    assert got.spans
    assert {s["service"] for s in got.spans} == {"support-bot"}
    assert {s["resource"]["team"] for s in got.spans} == {"agents"}
    assert {path for path, _ in got.seen} == {"/v1/traces"}
    assert {headers["authorization"] for _, headers in got.seen} == {"Bearer s3cret"}
    assert "s3cret" not in capsys.readouterr().out


def test_the_resource_s_service_name_then_the_default_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _plant(tmp_path, "complete:2")
    for environment, service in (({"team": "a"}, "agent-session"), ({"service.name": "x"}, "x")):
        pairs = ",".join(f"{k}={v}" for k, v in environment.items())
        monkeypatch.setenv("OTEL_RESOURCE_ATTRIBUTES", pairs)
        with receiver() as got:
            monkeypatch.setenv(BASE + "TRACES_ENDPOINT", got.url)
            assert main(["export-otel", str(tmp_path), "--attempts", "1"]) == 0
        assert {s["service"] for s in got.spans} == {service}


def test_a_bad_variable_is_a_usage_error_that_names_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _plant(tmp_path, "complete:2")
    monkeypatch.setenv(BASE + "ENDPOINT", "collector:4318")
    assert main(["export-otel", str(tmp_path)]) == 4
    assert f"{BASE}ENDPOINT must be an http:// or https:// URL" in capsys.readouterr().err
