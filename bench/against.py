"""``python -m bench.against OTHER [--rounds N] [--dir DIR] [--loads]``: this tree's write
path against another's, in alternating rounds. ``OTHER`` is a commit (checked out in a
temporary worktree) or the path of a source tree (a compiled build, say).

Each round runs the other tree, then this one, each in a fresh process, and pairs their
figures: one session's checkpoints per second and the event loop's CPU per checkpoint
(``time.thread_time``), then the same for 16 sessions on one loop; each figure the median of
three runs after a warm-up (with ``--loads``, then one cold load, resume and idle RSS each).
The machines these run on are shared, and their disk and CPU speed drift within minutes, so
a ratio is only taken within a round. Every round is printed, then the min, median and max
of each ratio.

The workload is each tree's own (``bench.workload``): what its agent loop streams through.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

__all__ = ["FIGURES", "main", "measure"]

HERE = Path(__file__).resolve().parent.parent
"""The root of this source tree."""

FIGURES = ("checkpoints_per_s_1", "loop_us_1", "checkpoints_per_s_16", "loop_us_16")
LOAD_FIGURES = ("load_events_per_s", "resume_ms_100k", "idle_rss_bytes")
"""With ``--loads``: a cold load of a 100,004-event log, resuming an interrupted one of
100,000 events, and the RSS of one idle live session (of 1,000)."""

_DRIVER = """
import asyncio, json, shutil, sys, tempfile, time
from bench.many import many_sessions
from bench.stacks import stack
from bench.workload import run_steps

base, steps, sessions, loads = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]

async def one(steps):
    root = tempfile.mkdtemp(dir=base)
    runtime, backend = stack(root)
    session = runtime.sessions.create("one")
    cpu = time.thread_time()
    total, _ = await run_steps(runtime, session, steps, 20)
    cpu = time.thread_time() - cpu
    await backend.aclose()
    shutil.rmtree(root)
    return steps / total, cpu / steps * 1e6

async def many(steps):
    root = tempfile.mkdtemp(dir=base)
    got = await many_sessions(lambda: stack(root), sessions, steps, 20)
    shutil.rmtree(root)
    return got.per_second, got.busy / got.per_second * 1e6

def median(pairs):
    return [sorted(column)[len(column) // 2] for column in zip(*pairs)]

async def main():
    await one(max(2, steps // 10)), await many(max(2, steps // 10))  # warm-up
    ones = [await one(steps * 2) for _ in range(3)]
    manys = [await many(steps) for _ in range(3)]
    figures = median(ones) + median(manys)
    if loads == "True":
        from bench.__main__ import big_step
        from bench.resume import resume_100k
        from bench.scale import idle_rss_per_session
        for measure, pick in ((big_step, 1), (resume_100k, 0), (idle_rss_per_session, None)):
            root = tempfile.mkdtemp(dir=base)
            got = await measure(root)
            figures.append(got if pick is None else got[pick])
            shutil.rmtree(root)
    print(json.dumps(figures))

asyncio.run(main())
"""


def measure(
    tree: Path, base: str, steps: int, sessions: int, loads: bool = False
) -> dict[str, float]:
    """The figures of ``tree``'s write path (and, with ``loads``, its reads), from a fresh
    process."""
    done = subprocess.run(
        [sys.executable, "-c", _DRIVER, base, str(steps), str(sessions), str(loads)],
        cwd=base,
        env={**os.environ, "PYTHONPATH": str(tree)},
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"the bench of {tree} failed:\n{done.stderr.strip()}")
    names = FIGURES + (LOAD_FIGURES if loads else ())
    return dict(zip(names, json.loads(done.stdout.strip().splitlines()[-1]), strict=True))


@contextlib.contextmanager
def source_tree(other: str) -> Iterator[Path]:
    """``other`` as a source tree: a directory as it is, a commit checked out (detached) in a
    temporary worktree removed afterwards."""
    if os.path.isdir(other):
        yield Path(other).resolve()
        return
    scratch = Path(tempfile.mkdtemp(prefix="bench-against-"))
    tree = scratch / "tree"
    git = ["git", "-C", str(HERE)]
    added = subprocess.run(
        [*git, "worktree", "add", "--detach", str(tree), other], capture_output=True, text=True
    )
    if added.returncode != 0:
        shutil.rmtree(scratch, ignore_errors=True)
        raise SystemExit(f"cannot check out {other!r}: {added.stderr.strip()}")
    try:
        yield tree
    finally:
        subprocess.run([*git, "worktree", "remove", "--force", str(tree)], capture_output=True)
        shutil.rmtree(scratch, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.against", description=__doc__)
    parser.add_argument("other", help="a commit, or the path of a source tree")
    parser.add_argument("--rounds", type=int, default=5, help="alternating rounds (5)")
    parser.add_argument("--dir", default=tempfile.gettempdir(), help="where the logs go")
    parser.add_argument("--steps", type=int, default=100, help="steps of each of 16 sessions")
    parser.add_argument("--sessions", type=int, default=16, help=argparse.SUPPRESS)
    parser.add_argument(
        "--loads", action="store_true", help="also a cold load, a resume and idle RSS"
    )
    args = parser.parse_args(argv)
    names = FIGURES + (LOAD_FIGURES if args.loads else ())
    ratios: dict[str, list[float]] = {key: [] for key in names}
    with source_tree(args.other) as other:
        print(f"this tree: {HERE}\nother: {args.other} ({other})\nlogs in: {args.dir}")
        for number in range(1, args.rounds + 1):
            old = measure(other, args.dir, args.steps, args.sessions, args.loads)
            new = measure(HERE, args.dir, args.steps, args.sessions, args.loads)
            print(f"round {number}")
            for key in names:
                ratios[key].append(new[key] / old[key])
                print(
                    f"  {key:22} other {old[key]:10.1f}  this {new[key]:10.1f}  "
                    f"this/other {ratios[key][-1]:6.3f}"
                )
    print("this/other over the rounds: min median max")
    for key, values in ratios.items():
        print(f"  {key:22} {min(values):6.3f} {statistics.median(values):6.3f} {max(values):6.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
