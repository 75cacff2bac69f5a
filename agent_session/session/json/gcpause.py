"""Keeping CPython's cyclic garbage collector off acyclic event data: ``gc_paused()``
suspends it while a large structure is built, and ``untrack`` takes one object out of its view.

Reading a long log (decoding its lines, building the events of its packed rows) makes a few
objects per event, none of which can form a reference cycle. Each generation-2 collection
triggered midway re-traverses everything made so far, which costs more than the work itself
on a 100,000-event log. Reference counting still frees
garbage at once; only cycle detection waits until the outermost pause ends.

The pause is process-wide (the collector has no per-thread switch): while it lasts, cyclic
garbage made by other threads is collected later, not never. Nested and concurrent pauses are
counted, and the collector is re-enabled only if it was enabled when the first one began.

``untrack`` keeps a long log from adding tracked objects: an appended event, its field dict
and the frozen containers ``snapshot`` makes are untracked as they are built, and so are the
runs of deltas and the parts of live and loaded logs (``LazyRun``, ``event_part``). The events
a run builds when it is read (in bulk, under ``gc_paused``) stay tracked: untracking costs a
``ctypes`` call (about 0.2 µs) per object, and that cost has not been weighed against a read
log's collections.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

__all__ = ["gc_paused", "untrack"]

_lock = threading.Lock()
_holders = 0
_was_enabled = False


@contextmanager
def gc_paused() -> Iterator[None]:
    """Run the body with the cyclic collector disabled (see the module docstring)."""
    global _holders, _was_enabled
    with _lock:
        if _holders == 0:
            _was_enabled = gc.isenabled()
            gc.disable()
        _holders += 1
    try:
        yield
    finally:
        with _lock:
            _holders -= 1
            if _holders == 0 and _was_enabled:
                gc.enable()


def _untracker() -> Callable[[object], None]:
    """CPython's ``PyObject_GC_UnTrack``, or a no-op where there is none."""
    import ctypes
    import platform

    if platform.python_implementation() != "CPython":
        return lambda _: None
    function = ctypes.pythonapi.PyObject_GC_UnTrack
    function.argtypes = [ctypes.py_object]
    function.restype = None
    return function


untrack: Callable[[object], None] = _untracker()
"""Take an object out of the cyclic collector's view (reference counting still frees it).
Only for objects that can never be part of a reference cycle: the frozen JSON values of
events and the events themselves, which hold nothing else. A long log's events then cost
the full collections nothing; without this they are a third of an append."""
