"""``python -m bench.governance`` (through ``scripts/with-postgres`` for the PostgreSQL rows):
what governance costs.

- **The chain on the checkpoint.** A step of six events and a flush, 300 steps, on a store
  opened plain and on the same store opened with ``integrity=True`` (each line's digest,
  made as it is encoded at commit, its anchor event every 64 lines and the anchor's bytes),
  step for step in turn; the median wall time of the flush (the checkpoint) and of the whole
  step (its appends too), and the ratios chained / plain, per store kind.
- **The budget on a turn.** A turn of the scripted model (one request, no store: the
  loop's own CPU) with a budget and without one: the reservation and the spend fold.
- **A spend window.** ``spend_windows`` over a store of 200 sessions with 25 responses each
  (with their turns' other events), labelled by tenant: the time of the one aggregate query
  (SQLite, PostgreSQL) or of the fold of every log (JSONL).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from agent_session import (
    AgentRuntime,
    ScriptedModel,
    ScriptedStep,
    open_store,
    set_budget,
    set_labels,
    spend_windows,
    user_message,
)
from bench.postgres import DSN_ENV

__all__ = ["Timed", "checkpoints", "main", "paired_figures", "print_paired", "stores"]


def stores(base: Path) -> dict[str, str]:
    out = {"jsonl": str(base / "jsonl"), "sqlite": f"sqlite:///{base}/s.db"}
    if os.environ.get(DSN_ENV):
        from bench.engines import _database

        out["postgres"] = _database()
    return out


Timed = tuple[float, float]
"""Seconds of a step's flush, and of the whole step (its appends and its flush)."""


async def checkpoints(
    store: str, steps: int, id: str, **options: Any
) -> tuple[list[Timed], list[Timed]]:
    """The times of each step (six appended events, then a flush) of a session on the store
    opened plain and of one on it opened with ``options`` (default: chained), step for step
    in turn."""
    from agent_session.session.events.types import STEP_END, STEP_START

    async def step(runtime: AgentRuntime, session: Any, n: int) -> Timed:
        started = time.perf_counter()
        session.append(STEP_START, {"turn": 1, "step": n})
        for _ in range(2):
            session.append("user/message", user_message("x" * 200), surface_op="append")
        session.append("request/context", {"provider": "p", "model": "m"})
        session.append("llm/retry", {"retryId": f"r{n}", "turn": 1, "step": n})
        session.append(STEP_END, {"turn": 1, "step": n})
        began = time.perf_counter()
        await runtime.sessions.flush(session)
        ended = time.perf_counter()
        return ended - began, ended - started

    plain: list[Timed] = []
    chained: list[Timed] = []
    async with AgentRuntime() as a, AgentRuntime() as b:
        a.install(open_store(store))
        b.install(open_store(store, **(options or {"integrity": True})))
        one, two = a.sessions.create(f"plain-{id}"), b.sessions.create(f"chained-{id}")
        for n in range(steps):
            plain.append(await step(a, one, n))
            chained.append(await step(b, two, n))
    return plain, chained


async def paired_figures(
    base: Path, runs: int, steps: int, name: str, **options: Any
) -> dict[str, dict[str, float]]:
    """Median checkpoint and step (µs), plain and opened with ``options`` (named ``name``
    in the keys), and their ratios, per kind."""
    out = {}
    for kind, store in stores(base / name).items():
        plain: list[Timed] = []
        other: list[Timed] = []
        for run in range(runs):
            one, two = await checkpoints(store, steps, str(run), **options)
            plain, other = plain + one, other + two
        figures: dict[str, float] = {}
        for at, step in ((0, "flush"), (1, "step")):
            p = statistics.median(t[at] for t in plain) * 1e6
            c = statistics.median(t[at] for t in other) * 1e6
            figures |= {f"{step}PlainUs": p, f"{step}{name}Us": c, f"{step}Ratio": c / p}
        out[kind] = figures
    return out


