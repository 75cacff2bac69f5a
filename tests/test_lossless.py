"""The lossless-JSON boundary and the encoder (DESIGN "Lossless JSON")."""

from __future__ import annotations

import copy
import gzip
import json
import math
import pickle
import struct
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent_session.session import (
    FrozenDict,
    FrozenList,
    JsFloat,
    JsonValueError,
    decode_json,
    encode_json,
)
from agent_session.session.json.lossless import MAX_SAFE_INTEGER, js_number_text, snapshot, thaw
from tests.sweeps import examples

DATA = Path(__file__).parent / "data"


class Opaque:
    pass


@pytest.mark.parametrize(
    ("value", "path", "reason"),
    [
        ({"a": float("nan")}, "data.a", "is nan"),
        ({"a": [1, float("inf")]}, "data.a[1]", "is inf"),
        ({"a": -float("inf")}, "data.a", "is -inf"),
        ({"a": -0.0}, "data.a", "is -0.0"),
        ({"a": 2**53}, "data.a", "outside the JSON safe range"),
        ({"a": -(2**53)}, "data.a", "outside the JSON safe range"),
        ({1: "x"}, "data", "non-str key 1"),
        ({"k": {None: 1}}, "data.k", "non-str key None"),
        ({"s": "\ud800"}, "data.s", "lone surrogate U+D800"),
        ({"\udc00": 1}, 'data["\\udc00"]', "lone surrogate U+DC00"),
        ({"b": b"raw"}, "data.b", "is bytes"),
        ({"b": bytearray(b"x")}, "data.b", "is bytearray"),
        ({"s": {1, 2}}, "data.s", "is a set"),
        ({"s": frozenset()}, "data.s", "is a frozenset"),
        ({"t": (1, {2})}, "data.t[1]", "is a set"),
        ({"o": Opaque()}, "data.o", "Opaque, which is not JSON"),
        ({"f": len}, "data.f", "which is not JSON"),
        ({"message": {"content": [1, 2, object()]}}, "data.message.content[2]", "not JSON"),
        ({"weird key": [float("nan")]}, 'data["weird key"][0]', "is nan"),
    ],
)
def test_rejects_non_json_with_the_path(value: Any, path: str, reason: str) -> None:
    with pytest.raises(JsonValueError) as info:
        snapshot(value, "data")
    assert isinstance(info.value, TypeError)
    assert info.value.path == path
    assert reason in str(info.value)


def test_rejects_cycles_but_copies_shared_values() -> None:
    looped: dict[str, Any] = {"a": []}
    looped["a"].append(looped)
    with pytest.raises(JsonValueError, match=r"data\.a\[0\] refers back to itself"):
        snapshot(looped, "data")
    shared = [1, 2]
    copied = snapshot({"x": shared, "y": [shared, shared]})
    assert copied == {"x": [1, 2], "y": [[1, 2], [1, 2]]}


def test_accepts_the_json_values_and_copies_them() -> None:
    source = {"n": None, "t": True, "i": -MAX_SAFE_INTEGER, "f": 0.5, "s": "é✓", "l": [{}]}
    copied = snapshot(source)
    assert copied == source
    source["l"][0]["new"] = 1  # type: ignore[index]
    assert copied["l"] == [{}]  # type: ignore[index, call-overload]
    assert type(copied) is FrozenDict
    assert type(copied["l"]) is FrozenList  # type: ignore[index, call-overload]


def test_tuples_of_json_are_stored_as_arrays() -> None:
    assert snapshot({"t": (1, "a", [2])}) == {"t": [1, "a", [2]]}


def test_numbers_follow_javascript() -> None:
    copied: Any = snapshot([1.0, 2.5, 1e20, -3.0, True])
    assert copied == [1, 2.5, 1e20, -3, True]
    assert type(copied[0]) is int
    assert type(copied[3]) is int
    assert type(copied[1]) is JsFloat
    assert type(copied[2]) is JsFloat
    assert copied[4] is True
    assert encode_json(copied) == b"[1,2.5,100000000000000000000,-3,true]"


