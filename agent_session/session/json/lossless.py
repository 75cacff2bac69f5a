"""The lossless-JSON boundary.

Everything the log stores must come back from disk exactly as it went in, on this side and on
the TypeScript reference's side. :func:`snapshot` is the one pass that enforces that: it
validates a value and returns a deep, immutable copy, or raises :class:`JsonValueError` naming
the path of the first offending value.

Accepted: ``None``, ``bool``, ``str`` without lone surrogates, ``int`` within
±(2**53 - 1), finite ``float`` other than ``-0.0``, ``list`` and ``dict`` with ``str`` keys.
Tuples of JSON values are stored as arrays. Rejected: NaN, ±inf, ``-0.0``, unsafe integers,
non-``str`` keys, lone surrogates, bytes, sets, any other object, and cycles. Nesting depth
is unlimited (the walk keeps its own stack, so a 100,000-deep list is fine).

Numbers follow JavaScript, which has one number type: a float with an integral value in the
safe range is stored as that ``int`` (``1.0`` becomes ``1``, as ``JSON.parse`` would read it
back). Any other float is stored as :class:`JsFloat`, a ``float`` that the encoder writes exactly
as ``JSON.stringify`` does.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, NoReturn, TypeAlias, TypeGuard

from agent_session.session.errors import JsonValueError
from agent_session.session.json.gcpause import untrack as _untrack

__all__ = [
    "MAX_SAFE_INTEGER",
    "FrozenDict",
    "FrozenList",
    "JsFloat",
    "JsonValue",
    "is_safe_int",
    "is_text",
    "snapshot",
    "thaw",
]

MAX_SAFE_INTEGER = 2**53 - 1
"""The largest integer JavaScript represents exactly (``Number.MAX_SAFE_INTEGER``)."""

JsonValue: TypeAlias = (
    bool | int | float | str | Sequence["JsonValue"] | Mapping[str, "JsonValue"] | None
)
"""A JSON value as the log stores it (read-only containers after :func:`snapshot`)."""


def _immutable(self: object, *args: object, **kwargs: object) -> NoReturn:
    raise TypeError(f"{type(self).__name__} is immutable: logged JSON values cannot be changed")


class FrozenDict(dict[str, Any]):
    """A ``dict`` that refuses mutation. Equal to, and encoded like, a plain dict."""

    __slots__ = ()
    __setitem__ = __delitem__ = __ior__ = _immutable
    clear = pop = popitem = setdefault = update = _immutable

    def __reduce__(self) -> tuple[type[FrozenDict], tuple[dict[str, Any]]]:
        return (FrozenDict, (dict(self),))

    def __copy__(self) -> FrozenDict:
        return self

    def __deepcopy__(self, memo: object) -> FrozenDict:
        return self


class FrozenList(list[Any]):
    """A ``list`` that refuses mutation. Equal to, and encoded like, a plain list."""

    __slots__ = ()
    __setitem__ = __delitem__ = __iadd__ = __imul__ = _immutable
    append = extend = insert = pop = remove = clear = sort = reverse = _immutable

    def __reduce__(self) -> tuple[type[FrozenList], tuple[list[Any]]]:
        return (FrozenList, (list(self),))

    def __copy__(self) -> FrozenList:
        return self

    def __deepcopy__(self, memo: object) -> FrozenList:
        return self


class JsFloat(float):
    """A non-integral (or unsafe-integral) JSON number. Its ``repr`` and its encoding are the
    text JavaScript's ``JSON.stringify`` writes for the same double."""

    __slots__ = ()

    def __repr__(self) -> str:
        return js_number_text(self)

    __str__ = __repr__


def is_safe_int(value: object) -> TypeGuard[int]:
    """True for an ``int`` (not ``bool``) within ±(2**53 - 1)."""
    return type(value) is int and -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER


def is_text(value: str) -> bool:
    """Whether the string ``value`` is valid text here: no lone surrogate."""
    if value.isascii():
        return True
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def js_number_text(value: float) -> str:
    """The text ``JSON.stringify`` writes for a finite double (ECMA-262 Number::toString)."""
    if value == 0:
        return "0"
    sign = "-" if value < 0 else ""
    mantissa, _, exponent = float.__repr__(abs(value)).partition("e")
    whole, _, fraction = mantissa.partition(".")
    digits = whole + fraction
    point = len(whole) + (int(exponent) if exponent else 0)
    stripped = digits.lstrip("0")
    point -= len(digits) - len(stripped)
    digits = stripped.rstrip("0")
    k, n = len(digits), point
    if k <= n <= 21:
        text = digits + "0" * (n - k)
    elif 0 < n <= 21:
        text = digits[:n] + "." + digits[n:]
    elif -6 < n <= 0:
        text = "0." + "0" * (-n) + digits
    else:
        e = n - 1
        mark = "+" if e >= 0 else "-"
        head = digits if k == 1 else digits[0] + "." + digits[1:]
        text = f"{head}e{mark}{abs(e)}"
    return sign + text


