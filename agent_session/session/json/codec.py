"""The one JSON encoder and decoder of the project.

:func:`encode_json` writes exactly what JavaScript's ``JSON.stringify`` writes for the same
value: compact, keys in insertion (wire) order, non-ASCII as raw UTF-8, numbers in JavaScript's
shortest form (``1`` not ``1.0``, ``1e+21``, ``0.000001``). It expects values that went through
:func:`session.json.lossless.snapshot`, which stores every number in a form the encoder writes
JavaScript's way. :func:`decode_json` reads like ``JSON.parse``: no ``NaN``/``Infinity``
literals, invalid UTF-8 replaced by U+FFFD. Both handle any nesting depth: orjson does the work,
and a small iterative fallback takes over past orjson's depth limits.
"""

from __future__ import annotations

import json
import json.decoder
import re
from collections.abc import Callable
from typing import Any

import orjson

from agent_session.session.json.lossless import JsFloat, JsonValue, js_number_text

__all__ = ["comparison_key", "decode_json", "encode_json"]


def _default(value: object) -> orjson.Fragment:
    if type(value) is JsFloat:
        return orjson.Fragment(js_number_text(value).encode("ascii"))
    raise TypeError(f"{type(value).__name__} is not JSON; pass values through snapshot() first")


def encode_json(value: JsonValue) -> bytes:
    """Compact JSON bytes for a snapshot value, byte-identical to ``JSON.stringify``."""
    try:
        return orjson.dumps(value, default=_default)
    except TypeError as e:
        if "Recursion limit" not in str(e):
            raise
    return _encode_deep(value)


def comparison_key(value: JsonValue) -> bytes:
    """Bytes equal exactly when two snapshot values are deep-equal as JSON: key order does not
    matter, types do (``true`` differs from ``1``)."""
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS, default=_default)


def _scalar_text(value: object) -> bytes:
    if isinstance(value, float):
        return js_number_text(value).encode("ascii")
    return orjson.dumps(value)


def _encode_deep(value: JsonValue) -> bytes:
    """The same output as the fast path, for values nested past orjson's 255 levels."""
    out: list[bytes] = []
    stack: list[tuple[Any, bool]] = [(iter([(None, value)]), False)]
    closers: list[bytes] = [b""]
    first: list[bool] = [True]
    while stack:
        items, is_dict = stack[-1]
        for key, child in items:
            if not first[-1]:
                out.append(b",")
            first[-1] = False
            if is_dict:
                out.append(orjson.dumps(key))
                out.append(b":")
            if isinstance(child, dict):
                out.append(b"{")
                stack.append((iter(child.items()), True))
                closers.append(b"}")
                first.append(True)
                break
            if isinstance(child, list):
                out.append(b"[")
                stack.append((iter(enumerate(child)), False))
                closers.append(b"]")
                first.append(True)
                break
            out.append(_scalar_text(child))
        else:
            stack.pop()
            out.append(closers.pop())
            first.pop()
    return b"".join(out)


def decode_json(text: bytes | str) -> Any:
    """Parse one JSON document like ``JSON.parse``.

    Invalid UTF-8 is replaced by U+FFFD (as Node reads a file); ``NaN``, ``Infinity`` and
    trailing garbage are refused with ``ValueError``. Containers are plain ``dict``/``list``;
    pass the result through :func:`session.json.lossless.snapshot` with ``js_numbers=True`` to store
    it. Depth is unlimited.
    """
    if len(text) > _LARGE:
        return _decode_large(text)
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError as e:
        message = str(e)
        if isinstance(text, bytes) and "not valid UTF-8" in message:
            try:
                text.decode("utf-8")
            except UnicodeDecodeError:
                return decode_json(text.decode("utf-8", "replace"))
            raise  # valid bytes that escape a lone surrogate: not representable here
        if "depth limit" not in message:
            raise
    return _decode_deep(text.decode("utf-8", "replace") if isinstance(text, bytes) else text)


