"""The floor plan is enforced: imports between top-level packages only point the allowed way,
``import session`` does not load the agent loop, and no module outside ``tests/`` outgrows
450 lines."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

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
