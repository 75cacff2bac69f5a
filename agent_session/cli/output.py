"""How the commands write: JSON lines with the wire format's camelCase keys, and a progress
line on a terminal (nothing extra when the output is piped)."""

from __future__ import annotations

import json
import sys
import time
from typing import Any, TextIO

__all__ = ["Progress", "ShownText", "json_line", "print_table", "terminal_text"]

_CONTROLS = {
    **{c: f"\\x{c:02x}" for c in (*range(0x20), *range(0x7F, 0xA0))},
    **{c: f"\\u{c:04x}" for c in (*range(0x202A, 0x202F), *range(0x2066, 0x206A))},
}
"""C0 and C1 controls, DEL, and the bidirectional overrides and isolates: what a terminal
would act on (a colour, a cursor move, a reordered line) instead of showing."""


_IN_LINES = {c: shown for c, shown in _CONTROLS.items() if c not in (0x09, 0x0A)}
"""The controls a stream of lines escapes: all but the tab and the line break."""


def terminal_text(text: str) -> str:
    """``text`` safe to print in a table on a terminal: every control character (an escape
    sequence, a carriage return, a bidirectional override) shown as its ``\\x..`` or
    ``\\u....`` escape, everything else as is."""
    return text.translate(_CONTROLS)


def print_table(rows: list[list[str]]) -> None:
    """Print ``rows`` (the header first) as aligned columns, each cell as
    :func:`terminal_text` shows it (so a hostile cell neither acts on the terminal nor
    shifts the columns); trailing blanks are cut."""
    shown = [[terminal_text(cell) for cell in row] for row in rows]
    widths = [max(len(row[i]) for row in shown) for i in range(len(shown[0]))]
    for row in shown:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())


class ShownText:
    """A text stream (stdout) that shows a command's lines on a terminal as text: every
    control character of what a session holds (a terminal escape in an id or a message, a
    carriage return, a bidirectional override) is written as its escape, so no content of a
    store can move the cursor, clear the screen, retitle the window or reorder a line. Tabs
    and line breaks pass; everything else of the stream is the wrapped one's."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        """Write ``text`` with its controls escaped."""
        return self._stream.write(text.translate(_IN_LINES))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def json_line(value: Any) -> str:
    """``value`` as one compact JSON line (non-ASCII kept as is)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def say(as_json: bool, value: Any, text: str) -> None:
    """A command's result: ``value`` as one JSON line with ``--json``, else ``text``."""
    print(json_line(value) if as_json else text)


def say_action(as_json: bool, id: str, action: str, detail: str) -> None:
    """What a command did with one session: ``{id, action, detail}`` with ``--json``, else
    ``id: action — detail``."""
    say(as_json, {"id": id, "action": action, "detail": detail}, f"{id}: {action} — {detail}")


class Progress:
    """``[####....] 120/4000 verify`` redrawn in place on stderr, when stderr is a terminal
    and the work is long enough to need it (``total`` over ``threshold``); silent otherwise.
    Redraws at most ten times a second, and erases itself when done so the results printed
    to stdout read as if it had never been there."""

    def __init__(
        self, total: int, label: str, *, stream: TextIO | None = None, threshold: int = 20
    ) -> None:
        self.stream = stream or sys.stderr
        self.total = total
        self.label = label
        self.active = total > threshold and self.stream.isatty()
        self._drawn = 0.0

    def step(self, done: int) -> None:
        """Show that ``done`` of ``total`` are finished."""
        now = time.monotonic()
        if not self.active or (now - self._drawn < 0.1 and done < self.total):
            return
        self._drawn = now
        filled = int(30 * done / self.total)
        bar = "#" * filled + "." * (30 - filled)
        print(f"\r[{bar}] {done}/{self.total} {self.label}", end="", file=self.stream, flush=True)

    def say(self, text: str) -> None:
        """Print a result line on stdout, the progress line erased first (and redrawn at the
        next step)."""
        self.clear()
        print(text, flush=self.active)

    def clear(self) -> None:
        """Erase the progress line."""
        if self.active and self._drawn:
            print("\r\033[K", end="", file=self.stream, flush=True)
            self._drawn = 0.0