@pytest.mark.slow
def test_hundred_thousand_deep_nesting_without_recursion_error() -> None:
    deep: Any = "leaf"
    for _ in range(100_000):
        deep = [deep]
    copied = snapshot(deep, "data")
    encoded = encode_json(copied)
    assert encoded == b"[" * 100_000 + b'"leaf"' + b"]" * 100_000
    decoded = decode_json(encoded)
    assert encode_json(snapshot(decoded)) == encoded
    with pytest.raises(JsonValueError, match=r"data(\[0\]){1000}"):
        bad = float("nan")
        for _ in range(1000):
            bad = [bad]  # type: ignore[assignment]
        snapshot(bad, "data")


def test_snapshots_are_immutable() -> None:
    copied: Any = snapshot({"a": [1], "b": {"c": 2}})
    mutations = [
        lambda: copied.__setitem__("a", 2),
        lambda: copied.pop("a"),
        lambda: copied.update(x=1),
        lambda: copied.setdefault("z", 1),
        lambda: copied.clear(),
        lambda: copied["a"].append(2),
        lambda: copied["a"].extend([2]),
        lambda: copied["a"].__setitem__(0, 5),
        lambda: copied["a"].sort(),
        lambda: copied["b"].__delitem__("c"),
    ]
    for mutate in mutations:
        with pytest.raises(TypeError, match="immutable"):
            mutate()
    with pytest.raises(TypeError):
        copied["a"] += [3]
    assert copied == {"a": [1], "b": {"c": 2}}
    assert copy.deepcopy(copied) is copied
    assert pickle.loads(pickle.dumps(copied)) == copied
    assert thaw(copied) == {"a": [1], "b": {"c": 2}}
    assert type(thaw(copied)["a"]) is list


def test_number_text_matches_javascript_for_thousands_of_doubles() -> None:
    with gzip.open(DATA / "js_numbers.json.gz", "rt") as f:
        pairs = json.load(f)
    assert len(pairs) > 4000
    for hex_bits, expected in pairs:
        value = struct.unpack(">d", bytes.fromhex(hex_bits))[0]
        assert js_number_text(value) == expected, value
        if not (value.is_integer() and abs(value) <= MAX_SAFE_INTEGER):
            assert encode_json(snapshot(value)) == expected.encode()


def test_decoder_reads_like_json_parse() -> None:
    assert decode_json(b'{"a":"\xff"}') == {"a": "\ufffd"}
    for bad in (b"NaN", b"[Infinity]", b"[1,]", b'{"a":1} x', b""):
        with pytest.raises(ValueError):
            decode_json(bad)
    deep = b"[" * 5000 + b"]" * 5000
    assert encode_json(snapshot(decode_json(deep))) == deep
    for bad in (b"[" * 5000 + b"]" * 4999, b"[" * 2000 + b"1,]" + b"]" * 1999):
        with pytest.raises(ValueError, match="invalid JSON"):
            decode_json(bad)


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-MAX_SAFE_INTEGER, max_value=MAX_SAFE_INTEGER)
    | st.floats(allow_nan=False, allow_infinity=False).filter(
        lambda f: not (f == 0 and math.copysign(1, f) < 0)
    )
    | st.text(),
    lambda children: (
        st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=8), children, max_size=5)
    ),
    max_leaves=30,
)


@settings(max_examples=examples(400), deadline=None)
@given(json_values)
def test_encode_decode_encode_is_the_identity(value: Any) -> None:
    encoded = encode_json(snapshot(value))
    again = encode_json(snapshot(decode_json(encoded), js_numbers=True))
    assert again == encoded
    assert snapshot(orjson.loads(encoded), js_numbers=True) == snapshot(value)


@settings(max_examples=examples(200), deadline=None)
@given(json_values)
def test_snapshot_equals_its_input(value: Any) -> None:
    assert snapshot(value) == value