async def chain_figures(base: Path, runs: int, steps: int) -> dict[str, dict[str, float]]:
    """Median checkpoint and step (µs), plain and chained, and their ratios, per kind."""
    return await paired_figures(base, runs, steps, "Chained", integrity=True)


async def _turns(budget: bool, turns: int) -> float:
    """Seconds per turn with no store (the loop's own CPU: what a budget adds to it)."""
    async with AgentRuntime() as runtime:
        model = ScriptedModel([ScriptedStep(text=["ok"], usage=(100, 10))] * turns, max_tokens=50)
        runtime.models.register("demo", model)
        session = runtime.sessions.create("b")
        if budget:
            set_budget(session, {"totalTokens": 10**9})
        agent = runtime.agent(session, model="demo/m")
        began = time.perf_counter()
        for n in range(turns):
            await agent.run_turn(f"t{n}")
        return (time.perf_counter() - began) / turns


async def budget_figures(runs: int, turns: int) -> dict[str, float]:
    """Median µs per turn with and without a budget."""
    plain, held = [], []
    for _ in range(runs):
        plain.append(await _turns(False, turns))
        held.append(await _turns(True, turns))
    p, h = statistics.median(plain) * 1e6, statistics.median(held) * 1e6
    return {"plainUs": p, "budgetUs": h, "ratio": h / p}


async def _fill(store: str, sessions: int, responses: int) -> None:
    async with AgentRuntime() as runtime:
        runtime.install(open_store(store))
        steps = [ScriptedStep(text=["ok"], usage=(100, 10))] * (sessions * responses)
        runtime.models.register("demo", ScriptedModel(steps))
        for n in range(sessions):
            session = runtime.sessions.create(f"s{n}")
            set_labels(session, {"tenant": f"t{n % 10}"})
            agent = runtime.agent(session, model="demo/m")
            for turn in range(responses):
                await agent.run_turn(f"turn {turn}")
            await runtime.sessions.dispose(session)


async def window_figures(base: Path, sessions: int, responses: int) -> dict[str, dict[str, Any]]:
    """Seconds of one ``spend_windows`` by tenant, and the events the store holds."""
    out = {}
    for kind, store in stores(base / "windows").items():
        await _fill(store, sessions, responses)
        began = time.perf_counter()
        windows = await spend_windows(store, label=("tenant", "t3"))
        took = time.perf_counter() - began
        requests = sum(w["requests"] for w in windows)
        out[kind] = {"seconds": took, "responsesInWindow": requests}
    return out


def print_paired(figures: dict[str, dict[str, float]], name: str, runs: int, steps: int) -> None:
    """Print :func:`paired_figures` (``name``: the variant's, as it named the keys)."""
    print(f"a step of six events and a flush, medians of {runs} x {steps} steps (µs)")
    for kind, f in figures.items():
        for step in ("flush", "step"):
            print(
                f"  {kind:9} {step:5}  plain {f[step + 'PlainUs']:6.0f}  {name.lower()} "
                f"{f[step + name + 'Us']:6.0f}  ratio {f[step + 'Ratio']:.3f}"
            )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.governance", description=__doc__)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--steps", type=int, default=300)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as scratch:
        base = Path(scratch)
        chain = asyncio.run(chain_figures(base, args.runs, args.steps))
        budget = asyncio.run(budget_figures(args.runs, 200))
        windows = asyncio.run(window_figures(base, 200, 25))
    print_paired(chain, "Chained", args.runs, args.steps)
    print(
        f"turn (no store, one request): {budget['plainUs']:.0f} µs without a budget, "
        f"{budget['budgetUs']:.0f} µs with one (ratio {budget['ratio']:.3f})"
    )
    print("spend window by tenant over 200 sessions x 25 responses (5,000 responses):")
    for kind, f in windows.items():
        print(f"  {kind:9} {f['seconds'] * 1000:8.0f} ms ({f['responsesInWindow']} in the window)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
