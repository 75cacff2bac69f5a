"""``python -m bench --pages``: what the pages cost. ``agent-session view`` of a
100,000-event session, end to end (a new process: its start, the read, the page), over a cold
load of the same log in this process (the baseline: what any reader pays); and
``agent-session serve``'s list of a 10,000-session store: the first complete page after the
server starts (every session read once), then warm pages (the newest, one sorted by tokens,
one filtered by model, a later page), each over the store's listing as ``ls`` surveys it, in
the same run."""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from agent_session.persistence_jsonl import JsonlPersistence
from bench.listing import one_session, plant_directories
from bench.workload import write_long_log

__all__ = ["page_figures", "serve_10k", "view_100k"]


async def view_100k(root: str) -> tuple[float, float]:
    """(seconds of ``agent-session view`` of a 100,000-event session, seconds to load it)."""
    store = os.path.join(root, "view")
    await write_long_log(store, "big", 100_000)
    reader = JsonlPersistence(store)
    start = time.perf_counter()
    await reader.inspect("big")
    loaded = time.perf_counter() - start
    await reader.aclose()
    out = os.path.join(root, "big.html")
    start = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "agent_session", "view", store, "big", "-o", out],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    return time.perf_counter() - start, loaded


def _get(url: str) -> tuple[str, float]:
    start = time.perf_counter()
    with urllib.request.urlopen(url, timeout=120) as response:
        body = response.read().decode()
    return body, time.perf_counter() - start


async def serve_10k(root: str, count: int = 10_000) -> dict[str, float]:
    """Seconds: the first complete list page after the server starts, the median of warm
    pages, the slowest warm page, and the listing's survey (the baseline)."""
    from agent_session.see.inventory import rows
    from agent_session.stores import parse_store

    store = os.path.join(root, "jsonl")
    await one_session(JsonlPersistence(store))
    plant_directories(store, count)
    start = time.perf_counter()
    assert sum(1 for _ in rows(parse_store(store))) == count
    survey = time.perf_counter() - start
    began = time.perf_counter()
    server = subprocess.Popen(
        [sys.executable, "-m", "agent_session", "serve", store, "--port", "0"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stdout is not None
        base = server.stdout.readline().split(" at ")[1].split()[0].rstrip("/")
        while 'id="pending"' in _get(f"{base}/")[0]:
            pass  # (each request waits a moment for the pass it started)
        cold = time.perf_counter() - began
        warm = []
        for _ in range(5):
            for query in ("", "?sort=tokens&order=desc", "?model=scripted-1", "?page=50"):
                body, seconds = _get(f"{base}/{query}")
                assert f"of {count:,} sessions" in body
                warm.append(seconds)
    finally:
        server.terminate()
        server.wait(timeout=30)
    return {
        "serve_10k_first_page_s": cold,
        "serve_10k_page_s": statistics.median(warm),
        "serve_10k_page_max_s": max(warm),
        "serve_10k_page_vs_ls": statistics.median(warm) / survey,
        "jsonl_ls_10k_survey_s": survey,
    }


async def page_figures(root: str) -> dict[str, float]:
    """Every figure of this module."""
    view, loaded = await view_100k(str(Path(root, "v")))
    figures = {"view_100k_s": view, "view_100k_vs_load": view / loaded, "load_100k_s": loaded}
    return figures | await serve_10k(str(Path(root, "s")))
