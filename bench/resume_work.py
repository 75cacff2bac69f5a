"""How much work a resume of an interrupted log does: ``python -m bench.resume_work``.

Writes a 2,005-event session whose last step is open (2,000 streamed chunks), then resumes it
in a fresh runtime and backend (which repairs it: a ``step/end`` and a ``turn/end`` are
appended) and flushes. A profile hook counts the calls of the project's functions during the
resume and flush only, and the script prints how many file reads, log scans, validations,
closer computations, JSON encodings and fsyncs they took. These are counts, not times: they
do not drift with the machine.
"""

from __future__ import annotations

import asyncio
import collections
import os
import sys
import tempfile
import threading
from types import FrameType
from typing import Any

from agent_session.persistence_jsonl import JsonlPersistence
from agent_session.session import Runtime

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
_COUNTED = {
    "reads": ("FileOps.read", "FileOps.read_prefix", "FileOps.read_chunks"),
    "scans": ("scan_log",),
    "validations": ("validate_log",),
    "closers": ("closers",),
    "encode_json": ("encode_json",),
    "fsyncs": ("FileOps.fsync",),
}


class _Counter:
    def __init__(self) -> None:
        self.calls: collections.Counter[str] = collections.Counter()
        self.on = False

    def __call__(self, frame: FrameType, event: str, arg: Any) -> None:
        if self.on and event == "call" and frame.f_code.co_filename.startswith(_ROOT):
            self.calls[frame.f_code.co_qualname] += 1


async def _measure(root: str, counter: _Counter) -> dict[str, int]:
    runtime, backend = Runtime(), JsonlPersistence(root)
    runtime.install(backend)
    session = runtime.sessions.create("r")
    session.append("turn/start", {"turn": 1})
    message = {"type": "text", "text": "hi"}
    session.append(
        "user/message",
        {"id": "u1", "role": "user", "source": {"kind": "user"}, "content": [message]},
        surface_op="append",
    )
    session.append("step/start", {"turn": 1, "step": 1})
    session.append("step/end", {"turn": 1, "step": 1})
    chunk = {"type": "text-delta", "id": "t", "delta": "x"}
    for _ in range(2000):
        session.append("assistant/chunk", {"turn": 1, "step": 2, "chunk": chunk})
    session.append("step/start", {"turn": 1, "step": 2})
    await runtime.sessions.flush(session)
    await backend.aclose()

    runtime, backend = Runtime(), JsonlPersistence(root)
    runtime.install(backend)
    counter.on = True
    resumed = await runtime.sessions.resume("r")
    await runtime.sessions.flush(resumed)
    counter.on = False
    await backend.aclose()
    figures = {name: sum(counter.calls[q] for q in names) for name, names in _COUNTED.items()}
    return {"events": len(resumed.events), **figures}


def main() -> None:
    counter = _Counter()
    sys.setprofile(counter)
    threading.setprofile(counter)
    with tempfile.TemporaryDirectory() as root:
        figures = asyncio.run(_measure(root, counter))
    sys.setprofile(None)
    threading.setprofile(None)
    print(" ".join(f"{name}={value}" for name, value in figures.items()))


if __name__ == "__main__":
    main()
