"""Seeded samples of the exhaustive sweeps (every byte of a log cut, every kill point of
every effect class on every store): ``make test`` runs a sample whose seed it prints, a new
one each run, so what is covered rotates from run to run; ``make test-exhaustive``
(``AGENT_SESSION_EXHAUSTIVE=1``) runs every case. A run is repeated exactly with
``AGENT_SESSION_SWEEP_SEED=<the printed seed>``.

Two forms: :func:`sample` inside a test that loops over its cases, and the ``sweep(share)``
marker on a parametrized test, whose cases ``tests/conftest.py`` samples at collection,
keeping at least one case per store (the last ``-`` part of a case's id)."""

from __future__ import annotations

import os
import random
import secrets
from collections.abc import Callable, Hashable, Sequence
from typing import TypeVar

__all__ = ["EXHAUSTIVE", "FAST", "SEED_ENV", "examples", "sample", "seed", "store_of"]

T = TypeVar("T")

SEED_ENV = "AGENT_SESSION_SWEEP_SEED"
EXHAUSTIVE = os.environ.get("AGENT_SESSION_EXHAUSTIVE") == "1"
FAST = os.environ.get("AGENT_SESSION_FAST") == "1"
"""``make test-fast``: each sweep runs a quarter of its share, each property test a quarter
of its examples."""
STORES = frozenset({"jsonl", "none", "zstd", "sqlite", "postgres"})
"""The last part of a case id that names its store (``none``/``zstd``: a JSONL store)."""


def examples(count: int) -> int:
    """How many examples a property test (Hypothesis) tries: ``count``, or a quarter of it
    (at least 10, at most ``count``) in ``make test-fast``."""
    return min(count, max(10, count // 4)) if FAST else count


def seed() -> int:
    """This run's seed: the environment's, else a fresh one put there (so the xdist workers
    the controller starts afterwards inherit it and collect the same cases)."""
    if SEED_ENV not in os.environ:
        os.environ[SEED_ENV] = str(secrets.randbelow(10**9))
    return int(os.environ[SEED_ENV])


def sample(
    cases: Sequence[T],
    share: float,
    *,
    name: str,
    key: Callable[[T], Hashable] = lambda case: None,
    also: Callable[[T], Hashable] = lambda case: None,
) -> list[T]:
    """Every case when exhaustive; else a seeded ``share`` of ``cases`` (a quarter of it in
    ``make test-fast``; ``name`` tells the sweeps of a run apart), in their order, always
    with the first and the last and at least one case of each value of ``key``, and of
    ``also``."""
    if EXHAUSTIVE or len(cases) <= 2:
        return list(cases)
    if FAST:
        share /= 4
    rng = random.Random(f"{seed()}:{name}")
    chosen = {0, len(cases) - 1}
    chosen.update(rng.sample(range(len(cases)), max(1, round(share * len(cases)))))
    for by in (key, also):
        groups: dict[Hashable, list[int]] = {}
        for index, case in enumerate(cases):
            groups.setdefault(by(case), []).append(index)
        for indexes in groups.values():
            if not chosen.intersection(indexes):
                chosen.add(rng.choice(indexes))
    return [cases[index] for index in sorted(chosen)]


def store_of(case_id: str) -> str | None:
    """The store a parametrized case's id names last (``...-sqlite``), or ``None``."""
    last = case_id.rsplit("-", 1)[-1]
    return last if last in STORES else None
