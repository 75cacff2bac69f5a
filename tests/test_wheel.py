"""The distribution as a user installs it: the wheel and the sdist built from the tracked
files, the wheel installed alone in a fresh virtual environment (its dependencies from the
package index, no checkout on the path), and the README's recipe, ``agent-session
--version`` and ``agent-session demo`` run from a folder of a user's own modules named
``session.py``, ``recovery.py``, ``agent_loop.py`` and ``tools.py``."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

from tests.docs_runner import blocks, matches

REPO = Path(__file__).resolve().parent.parent
USER_MODULES = ("session", "recovery", "agent_loop", "tools", "checkpoints", "stores", "cli")
"""Names a user's own modules may have, and a library's modules must not take."""


def _tracked_copy(to: Path) -> Path:
    """The checkout's tracked files (what a clean clone holds), copied to ``to``."""
    listed = subprocess.run(
        ["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True
    ).stdout.decode()
    for name in filter(None, listed.split("\0")):
        source = REPO / name
        if source.is_file():
            (to / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, to / name)
    return to


def _run(*command: str | Path, cwd: Path, timeout: float = 600) -> str:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    done = subprocess.run(
        [str(part) for part in command],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert done.returncode == 0, (
        f"{command} exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
    )
    return done.stdout


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The wheel and the sdist, built without network (``--no-isolation``)."""
    source = _tracked_copy(tmp_path_factory.mktemp("source"))
    out = tmp_path_factory.mktemp("dist")
    _run(sys.executable, "-m", "build", "--no-isolation", "--outdir", out, source, cwd=source)
    (wheel,) = out.glob("*.whl")
    (sdist,) = out.glob("*.tar.gz")
    return wheel, sdist


@pytest.mark.slow
@pytest.mark.process
def test_the_wheel_holds_one_import_package_with_its_markers_and_nothing_else(
    built: tuple[Path, Path],
) -> None:
    wheel, sdist = built
    names = zipfile.ZipFile(wheel).namelist()
    tops = {name.split("/")[0] for name in names}
    assert tops == {"agent_session", wheel.name.split("-")[0] + "-0.1.0.dist-info"}, tops
    assert not [n for n in names if "__pycache__" in n or n.endswith((".pyc", ".pyo"))]
    assert not [n for n in names if n.startswith("tests/") or "/tests/" in n]
    markers = {str(p.relative_to(REPO)) for p in (REPO / "agent_session").rglob("py.typed")}
    assert markers, "agent_session ships no py.typed"
    assert markers <= set(names), markers - set(names)
    assert {"agent_session/see/assets/view.css", "agent_session/see/assets/view.js"} <= set(names)
    with tarfile.open(sdist) as archive:
        members = archive.getnames()
    assert not [n for n in members if "__pycache__" in n or "/.venv/" in n or "node_modules" in n]


@pytest.mark.slow
@pytest.mark.process
def test_the_wheel_installs_alone_and_runs_the_recipe_beside_a_user_s_modules(
    built: tuple[Path, Path], tmp_path: Path
) -> None:
    """Longer than 20 s: it makes a virtual environment and installs the dependencies."""
    wheel, _ = built
    venv = tmp_path / "venv"
    _run(sys.executable, "-m", "venv", venv, cwd=tmp_path)
    python = venv / "bin" / "python"
    _run(
        python,
        "-m",
        "pip",
        "install",
        "--quiet",
        "--disable-pip-version-check",
        wheel,
        cwd=tmp_path,
    )
    app = tmp_path / "app"
    app.mkdir()
    for name in USER_MODULES:
        (app / f"{name}.py").write_text(f'WHOSE = "the user\'s own {name}.py"\n')
    recipe = next(b for b in blocks(REPO / "README.md") if b.kind == "python")
    expected = next(b for b in blocks(REPO / "README.md") if b.kind == "output")
    check = "".join(
        f'import {name}\nassert {name}.WHOSE == "the user\'s own {name}.py"\n'
        for name in USER_MODULES
    )
    (app / "recipe.py").write_text(recipe.text + "\n" + check)
    printed = _run(python, "recipe.py", cwd=app)
    assert matches(expected.text, printed), printed
    found = _run(python, "-c", "import agent_session; print(agent_session.__file__)", cwd=app)
    assert found.startswith(str(venv)), found  # (the wheel's, not the checkout's)
    assert _run(venv / "bin" / "agent-session", "--version", cwd=app).strip() == (
        "agent-session 0.1.0"
    )
    demo = _run(venv / "bin" / "agent-session", "demo", cwd=app)
    assert "agent-session ls" in demo, demo