def _number(value: float, path: Sequence[object]) -> int | float:
    if math.isnan(value) or math.isinf(value):
        raise JsonValueError(_format_path(path), f"is {value!r}, which JSON cannot represent")
    if value == 0 and math.copysign(1.0, value) < 0:
        raise JsonValueError(_format_path(path), "is -0.0, which JSON cannot represent")
    if value.is_integer() and -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER:
        return int(value)
    return value if type(value) is JsFloat else JsFloat(value)


def _string(value: str, path: Sequence[object]) -> str:
    if not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as e:
            raise JsonValueError(
                _format_path(path),
                f"contains a lone surrogate U+{ord(value[e.start]):04X} at index {e.start}",
            ) from None
    return value if type(value) is str else str(value)


def _format_path(path: Sequence[object]) -> str:
    parts: list[str] = []
    for part in path:
        if isinstance(part, int):
            parts.append(f"[{part}]")
        elif isinstance(part, str) and part.isidentifier():
            parts.append(f".{part}" if parts else part)
        else:
            parts.append(f"[{_quote(str(part))}]")
    return "".join(parts) or "value"


def _quote(key: str) -> str:
    escaped = key.encode("unicode_escape", "backslashreplace").decode("ascii")
    return '"' + escaped.replace('"', '\\"') + '"'


def _describe(value: object) -> str:
    if isinstance(value, set | frozenset):
        return f"is a {type(value).__name__}, which JSON cannot represent"
    if isinstance(value, bytes | bytearray | memoryview):
        return f"is {type(value).__name__}; decode it to str first"
    if isinstance(value, int):
        return f"is the integer {value}, outside the JSON safe range ±(2**53 - 1)"
    return f"is a {type(value).__module__}.{type(value).__qualname__}, which is not JSON"


_Frame = tuple[Iterator[Any], Any, int, bool]  # (items, frozen output, source id, is_dict)
_dict_set = dict.__setitem__
_list_append = list.append


def snapshot(value: object, root: str = "value", *, js_numbers: bool = False) -> JsonValue:
    """Validate ``value`` as lossless JSON and return a deep immutable copy.

    ``root`` names the value in error paths (``data`` gives ``data.message.content[2]``).
    With ``js_numbers`` (used for text parsed from a log written by JavaScript), an integer
    outside the safe range is read as the nearest double instead of being refused, as
    ``JSON.parse`` does. Raises :class:`JsonValueError` (a ``TypeError``) naming the path.
    Never recurses, so depth is unlimited; shared sub-values are copied, cycles refused.
    """
    try:
        return _fast(value, 0, js_numbers)  # type: ignore[no-any-return]
    except _Slow:
        pass  # unusual input: the exact walk below copies it or says what is wrong
    path: list[object] = [root]
    top = _scalar(value, path, js_numbers)
    if top is not _CONTAINER:
        return top  # type: ignore[no-any-return]
    first = _open(value)
    active: set[int] = {id(value)}
    stack: list[_Frame] = [first]
    while stack:
        items, out, ident, is_dict = stack[-1]
        for item in items:
            if is_dict:
                key, child = item
                if type(key) is not str:
                    if not isinstance(key, str):
                        raise JsonValueError(
                            _format_path(path), f"has a non-str key {key!r} ({type(key).__name__})"
                        )
                    key = str(key)
                path.append(key)
                if not key.isascii():
                    _string(key, path)
            else:
                child = item
                path.append(len(out))
            copied = _scalar(child, path, js_numbers)
            if copied is _CONTAINER:
                child_id = id(child)
                if child_id in active:
                    raise JsonValueError(_format_path(path), "refers back to itself (a cycle)")
                active.add(child_id)
                frame = _open(child)
                if is_dict:
                    _dict_set(out, key, frame[1])
                else:
                    _list_append(out, frame[1])
                stack.append(frame)
                break
            if is_dict:
                _dict_set(out, key, copied)
            else:
                _list_append(out, copied)
            path.pop()
        else:
            stack.pop()
            active.discard(ident)
            if stack:
                path.pop()
    return first[1]  # type: ignore[no-any-return]


class _Slow(Exception):
    """The fast path met something it does not handle; the exact walk takes over."""


_FAST_DEPTH = 64
_MIN_SAFE = -MAX_SAFE_INTEGER
_SLOW = _Slow()


