"""The floor plan is enforced: imports between top-level packages only point the allowed way,
``import session`` does not load the agent loop, and no module outside ``tests/`` outgrows
450 lines."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = (
    "session",
    "recovery",
    "persistence_jsonl",
    "persistence_sqlite",
    "persistence_postgres",
    "agent_loop",
    "checkpoint_policy",
    "agent_session",
    "bench",
)
ALLOWED: dict[str, set[str]] = {
    "session": set(),
    "recovery": {"session"},
    "persistence_jsonl": {"session", "recovery"},
    "persistence_sqlite": {"session", "recovery"},
    "persistence_postgres": {"session", "recovery", "persistence_jsonl"},  # it stores JSONL lines
    "agent_loop": {"session"},
    "checkpoint_policy": {"session", "agent_loop"},
    "agent_session": set(PACKAGES) - {"agent_session", "bench"},
    "bench": set(PACKAGES) - {"bench"},  # it measures the integrations too
}
"""What each package may import: ``session`` <- ``recovery`` <- ``persistence_*`` <-
``agent_session``; ``agent_loop`` <- ``session``; ``checkpoint_policy`` <- both; ``bench``
measures any of them, and nothing imports it."""
MAX_LINES = 450


def _modules() -> list[Path]:
    return sorted(p for package in PACKAGES for p in (ROOT / package).rglob("*.py"))


def _imported_packages(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module.split(".")[0])
    return found & set(PACKAGES)


def test_imports_follow_the_layers() -> None:
    wrong = []
    for path in _modules():
        package = path.relative_to(ROOT).parts[0]
        for target in _imported_packages(path) - ALLOWED[package] - {package}:
            wrong.append(f"{path.relative_to(ROOT)} imports {target}")
    assert wrong == []


def test_the_layering_check_sees_a_back_edge(tmp_path: Path) -> None:
    planted = tmp_path / "m.py"
    planted.write_text("from agent_loop.loop import Agent\nimport recovery.closers\n")
    assert _imported_packages(planted) == {"agent_loop", "recovery"}


def test_importing_session_does_not_load_the_agent_loop() -> None:
    code = "import session, sys; print([m for m in sys.modules if m.startswith('agent_loop')])"
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


def test_every_package_of_the_library_is_in_the_distribution() -> None:
    import tomllib

    listed = set(
        tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]
    )
    found = {
        ".".join(init.parent.relative_to(ROOT).parts)
        for package in PACKAGES
        if package != "bench"  # (measures the library; not shipped)
        for init in (ROOT / package).rglob("__init__.py")
    }
    assert found == listed
