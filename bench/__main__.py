"""``python -m bench [--json] [--runs N]``: the performance figures, each the median of several
runs after a warm-up, with ratios to baselines measured in the same run."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

import orjson

from agent_session.persistence_jsonl import JsonlPersistence
from agent_session.persistence_jsonl.encoder import encode_batch
from agent_session.session import Session
from agent_session.session.persistence.service import SessionPersistence
from bench.listing import ls_10k_sessions
from bench.many import Many, many_sessions
from bench.memory import load_peak_rss
from bench.pages import page_figures
from bench.postgres import DSN_ENV, bare_insert_commit, bare_insert_commit_async
from bench.reference import reference_figures, reference_installed
from bench.resume import resume_100k
from bench.sdk_sessions import sdk_session_figures
from bench.shards import sharded_checkpoints
from bench.stacks import open_backend, stack
from bench.workload import append_step, run_steps


async def step_checkpoints(
    root: str, steps: int = 200, chunks: int = 20, compression: str = "none"
) -> tuple[float, float]:
    """(median flush ms, checkpoints per second) for one session."""
    runtime, backend = stack(root, compression)
    session = runtime.sessions.create("one")
    total, flushes = await run_steps(runtime, session, steps, chunks)
    await backend.aclose()
    return statistics.median(flushes) * 1000, steps / total


MANY = 16
"""How many sessions the ``_16`` figures run at once."""


async def concurrent_checkpoints(root: str, compression: str = "none") -> Many:
    """:data:`MANY` sessions of 50 steps on one loop."""
    return await many_sessions(lambda: stack(root, compression), MANY, 50, 20)


def raw_fsync_ms(root: str, steps: int = 200, chunks: int = 20, *, paced: bool = False) -> float:
    """Median ``os.write`` + ``os.fsync`` of one step's encoded bytes, same directory.

    With ``paced``, each write + fsync follows the appends of a step (in a detached session,
    untimed), in the rhythm of the checkpoint workload: an fsync after a gap of CPU work costs
    more than back-to-back fsyncs on some disks and VMs."""
    session = Session.create("raw")
    session.append("turn/start", {"turn": 1})
    append_step(session, 1, chunks)
    data = encode_batch(session.events[1:], pack=True)
    os.makedirs(root, exist_ok=True)
    fd = os.open(os.path.join(root, "raw.bin"), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    times = []
    try:
        for step in range(2, steps + 2):
            if paced:
                first = len(session.events)
                append_step(session, step, chunks)
                data = encode_batch(session.events[first:], pack=True)
            start = time.perf_counter()
            os.write(fd, data)
            os.fsync(fd)
            times.append(time.perf_counter() - start)
    finally:
        os.close(fd)
    return statistics.median(times) * 1000


def raw_fsync_paced_ms(root: str, steps: int = 200, chunks: int = 20) -> float:
    """:func:`raw_fsync_ms` paced like the workload."""
    return raw_fsync_ms(root, steps, chunks, paced=True)


async def big_step(root: str, chunks: int = 100_000) -> tuple[float, float, float]:
    """(append events/s, cold-inspect events/s, load / orjson) for one step of ``chunks``."""
    events, append_seconds = await write_big_step(root, "none", chunks)
    fresh = JsonlPersistence(root)
    inspected, load_seconds = await timed_inspect(fresh, events)
    path = fresh.locate(inspected.header)
    assert path is not None
    with open(path, "rb") as f:
        lines = f.read().splitlines()
    start = time.perf_counter()
    for line in lines:
        orjson.loads(line)
    orjson_seconds = time.perf_counter() - start
    await fresh.aclose()
    return events / append_seconds, events / load_seconds, orjson_seconds / load_seconds


async def write_big_step(root: str, compression: str, chunks: int) -> tuple[int, float]:
    """Write session ``big``: a turn/start and one step of ``chunks`` streamed deltas, flushed
    once; (its event count, seconds from the first append to the end of the flush)."""
    runtime, backend = stack(root, compression)
    session = runtime.sessions.create("big")
    start = time.perf_counter()
    session.append("turn/start", {"turn": 1})
    append_step(session, 1, chunks)
    await runtime.sessions.flush(session)
    seconds = time.perf_counter() - start
    await backend.aclose()
    return len(session.events), seconds


async def backend_big_step(root: str, chunks: int = 100_000, kind: str = "sqlite") -> float:
    """Cold-inspect events/s of one step of ``chunks`` in a database backend (``kind``:
    ``sqlite`` or ``postgres``)."""
    events, _ = await write_big_step(root, kind, chunks)
    fresh = open_backend(root, kind)
    _, load_seconds = await timed_inspect(fresh, events)
    await fresh.aclose()
    return events / load_seconds


async def timed_inspect(backend: SessionPersistence, events: int) -> tuple[Any, float]:
    """A cold inspect of ``big`` (checked to hold ``events`` and the open turn's closer), and
    how long it took."""
    start = time.perf_counter()
    inspected = await backend.inspect("big")
    seconds = time.perf_counter() - start
    assert len(inspected.events) == events + 1
    return inspected, seconds


async def zstd_big_step(root: str, chunks: int = 100_000) -> tuple[float, float]:
    """(cold-inspect events/s, compressed / plain bytes) for one step of ``chunks`` written
    to a compressed log."""
    events, _ = await write_big_step(root, "zstd", chunks)
    fresh = JsonlPersistence(root)
    inspected, load_seconds = await timed_inspect(fresh, events)
    raw = await fresh.read_raw("big")
    assert raw is not None
    compressed = os.path.getsize(str(fresh.locate(inspected.header)))
    await fresh.aclose()
    return events / load_seconds, compressed / len(raw.content)


async def empty_flush_us(root: str, rounds: int = 20_000) -> float:
    runtime, backend = stack(root)
    session = runtime.sessions.create("empty")
    session.append("turn/start", {"turn": 1})
    await runtime.sessions.flush(session)
    flush = runtime.sessions.flush
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        await flush(session)
        times.append(time.perf_counter() - start)
    await backend.aclose()
    return statistics.median(times) * 1e6


def sqlite_checkpoints(root: str, steps: int = 200, chunks: int = 20) -> float:
    """The same workload in SQLite: WAL, synchronous=FULL, one transaction per step."""
    os.makedirs(root, exist_ok=True)
    db = sqlite3.connect(os.path.join(root, "sessions.db"), isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=FULL")
    db.execute(
        "CREATE TABLE events (session TEXT, seq INTEGER, body TEXT, PRIMARY KEY (session, seq))"
    )
    session = Session.create("sqlite")
    session.append("turn/start", {"turn": 1})
    written = 0
    start = time.perf_counter()
    for step in range(1, steps + 1):
        append_step(session, step, chunks)
        rows = [("sqlite", e.seq, e.encode().decode()) for e in session.events[written:]]
        db.execute("BEGIN")
        db.executemany("INSERT INTO events VALUES (?, ?, ?)", rows)
        db.execute("COMMIT")
        written = len(session.events)
    elapsed = time.perf_counter() - start
    db.close()
    return steps / elapsed


async def repeat(runs: int, measure: Callable[[str], Any]) -> list[Any]:
    """Run ``measure`` in a fresh directory ``runs`` times after one warm-up."""
    results = []
    for index in range(runs + 1):
        root = tempfile.mkdtemp(prefix="bench-")
        try:
            value = measure(root)
            if asyncio.iscoroutine(value):
                value = await value
        finally:
            shutil.rmtree(root, ignore_errors=True)
        if index:
            results.append(value)
    return results


async def checkpoint_round(
    root: str, steps: int = 200, chunks: int = 20
) -> tuple[float, float, float, float, float, float]:
    """One round of the single-session figures and their baselines, back to back (so each
    ratio compares measurements a few seconds apart on a machine whose speed drifts):
    (raw fsync ms, paced raw fsync ms, checkpoint ms, checkpoints/s, SQLite checkpoints/s,
    compressed-log checkpoints/s)."""
    raw = raw_fsync_ms(os.path.join(root, "raw"), steps, chunks)
    paced = raw_fsync_paced_ms(os.path.join(root, "paced"), steps, chunks)
    checkpoint, rate = await step_checkpoints(os.path.join(root, "jsonl"), steps, chunks)
    sqlite_rate = sqlite_checkpoints(os.path.join(root, "sqlite"), steps, chunks)
    _, zstd_rate = await step_checkpoints(os.path.join(root, "zstd"), steps, chunks, "zstd")
    return raw, paced, checkpoint, rate, sqlite_rate, zstd_rate


def sharding_round(root: str) -> tuple[float, float]:
    """(16 sessions' checkpoints/s in one worker process, in two of 8 each), back to back."""
    one = sharded_checkpoints(os.path.join(root, "one"), 1)
    two = sharded_checkpoints(os.path.join(root, "two"), 2)
    return one, two


async def collect(runs: int) -> dict[str, list[float]]:
    figures: dict[str, list[float]] = {}
    rounds = await repeat(runs, checkpoint_round)
    raw, paced, checkpoint, rate, sqlite_rate, zstd_rate = (
        list(column) for column in zip(*rounds, strict=True)
    )
    figures["raw_fsync_ms"] = raw
    figures["checkpoint_ms"] = checkpoint
    figures["checkpoint_ratio"] = [c / r for c, r in zip(checkpoint, raw, strict=True)]
    figures["raw_fsync_paced_ms"] = paced
    figures["checkpoint_vs_paced"] = [c / p for c, p in zip(checkpoint, paced, strict=True)]
    figures["checkpoints_per_s_1"] = rate
    many = await repeat(runs, concurrent_checkpoints)
    figures["checkpoints_per_s_16"] = [m.per_second for m in many]
    figures["checkpoint_p99_ms_16"] = [m.p99_ms for m in many]
    figures["checkpoint_p99_ms_16_later"] = [m.p99_later_ms for m in many]
    figures["checkpoint_p99_16_vs_fsync"] = [m.p99_ms / r for m, r in zip(many, raw, strict=True)]
    figures["checkpoints_16_vs_1"] = [m.per_second / r for m, r in zip(many, rate, strict=True)]
    bound_figures(figures, "", "checkpoints_16_vs_1", many, rate)
    shards = await repeat(runs, sharding_round)
    figures["sharded_16_per_s_1proc"] = [one for one, _ in shards]
    figures["sharded_16_per_s_2procs"] = [two for _, two in shards]
    figures["shards_2_vs_1"] = [two / one for one, two in shards]
    big = await repeat(runs, big_step)
    figures["append_events_per_s"] = [b[0] for b in big]
    figures["load_events_per_s"] = [b[1] for b in big]
    figures["load_vs_orjson"] = [b[2] for b in big]
    figures["empty_flush_us"] = await repeat(runs, empty_flush_us)
    resumes = await repeat(runs, resume_100k)
    figures["resume_ms_100k"] = [r[0] for r in resumes]
    figures["resume_vs_orjson"] = [r[1] for r in resumes]
    if reference_installed():  # the reference in the same run, paired with ours by index
        reference = await repeat(runs, reference_figures)
        for key in reference[0]:
            figures[key] = [r[key] for r in reference]
        figures["p99_16_vs_ref"] = [
            m.p99_ms / r["ref_checkpoint_p99_ms_16"] for m, r in zip(many, reference, strict=True)
        ]
        figures["p99_16_later_vs_ref"] = [
            m.p99_later_ms / r["ref_checkpoint_p99_ms_16_later"]
            for m, r in zip(many, reference, strict=True)
        ]
        figures["vs_ref_16"] = [
            m.per_second / r["ref_checkpoints_per_s_16"]
            for m, r in zip(many, reference, strict=True)
        ]
        figures["vs_ref_1"] = [
            o / r["ref_checkpoints_per_s_1"] for o, r in zip(rate, reference, strict=True)
        ]
        figures["vs_ref_append"] = [
            b[0] / r["ref_append_events_per_s"] for b, r in zip(big, reference, strict=True)
        ]
    else:
        print("(no reference figures: the TypeScript stack is not installed; make interop)")
    peak = await repeat(1, load_peak_rss)
    figures["load_peak_rss_mb"] = [p[0] for p in peak]
    figures["load_log_mb"] = [p[1] for p in peak]
    packed_peak = await repeat(1, lambda root: load_peak_rss(root, compression="zstd"))
    figures["zstd_load_peak_rss_mb"] = [p[0] for p in packed_peak]
    figures["zstd_load_rss_vs_plain"] = [
        z[0] / p[0] for z, p in zip(packed_peak, peak, strict=True)
    ]
    figures["sqlite_checkpoints_per_s_1"] = sqlite_rate
    figures["vs_sqlite_1"] = [ours / theirs for ours, theirs in zip(rate, sqlite_rate, strict=True)]
    figures["zstd_checkpoints_per_s_1"] = zstd_rate
    figures["zstd_vs_plain_1"] = [z / p for z, p in zip(zstd_rate, rate, strict=True)]
    packed = await repeat(runs, zstd_big_step)
    figures["zstd_load_events_per_s"] = [p[0] for p in packed]
    figures["zstd_load_vs_plain"] = [p[0] / b[1] for p, b in zip(packed, big, strict=True)]
    figures["zstd_bytes_ratio"] = [p[1] for p in packed]
    ours = await repeat(runs, lambda root: step_checkpoints(root, compression="sqlite"))
    figures["sqlite_backend_checkpoints_per_s_1"] = [o[1] for o in ours]
    figures["sqlite_backend_vs_jsonl_1"] = [o[1] / r for o, r in zip(ours, rate, strict=True)]
    figures["sqlite_backend_vs_sqlite_1"] = [
        o[1] / s for o, s in zip(ours, sqlite_rate, strict=True)
    ]
    figures["sqlite_backend_checkpoints_per_s_16"] = [
        m.per_second
        for m in await repeat(runs, lambda root: concurrent_checkpoints(root, "sqlite"))
    ]
    loads = await repeat(runs, backend_big_step)
    figures["sqlite_backend_load_events_per_s"] = loads
    figures["sqlite_backend_load_vs_jsonl"] = [s / b[1] for s, b in zip(loads, big, strict=True)]
    sdk = await repeat(1, sdk_session_figures)
    for key in sdk[0]:
        figures[key] = [one[key] for one in sdk]
    await adk_figures(runs, figures)
    listing = await repeat(1, ls_10k_sessions)
    figures["jsonl_ls_10k_sessions_s"] = [ls[0] for ls in listing]
    figures["sqlite_ls_10k_sessions_s"] = [ls[1] for ls in listing]
    await keyed(1, page_figures, figures)
    if os.environ.get(DSN_ENV):
        await postgres_figures(runs, figures)
    else:
        print(f"(no PostgreSQL figures: {DSN_ENV} is not set; `make bench` starts a server)")
    return figures


def bound_figures(
    figures: dict[str, list[float]],
    prefix: str,
    ratio: str,
    many: list[Many],
    rate: list[float],
) -> None:
    """What bounds the 16-session figures, from the same runs: the event loop thread's CPU
    per checkpoint with 16 sessions (``loop_us_per_checkpoint_16``: its busy share over the
    rate); the 16-over-1 ratio the run could have reached had that thread never waited for
    I/O or the GIL (``<ratio>_ceiling``: one over that CPU, over the one-session rate; an
    estimate that assumes the CPU per checkpoint stays the same); and the time between two
    checkpoints of one session (``cycle_ms_16``: 16 over the rate), which a flush's latency
    approaches when every session shares that one thread."""
    figures[f"{prefix}loop_us_per_checkpoint_16"] = [m.busy / m.per_second * 1e6 for m in many]
    figures[f"{ratio}_ceiling"] = [
        m.per_second / m.busy / r for m, r in zip(many, rate, strict=True)
    ]
    figures[f"{prefix}checkpoint_p50_ms_16"] = [m.p50_ms for m in many]
    figures[f"{prefix}cycle_ms_16"] = [MANY * 1000 / m.per_second for m in many]


async def pg_round(root: str) -> tuple[float, float, float, float]:
    """(bare insert + commit ms, blocking and on the loop; our checkpoint ms, our
    checkpoints/s), back to back."""
    bare = bare_insert_commit(root + "-bare")
    bare_async = await bare_insert_commit_async(root + "-bare-async")
    checkpoint, rate = await step_checkpoints(root, compression="postgres")
    return bare, bare_async, checkpoint, rate


async def postgres_figures(runs: int, figures: dict[str, list[float]]) -> None:
    rounds = await repeat(runs, pg_round)
    bare, bare_async, checkpoint, rate = (list(column) for column in zip(*rounds, strict=True))
    figures["pg_bare_insert_commit_ms"] = bare
    figures["pg_bare_async_insert_commit_ms"] = bare_async
    figures["pg_checkpoint_ms"] = checkpoint
    figures["pg_checkpoint_vs_bare"] = [c / b for c, b in zip(checkpoint, bare, strict=True)]
    figures["pg_checkpoint_vs_bare_async"] = [
        c / b for c, b in zip(checkpoint, bare_async, strict=True)
    ]
    figures["pg_checkpoints_per_s_1"] = rate
    many = await repeat(runs, lambda root: concurrent_checkpoints(root, "postgres"))
    figures["pg_checkpoints_per_s_16"] = [m.per_second for m in many]
    figures["pg_16_vs_1"] = [m.per_second / r for m, r in zip(many, rate, strict=True)]
    bound_figures(figures, "pg_", "pg_16_vs_1", many, rate)
    figures["pg_load_events_per_s"] = await repeat(
        runs, lambda root: backend_big_step(root, kind="postgres")
    )


async def keyed(
    runs: int,
    measure: Callable[[str], Any],
    figures: dict[str, list[float]],
) -> dict[str, list[float]]:
    """``figures`` with each key of what ``measure`` returns (a dict), over ``runs`` runs."""
    found = await repeat(runs, measure)
    for key in found[0]:
        figures[key] = [one[key] for one in found]
    return figures


async def adk_figures(runs: int, figures: dict[str, list[float]]) -> dict[str, list[float]]:
    """Google ADK's session service against its own SQLite one (``bench.adk_sessions``)."""
    from bench.adk_sessions import adk_session_figures

    adk = await repeat(runs, adk_session_figures)
    for key in adk[0]:
        figures[key] = [one[key] for one in adk]
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--runs", type=int, default=3, help="measured runs per figure")
    parser.add_argument(
        "--scale", action="store_true", help="print the scaling tables instead (minutes)"
    )
    parser.add_argument(
        "--adk", action="store_true", help="print only the Google ADK session figures"
    )
    parser.add_argument(
        "--pages", action="store_true", help="print only the figures of view and serve"
    )
    parser.add_argument("--engines", action="store_true", help="only the DBOS figures (minutes)")
    args = parser.parse_args()
    if args.engines:
        from bench.engines import print_figures

        return print_figures(as_json=args.json)
    if args.scale:
        from bench.scale import main as scale

        scale()
        return 0
    if args.adk:
        figures = asyncio.run(adk_figures(args.runs, {}))
    elif args.pages:
        figures = asyncio.run(keyed(args.runs, page_figures, {}))
    else:
        figures = asyncio.run(collect(args.runs))
    medians = {k: statistics.median(v) for k, v in figures.items()}
    if args.json:
        print(json.dumps({k: round(v, 4) for k, v in medians.items()}))
        return 0
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} cores, Python "
        f"{platform.python_version()}, temp dir {tempfile.gettempdir()}"
    )
    print(f"{'figure':30} {'min':>12} {'median':>12} {'max':>12}")
    for key, values in figures.items():
        print(f"{key:30} {min(values):12.4g} {statistics.median(values):12.4g} {max(values):12.4g}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
