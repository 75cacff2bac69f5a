"""Runs the code blocks of a Markdown page as a reader would, in order, in one empty directory,
and checks what each prints.

- ```` ```python ```` runs in an interpreter of its own (forked from one that imported this
  library and the frameworks the page uses: :mod:`tests.forkserver`); its first line
  ``# file: NAME`` writes it to ``NAME`` instead (a later block or command runs it).
- ```` ```output ```` right after a python block is what that block prints.
- ```` ```console ```` holds ``$ command`` lines, each followed by what it prints (stdout and
  stderr, as a terminal shows them), run by ``bash`` with ``agent-session``, ``python FILE``
  and ``python -m MODULE`` forked the same way; a command must exit 0 (a page shows another
  code with ``; echo "exit $?"``).
- ```` ```sh ```` holds set-up commands a reader types once: ``make TARGET`` must be a target
  of the Makefile, ``pip install -e '.[EXTRA]'`` an extra of ``pyproject.toml``.

In an expected output, a line ``...`` stands for any number of lines, and ``...`` inside a
line for any text.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

from tests.forkserver import command_directory, run_code

ROOT = Path(__file__).resolve().parents[1]
BLOCK = re.compile(r"(?ms)^```(\w+)\n(.*?)^```\n")
KINDS = ("python", "output", "console", "sh", "text")
"""The kinds of block a page may hold; ``text`` (a layout, a table of bytes) is not run."""


@dataclass(frozen=True)
class Block:
    kind: str
    text: str
    line: int
    """Where the block starts in its page (1-based), for messages."""


def blocks(page: Path) -> list[Block]:
    text = page.read_text(encoding="utf-8")
    return [
        Block(m.group(1), m.group(2), text.count("\n", 0, m.start()) + 1)
        for m in BLOCK.finditer(text)
    ]


def matches(expected: str, actual: str) -> bool:
    """Whether ``actual`` is ``expected`` with its ``...`` filled in."""
    pattern = []
    for line in expected.splitlines():
        if line.strip() == "...":
            pattern.append(r"(?:[^\n]*\n)*?")
        else:
            pattern.append(".*".join(map(re.escape, line.split("..."))) + r"\n")
    return (
        re.fullmatch(
            "".join(pattern), actual if actual.endswith("\n") or not actual else actual + "\n", re.S
        )
        is not None
    )


def server_for(page: str) -> str:
    """The fork server whose imports a page's code needs (:data:`tests.forkserver.PRELOADS`)."""
    if "google.adk" in page:
        return "adk"
    if "from langgraph" in page:
        return "langgraph"
    if "from dbos" in page:
        return "dbos"
    if any(name in page for name in ("from agents ", "import anthropic", "import openai")):
        return "frameworks"
    return "library"


def environment(extra: dict[str, str], server: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENT_SESSION_STORE")}
    commands = [str(command_directory(server)), os.path.dirname(sys.executable)]
    env["PATH"] = os.pathsep.join([*commands, env.get("PATH", "")])
    env["COLUMNS"] = "100"
    env.update(extra)
    return env


def run_page(page: Path, workdir: Path, extra_env: dict[str, str] | None = None) -> int:
    """Run every block of ``page`` in ``workdir``; return how many ran. Raises
    ``AssertionError`` naming the page and line of the first block that does not do what
    the page says."""
    server = server_for(page.read_text(encoding="utf-8"))
    env = environment({"XDG_CACHE_HOME": str(workdir / ".cache"), **(extra_env or {})}, server)
    found = blocks(page)
    ran = 0
    for index, block in enumerate(found):
        where = f"{page.resolve().relative_to(ROOT)}:{block.line}"
        assert block.kind in KINDS, f"{where}: a ```{block.kind} block, which nothing runs"
        following = found[index + 1] if index + 1 < len(found) else None
        if block.kind == "python":
            first = block.text.partition("\n")[0]
            if first.startswith("# file: "):
                (workdir / first.removeprefix("# file: ").strip()).write_text(block.text)
                ran += 1
                continue
            done = run_code(block.text, cwd=workdir, env=env, server=server)
            assert done.returncode == 0, f"{where} failed:\n{done.stderr}"
            assert done.stderr == "", f"{where} wrote to stderr:\n{done.stderr}"
            if following is not None and following.kind == "output":
                assert matches(following.text, done.stdout), (
                    f"{where} printed:\n{done.stdout}\nthe page says:\n{following.text}"
                )
            ran += 1
        elif block.kind == "console":
            ran += _console(block, where, workdir, env)
        elif block.kind == "sh":
            _setup(block, where)
            ran += 1
    return ran


def _console(block: Block, where: str, workdir: Path, env: dict[str, str]) -> int:
    commands: list[tuple[str, list[str]]] = []
    for line in block.text.splitlines():
        if line.startswith("$ "):
            commands.append((line[2:], []))
        else:
            assert commands, f"{where}: output before any command"
            commands[-1][1].append(line)
    for command, expected in commands:
        done = subprocess.run(
            ["bash", "-c", "{ " + command + "\n} 2>&1"],
            cwd=workdir,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        assert done.returncode == 0, (
            f"{where}: `{command}` exited {done.returncode}:\n{done.stdout}"
        )
        text = "\n".join(expected)
        assert matches(text + "\n" if text else "", done.stdout), (
            f"{where}: `{command}` printed:\n{done.stdout}\nthe page says:\n{text}"
        )
    return len(commands)


def _setup(block: Block, where: str) -> None:
    targets = set(re.findall(r"(?m)^([\w-]+):", (ROOT / "Makefile").read_text()))
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    for line in block.text.splitlines():
        command = line.split("#", 1)[0].strip()
        if command.startswith("make "):
            assert command.split()[1] in targets, f"{where}: no make target in `{command}`"
        elif command.startswith("pip install"):
            for extra in re.findall(r"\[([\w,-]+)\]", command):
                for name in extra.split(","):
                    assert name in extras, f"{where}: no extra {name!r} in `{command}`"
        elif command:
            raise AssertionError(f"{where}: a set-up command this runner cannot check: {line}")
