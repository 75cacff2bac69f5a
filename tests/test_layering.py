"""The floor plan is enforced: imports between top-level packages only point the allowed way,
``import session`` does not load the agent loop, and no module outside ``tests/`` outgrows
450 lines."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LAYERS = (
    "session",
    "recovery",
    "persistence_jsonl",
    "persistence_sqlite",
    "persistence_postgres",
    "agent_loop",
    "checkpoints",
)
"""The layered sub-packages of ``agent_session``; its other modules and sub-packages are the
front door (``agent_session``)."""
FRONT, BENCH = "agent_session", "bench"
ALLOWED: dict[str, set[str]] = {
    "session": set(),
    "recovery": {"session"},
    "persistence_jsonl": {"session", "recovery"},
    "persistence_sqlite": {"session", "recovery"},
    "persistence_postgres": {"session", "recovery", "persistence_jsonl"},  # it stores JSONL lines
    "agent_loop": {"session"},
    "checkpoints": {"session", "agent_loop"},
    FRONT: {*LAYERS},
    BENCH: {*LAYERS, FRONT},  # it measures the integrations too
}
"""What each layer may import: ``session`` <- ``recovery`` <- ``persistence_*`` <- the front
door; ``agent_loop`` <- ``session``; ``checkpoints`` <- both; ``bench`` measures any of
them, and nothing imports it."""
MAX_LINES = 450


def _layer(module: str) -> str | None:
    """The layer a dotted module name belongs to (``None``: not this project's)."""
    parts = module.split(".")
    if parts[0] == BENCH:
        return BENCH
    if parts[0] != FRONT:
        return None
    return parts[1] if len(parts) > 1 and parts[1] in LAYERS else FRONT


def _modules() -> list[Path]:
    return sorted(p for package in (FRONT, BENCH) for p in (ROOT / package).rglob("*.py"))


def _imported_layers(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(filter(None, (_layer(alias.name) for alias in node.names)))
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            layer = _layer(node.module)
            if layer is not None:
                found.add(layer)
    return found


def test_imports_follow_the_layers() -> None:
    wrong = []
    for path in _modules():
        layer = _layer(".".join(path.relative_to(ROOT).with_suffix("").parts))
        assert layer is not None
        for target in _imported_layers(path) - ALLOWED[layer] - {layer}:
            wrong.append(f"{path.relative_to(ROOT)} imports {target}")
    assert wrong == []


def test_the_layering_check_sees_a_back_edge(tmp_path: Path) -> None:
    planted = tmp_path / "m.py"
    planted.write_text(
        "from agent_session.agent_loop.loop import Agent\nimport agent_session.recovery.closers\n"
    )
    assert _imported_layers(planted) == {"agent_loop", "recovery"}


def test_importing_session_does_not_load_the_agent_loop() -> None:
    code = (
        "import agent_session.session, sys; "
        "print([m for m in sys.modules if m.startswith('agent_session.agent_loop')])"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT
    )
    assert out.stdout.strip() == "[]"


def test_no_module_outside_tests_is_over_450_lines() -> None:
    long = {
        str(p.relative_to(ROOT)): n
        for p in _modules()
        if (n := len(p.read_text().splitlines())) > MAX_LINES
    }
    assert long == {}


def test_the_distribution_installs_one_import_name_and_a_user_s_modules_shadow_nothing(
    tmp_path: Path,
) -> None:
    """The wheel's packages are ``agent_session`` and its sub-packages only, and an
    application folder holding its own ``session.py``, ``recovery.py``, ``agent_loop.py``,
    ``tools.py`` ... runs an agent on a store with them importable beside it."""
    import tomllib

    found = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert found["packages"] == {"find": {"include": ["agent_session*"]}}
    own = ["session", "recovery", "agent_loop", "checkpoint_policy", "tools", "models", "cli"]
    own += ["persistence_jsonl", "persistence_sqlite", "persistence_postgres", "storage"]
    for name in own:
        (tmp_path / f"{name}.py").write_text(f"MINE = {name!r}\n")
    app = """
import asyncio, session, recovery
from agent_session import AgentRuntime, ScriptedModel, ScriptedStep, checkpoint_policy, open_store

async def main():
    async with AgentRuntime() as runtime:
        runtime.install(open_store("./store"))
        runtime.install(checkpoint_policy)
        runtime.models.register("m", ScriptedModel([ScriptedStep(text=["ok"])]))
        agent = runtime.agent(runtime.sessions.create("s"), model="m/x")
        print((await agent.run_turn("hi"))["kind"], session.MINE, recovery.MINE)

asyncio.run(main())
"""
    (tmp_path / "app.py").write_text(app)
    done = subprocess.run(
        [sys.executable, "app.py"], capture_output=True, text=True, cwd=tmp_path, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "completed session recovery\n"


FLAT = {"__init__.py", "__main__.py", "stores.py", "deciders.py"}
"""The modules the front door keeps beside its rooms (the names users import from it)."""


def test_the_front_door_keeps_its_modules_in_rooms_named_by_their_job() -> None:
    flat = {p.name for p in (ROOT / FRONT).glob("*.py")}
    assert flat == FLAT, (
        f"modules beside agent_session's rooms: {sorted(flat - FLAT)}; put each in the room "
        "of its job (cli/, demo/, see/, interchange/, beside_logs/, ...: docs/development.md)"
    )


def _module_name(path: Path) -> str:
    return ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")


def _loaded_at_import(path: Path, known: set[str]) -> set[str]:
    """The library's modules that importing ``path`` executes before it finishes: its
    module-level imports (not those under ``if TYPE_CHECKING``, nor in functions), each with
    the packages above it."""
    found: set[str] = set()
    statements = list(ast.parse(path.read_text(), str(path)).body)
    while statements:
        node = statements.pop()
        if isinstance(node, ast.If) and "TYPE_CHECKING" not in ast.unparse(node.test):
            statements += node.body + node.orelse
        elif isinstance(node, ast.Try):
            statements += node.body + node.orelse + node.finalbody
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    parts = {".".join(n.split(".")[:i]) for n in found for i in range(1, n.count(".") + 2)}
    return (parts & known) - {_module_name(path)}


def _cycles(graph: dict[str, set[str]]) -> list[set[str]]:
    """The strongly connected sets of two modules or more (Tarjan's, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[set[str]] = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        while work:
            node, edges = work[-1]
            target = next(edges, None)
            if target is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    members = set(stack[stack.index(node) :])
                    del stack[stack.index(node) :]
                    if len(members) > 1:
                        found.append(members)
            elif target not in index:
                index[target] = low[target] = len(index)
                stack.append(target)
                work.append((target, iter(sorted(graph[target]))))
            elif target in stack:
                low[node] = min(low[node], index[target])
    return found


_FIRST = """
import importlib, json, sys, traceback
for name in json.loads(sys.argv[1]):
    importlib.import_module(name)
failed = []
for cycle in json.loads(sys.argv[2]):
    for first in cycle:
        # (the cycle and what its packages hold: a loaded module is not imported again, so
        # neither would its package be)
        for name in [m for m in sys.modules if any(m == c or m.startswith(c + ".") for c in cycle)]:
            del sys.modules[name]
        try:
            importlib.import_module(first)
        except Exception:
            failed.append(first + ": " + traceback.format_exc().strip().splitlines()[-1])
print("\\n".join(failed))
"""


@pytest.mark.slow  # (every module of every cycle: seconds of imports)
def test_every_module_of_an_import_cycle_can_be_imported_first() -> None:
    """A user may import any module first (``import agent_session.see.search``). Where the
    modules' top-level imports form a cycle (a package's ``__init__`` re-exporting its
    modules makes many), each module of the cycle is imported first, into an interpreter that
    holds everything but that cycle (and the modules of its packages), and loads without
    meeting a half-made module."""
    paths = {_module_name(p): p for p in sorted((ROOT / FRONT).rglob("*.py"))}
    del paths[f"{FRONT}.__main__"]
    graph = {name: _loaded_at_import(path, set(paths)) for name, path in paths.items()}
    cycles = _cycles(graph)
    assert any(f"{FRONT}.session" in cycle for cycle in cycles)  # (the check sees them)
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            _FIRST,
            json.dumps(list(paths)),
            json.dumps(list(map(sorted, cycles))),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == ""


def test_a_cycle_through_a_module_s_name_is_found() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"e"}}
    assert _cycles(graph) == [{"a", "b", "c"}]
