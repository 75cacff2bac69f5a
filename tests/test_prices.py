"""A price table: what a step cost, by exact model name or the longest ``prefix*`` pattern, with
cached input priced apart; a bad table is refused whole with the file and the entry named, and
``--prices`` with one is a usage error of the commands that take it."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agent_session.see.prices import PriceTable, PriceTableError, read_prices
from tests.test_cli import cli


def _table(tmp_path: Path, table: Any) -> Path:
    path = tmp_path / "prices.json"
    path.write_text(json.dumps(table), encoding="utf-8")
    return path


def test_a_model_is_priced_by_its_name_or_the_longest_pattern(tmp_path: Path) -> None:
    models = {
        "claude-sonnet-4-5": {"input": 3, "output": 15},
        "gpt-4.1*": {"input": 2, "output": 8},
        "gpt-4.1-mini*": {"input": 0.4, "output": 1.6},
    }
    table = read_prices(_table(tmp_path, {"currency": "EUR", "models": models}))
    assert table.currency == "EUR"
    usage = {"inputTokens": 1_000, "outputTokens": 500}
    assert table.cost("claude-sonnet-4-5", usage) == pytest.approx(0.003 + 0.0075)
    assert table.cost("gpt-4.1-2025-04-14", usage) == pytest.approx(0.002 + 0.004)
    assert table.cost("gpt-4.1-mini-2025", usage) == pytest.approx(0.0004 + 0.0008)
    assert table.cost("claude-sonnet-4", usage) is None  # not a pattern: exact names only
    assert table.cost("claude-sonnet-4-5", None) is None  # no usage is no cost, not zero
    assert table.cost(None, usage) is None


def test_cached_input_is_priced_apart_and_taken_out_where_the_input_holds_it() -> None:
    anthropic = {"input": 3, "output": 15, "cacheRead": 0.3, "cacheWrite": 3.75}
    openai = {"input": 2, "output": 8, "cacheRead": 0.5, "inputIncludesCacheRead": True}
    table = PriceTable("USD", {"a": anthropic, "o": openai})
    usage = {"inputTokens": 1_000, "outputTokens": 0, "cacheReadTokens": 4_000}
    # Anthropic counts cached tokens apart from its input: both are priced
    assert table.cost("a", {**usage, "cacheWriteTokens": 200}) == pytest.approx(
        0.003 + 0.0012 + 0.00075
    )
    # OpenAI's input already holds them: 1,000 input of which 400 were read from the cache
    assert table.cost("o", {**usage, "cacheReadTokens": 400}) == pytest.approx(0.0012 + 0.0002)


@pytest.mark.parametrize(
    ("table", "said"),
    [
        ([], 'must be an object with a "models" object'),
        ({"models": {"m": {"input": -1}}}, "model 'm': input must be a number ≥ 0, not -1"),
        ({"models": {"m": {"input": True}}}, "input must be a number ≥ 0, not True"),
        ({"models": {"m": {"output": "3"}}}, "output must be a number ≥ 0, not '3'"),
        ({"models": {"m": {"inptu": 3}}}, "unknown price 'inptu' (known: input, output"),
        ({"models": {"m": {}}}, "model 'm': must be an object of prices per million tokens"),
        ({"models": {"m": {"inputIncludesCacheRead": 1}}}, "must be true or false"),
        ({"currency": 7, "models": {}}, "the currency must be a name"),
    ],
)
def test_a_bad_table_is_refused_naming_the_file_and_the_entry(
    tmp_path: Path, table: Any, said: str
) -> None:
    path = _table(tmp_path, table)
    with pytest.raises(PriceTableError) as raised:
        read_prices(path)
    assert str(raised.value).startswith(f"price table {path}: ")
    assert said in str(raised.value)


def test_a_file_that_is_not_json_or_is_missing_is_refused(tmp_path: Path) -> None:
    bad = tmp_path / "prices.json"
    bad.write_text('{"models": {', encoding="utf-8")
    with pytest.raises(PriceTableError, match="cannot be read as JSON"):
        read_prices(bad)
    with pytest.raises(PriceTableError, match="cannot be read as JSON"):
        read_prices(tmp_path / "missing.json")
    nan = tmp_path / "nan.json"
    nan.write_text('{"models": {"m": {"input": NaN}}}', encoding="utf-8")
    with pytest.raises(PriceTableError, match="input must be a number"):
        read_prices(nan)


@pytest.mark.parametrize("command", ["view", "serve", "export-otel"])
def test_a_bad_table_is_a_usage_error_of_each_command_that_takes_one(
    tmp_path: Path, command: str
) -> None:
    store = tmp_path / "s"
    cli("demo", "--store", str(store), "--session-id", "one", "--crash", "none", "--turns", "1")
    path = _table(tmp_path, {"models": {"m": {"input": -1}}})
    args = {"view": ["one"], "serve": ["--port", "0"], "export-otel": []}[command]
    refused = cli(command, str(store), *args, "--prices", str(path), check_rc=4)
    assert f"price table {path}: model 'm': input must be a number ≥ 0" in refused.stderr
    assert "Traceback" not in refused.stderr


counts = st.integers(min_value=0, max_value=10**9)
prices = st.floats(min_value=0, max_value=1_000, allow_nan=False)


@given(counts, counts, counts, prices, prices, prices)
def test_a_cost_is_each_count_times_its_price(
    tokens_in: int, tokens_out: int, cached: int, price_in: float, price_out: float, read: float
) -> None:
    table = PriceTable("USD", {"m": {"input": price_in, "output": price_out, "cacheRead": read}})
    usage = {"inputTokens": tokens_in, "outputTokens": tokens_out, "cacheReadTokens": cached}
    cost = table.cost("m", usage)
    assert cost is not None
    expected = (tokens_in * price_in + tokens_out * price_out + cached * read) / 1e6
    assert math.isclose(cost, expected, rel_tol=1e-9, abs_tol=1e-12)
    assert cost >= 0