_LARGE = 4 * 1024 * 1024
"""Documents longer than this are parsed by the standard library: orjson's working memory
for one huge string is about 13 times its size, the standard parser's about twice."""


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"invalid JSON: {name} is not a JSON value")


def _decode_large(text: bytes | str) -> Any:
    if isinstance(text, bytes):
        try:
            decoded = text.decode("utf-8")
        except UnicodeDecodeError:
            decoded = text.decode("utf-8", "replace")
    else:
        decoded = text
    try:
        return json.loads(decoded, parse_constant=_refuse_constant)
    except RecursionError:
        return _decode_deep(decoded)


_WS = re.compile(r"[ \t\n\r]*")
_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?")
_scanstring: Callable[[str, int, bool], tuple[str, int]] = json.decoder.scanstring  # type: ignore[attr-defined]
_LITERALS = {"true": True, "false": False, "null": None}


def _scalar(text: str, pos: int) -> tuple[Any, int]:
    """The string, number or literal starting at ``pos``, and the position after it."""
    if text.startswith('"', pos):
        value: Any
        value, end = _scanstring(text, pos + 1, True)
        return value, end
    number = _NUMBER.match(text, pos)
    if number is not None:
        literal = number.group()
        is_float = number.group(1) or number.group(2)
        return (float(literal) if is_float else int(literal)), number.end()
    for word, literal_value in _LITERALS.items():
        if text.startswith(word, pos):
            return literal_value, pos + len(word)
    raise ValueError(f"invalid JSON: unexpected character at char {pos}")


def _decode_deep(text: str) -> Any:
    """An iterative JSON parser for documents nested past orjson's 1,024 levels."""
    pos = 0
    stack: list[Any] = []  # open containers
    keys: list[str | None] = []  # pending key for each open dict
    result: Any = None
    have_result = False

    def fail(what: str) -> ValueError:
        return ValueError(f"invalid JSON: {what} at char {pos}")

    while True:
        pos = _WS.match(text, pos).end()  # type: ignore[union-attr]
        container = stack[-1] if stack else None
        if isinstance(container, dict) and keys[-1] is None:
            if text.startswith("}", pos) and not container:
                value: Any = stack.pop()
                keys.pop()
                pos += 1
            else:
                if not text.startswith('"', pos):
                    raise fail("expected a string key")
                key, pos = _scanstring(text, pos + 1, True)
                pos = _WS.match(text, pos).end()  # type: ignore[union-attr]
                if not text.startswith(":", pos):
                    raise fail("expected ':'")
                keys[-1] = key
                pos += 1
                continue
        elif isinstance(container, list) and not container and text.startswith("]", pos):
            value = stack.pop()
            keys.pop()
            pos += 1
        else:
            char = text[pos : pos + 1]
            if char == "{":
                stack.append({})
                keys.append(None)
                pos += 1
                continue
            if char == "[":
                stack.append([])
                keys.append(None)
                pos += 1
                continue
            value, pos = _scalar(text, pos)
        # Attach the completed value to its parent, then consume ',' or the closing bracket.
        while True:
            if not stack:
                result, have_result = value, True
                break
            parent = stack[-1]
            if isinstance(parent, dict):
                parent[keys[-1]] = value
                keys[-1] = None
            else:
                parent.append(value)
            pos = _WS.match(text, pos).end()  # type: ignore[union-attr]
            closer = "}" if isinstance(parent, dict) else "]"
            if text.startswith(",", pos):
                pos += 1
                if isinstance(parent, dict):
                    pos = _WS.match(text, pos).end()  # type: ignore[union-attr]
                    if not text.startswith('"', pos):
                        raise fail("expected a string key")
                break
            if text.startswith(closer, pos):
                pos += 1
                value = stack.pop()
                keys.pop()
                continue
            raise fail(f"expected ',' or '{closer}'")
        if have_result:
            break
    if _WS.match(text, pos).end() != len(text):  # type: ignore[union-attr]
        raise fail("trailing data")
    return result