def _fast(value: Any, depth: int, js_numbers: bool) -> Any:
    """A recursive copy for the common case: plain types, ASCII-or-valid strings, safe
    numbers, shallow nesting. Anything else raises :class:`_Slow`. Scalars inside containers
    are checked inline (no call per scalar): this is the append hot path."""
    kind = type(value)
    if kind is dict or kind is FrozenDict:
        if depth > _FAST_DEPTH:
            raise _SLOW
        out: dict[str, Any] = {}
        for key, child in value.items():
            if type(key) is not str or not key.isascii():
                raise _SLOW
            child_kind = type(child)
            if child_kind is str:
                out[key] = child if child.isascii() else _fast(child, depth + 1, js_numbers)
            elif child_kind is int:
                if not _MIN_SAFE <= child <= MAX_SAFE_INTEGER:
                    raise _SLOW
                out[key] = child
            elif child is None or child_kind is bool:
                out[key] = child
            else:
                out[key] = _fast(child, depth + 1, js_numbers)
        frozen = FrozenDict(out)
        _untrack(frozen)
        return frozen
    if kind is str:
        if value.isascii():
            return value
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise _SLOW from None
        return value
    if kind is list or kind is FrozenList or kind is tuple:
        if depth > _FAST_DEPTH:
            raise _SLOW
        items: list[Any] = []
        append = items.append
        for child in value:
            child_kind = type(child)
            if child_kind is str:
                append(child if child.isascii() else _fast(child, depth + 1, js_numbers))
            elif child_kind is int:
                if not _MIN_SAFE <= child <= MAX_SAFE_INTEGER:
                    raise _SLOW
                append(child)
            elif child is None or child_kind is bool:
                append(child)
            else:
                append(_fast(child, depth + 1, js_numbers))
        frozen_list = FrozenList(items)
        _untrack(frozen_list)
        return frozen_list
    if kind is int:
        if _MIN_SAFE <= value <= MAX_SAFE_INTEGER:
            return value
        raise _SLOW
    if value is None or kind is bool:
        return value
    if kind is float or kind is JsFloat:
        if value != value or value in (_INF, -_INF) or (value == 0 and str(value)[0] == "-"):
            raise _SLOW
        if value.is_integer() and _MIN_SAFE <= value <= MAX_SAFE_INTEGER:
            return int(value)
        return value if kind is JsFloat else JsFloat(value)
    raise _SLOW


_INF = float("inf")


class _ContainerMarker:
    pass


_CONTAINER: Any = _ContainerMarker()


def _scalar(value: object, path: Sequence[object], js_numbers: bool) -> Any:
    """The copy of a scalar, or ``_CONTAINER`` for a dict/list the caller must walk."""
    kind = type(value)
    if value is None or kind is bool:
        return value
    if kind is str:
        text: str = value  # type: ignore[assignment]
        return text if text.isascii() else _string(text, path)
    if kind is int:
        if -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER:  # type: ignore[operator]
            return value
        if js_numbers:
            return _number(float(value), path)  # type: ignore[arg-type]
        raise JsonValueError(_format_path(path), _describe(value))
    if kind is float or kind is JsFloat:
        return _number(value, path)  # type: ignore[arg-type]
    if kind is dict or kind is list or kind is tuple or kind is FrozenDict or kind is FrozenList:
        return _CONTAINER
    # Subclasses of the plain types (an IntEnum, a str subclass) are stored by value.
    if isinstance(value, bool):
        return bool(value)
    if isinstance(value, str):
        return _string(str(value), path)
    if isinstance(value, int):
        return _scalar(int(value), path, js_numbers)
    if isinstance(value, float):
        return _number(float(value), path)
    if isinstance(value, dict | list | tuple):
        return _CONTAINER
    raise JsonValueError(_format_path(path), _describe(value))


def _open(container: Any) -> _Frame:
    if isinstance(container, dict):
        return (iter(container.items()), FrozenDict(), id(container), True)
    return (iter(container), FrozenList(), id(container), False)


def thaw(value: object) -> Any:
    """A plain, mutable deep copy (``dict``/``list``/``float``) of a snapshot, for callers
    that want ordinary Python values. Never recurses."""
    if not isinstance(value, dict | list):
        return float(value) if type(value) is JsFloat else value
    root: Any = {} if isinstance(value, dict) else []
    stack: list[tuple[Any, Any]] = [(value, root)]
    while stack:
        source, target = stack.pop()
        items = source.items() if isinstance(source, dict) else enumerate(source)
        for key, child in items:
            if isinstance(child, dict | list):
                copy: Any = {} if isinstance(child, dict) else []
                stack.append((child, copy))
            else:
                copy = float(child) if type(child) is JsFloat else child
            if isinstance(target, dict):
                target[key] = copy
            else:
                target.append(copy)
    return root
