"""The framework versions each extra accepts (``docs/compatibility.md``, "Framework
versions"): the table states the ranges of ``pyproject.toml`` and the versions this test
environment has; and at the other end of every range that has one, the integration's own
tests pass again, in a virtual environment of their own."""

from __future__ import annotations

import importlib.metadata
import os
import re
import subprocess
import sys
import sysconfig
import tomllib
from pathlib import Path

import pytest
from packaging.specifiers import SpecifierSet

REPO = Path(__file__).resolve().parent.parent
TABLE = REPO / "docs" / "compatibility.md"
TESTS_OF = {
    "openai": ["tests/test_provider_openai_chat.py", "tests/test_provider_openai_responses.py"],
    "anthropic": ["tests/test_provider_anthropic.py"],
    "opentelemetry-sdk": ["tests/test_otel_spans.py"],
    "psycopg[binary,pool]": ["tests/test_postgres_backend.py"],
}
"""The tests that exercise each package (run again at the other end of its range)."""
ALSO = {"opentelemetry-sdk": ["opentelemetry-exporter-otlp-proto-common", "opentelemetry-proto"]}
"""Packages released with one, pinned to its version at the other end."""


def _rows() -> list[dict[str, str]]:
    text = TABLE.read_text()
    section = text.split("## Framework versions", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| `")]
    names = ["extra", "package", "range", "here", "other"]
    return [
        dict(
            zip(names, [cell.strip().strip("`") for cell in row.strip("|").split("|")], strict=True)
        )
        for row in rows
    ]


def _extras() -> dict[str, list[str]]:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    return dict(project["optional-dependencies"])


def test_the_table_states_every_extra_s_range_and_this_environment_s_version() -> None:
    rows = _rows()
    extras = _extras()
    framework_extras = {e for e in extras if e not in ("testing", "test", "dev")}
    assert {row["extra"] for row in rows} == framework_extras
    for row in rows:
        assert row["package"] + row["range"] in extras[row["extra"]], row
        installed = importlib.metadata.version(row["package"].split("[")[0])
        assert installed in SpecifierSet(row["range"]), f"{row['package']} {installed}: {row}"
        assert row["here"] in SpecifierSet(row["range"]), row
        if row["other"] != "(no other release)":
            assert re.fullmatch(r"[0-9.]+", row["other"]), row
            assert row["package"] in TESTS_OF, f"no tests named for {row['package']}"


REQUIREMENTS_MET = """
import importlib.metadata as metadata, sys
from packaging.requirements import Requirement
for pinned in sys.argv[1:]:
    asked = Requirement(pinned)
    for line in metadata.requires(asked.name) or []:
        need = Requirement(line)
        if need.marker is None or any(
            need.marker.evaluate({"extra": extra}) for extra in ["", *asked.extras]
        ):
            have = metadata.version(need.name)
            assert need.specifier.contains(have, prereleases=True), (pinned, line, have)
    print(asked.name, metadata.version(asked.name))
"""
"""Run in the other end's environment: every package given is found at its pinned version,
and every requirement it has is met by what that environment imports."""


@pytest.mark.slow
@pytest.mark.process
def test_each_integration_passes_its_tests_at_the_other_end_of_its_range(tmp_path: Path) -> None:
    """Longer than 20 s: it makes a virtual environment that holds the other ends in front of
    this environment's packages, and runs the integrations' tests there."""
    others = [row for row in _rows() if row["other"] != "(no other release)"]
    pins = []  # (the package as the extra names it, with its extras; its version)
    for row in others:
        pins.append((row["package"], row["other"]))
        pins += [(also, row["other"]) for also in ALSO.get(row["package"], [])]
    wanted = [f"{package}=={version}" for package, version in pins]
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", venv], check=True)
    python = str(venv / "bin" / "python")
    site = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    # Behind its own packages, this environment's (the library's editable install among
    # them): pip installs into it only the other ends and what they need that this
    # environment lacks (it leaves alone what lies outside the new one).
    ours = sysconfig.get_paths()["purelib"]
    Path(site, "behind-the-suite-s-packages.pth").write_text(
        f"import site; site.addsitedir({ours!r})\n"
    )
    pip = [sys.executable, "-m", "pip", "--python", python, "--disable-pip-version-check"]
    done = subprocess.run(
        [*pip, "install", "--quiet", *wanted],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    found = subprocess.run(
        [python, "-c", REQUIREMENTS_MET, *wanted], capture_output=True, text=True, check=False
    )
    assert found.returncode == 0, found.stderr
    assert found.stdout.split() == [w for p, v in pins for w in (p.split("[")[0], v)]
    files = [name for row in others for name in TESTS_OF[row["package"]]]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    ran = subprocess.run(
        [python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "not process", *files],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert ran.returncode == 0, ran.stdout[-4000:] + ran.stderr[-2000:]
    assert re.search(r"\d+ passed", ran.stdout), ran.stdout[-2000:]
