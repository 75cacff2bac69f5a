"""The README and every page of ``docs/`` do what they say: each code block runs as written,
in order, in an empty directory, and prints what the page shows (``tests/docs_runner.py``);
every page is listed in the README and every link between pages resolves; and the counts the
pages state (commands, exit codes, dependencies, errors) are the code's."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

from agent_session.providers.standin import serving
from tests.backends import fresh_database
from tests.docs_runner import ROOT, matches, run_page
from tests.s3_server import s3_environment

pytestmark = pytest.mark.process

README = ROOT / "README.md"
PAGES = sorted((ROOT / "docs").glob("*.md"))


@pytest.mark.parametrize("page", [README, *PAGES], ids=lambda p: p.name)
def test_every_block_of_the_page_does_what_it_says(page: Path, tmp_path: Path) -> None:
    """Every code block of the page run as a reader would (``tests/docs_runner.py``); longer
    than 20 s for the pages that run many commands (``cli.md``), each in a new process."""
    extra = {}
    text = page.read_text()
    if "DATABASE_URL" in text:
        extra["DATABASE_URL"] = fresh_database()
    if "AWS_ENDPOINT_URL" in text:  # an S3-compatible server on 127.0.0.1
        extra.update(s3_environment())
    if "OPENAI_API_KEY" in text or "ANTHROPIC_API_KEY" in text:
        with serving() as provider:  # a stand-in on 127.0.0.1: the tests use no network
            run_page(page, tmp_path, {**extra, **provider})
        return
    run_page(page, tmp_path, extra)


def test_the_readme_links_every_page_and_every_link_resolves() -> None:
    readme = README.read_text()
    for page in PAGES:
        assert f"(docs/{page.name})" in readme, f"the README does not link {page.name}"
    for page in [README, *PAGES]:
        for target in re.findall(r"\]\(([^)#:]+\.md)(?:#[^)]*)?\)", page.read_text()):
            assert (page.parent / target).is_file(), f"{page.name} links to {target}"


def test_the_readme_is_a_front_page() -> None:
    assert len(README.read_text().splitlines()) <= 250
    imports = re.findall(r"(?m)^(?:from|import) ([\w.]+)", README.read_text())
    assert set(imports) <= {"agent_session", "asyncio", "agents"}, imports


def test_no_page_cites_an_issue_or_a_date() -> None:
    for page in [README, *PAGES]:
        text = page.read_text()
        assert not re.search(r"(?i)\bissue \d+|\(#\d+\)", text), page.name
        assert not re.search(r"\b20\d\d-\d\d-\d\d\b", text), page.name


def test_the_runner_sees_a_mismatch() -> None:
    assert matches("a\n...\nc ... e\n", "a\nb\nb\nc d e\n")
    assert not matches("a\nc\n", "a\nb\nc\n")
    assert not matches("x ... z\n", "x y\n")


def _tree(cls: type, prefix: str = "") -> list[str]:
    """The error tree as ``docs/errors.md`` draws it: names and built-in bases only."""
    lines = []
    children = sorted(
        (c for c in cls.__subclasses__() if not c.__module__.startswith("tests")),
        key=lambda c: c.__name__,
    )
    for index, child in enumerate(children):
        last = index == len(children) - 1
        builtins = [b.__name__ for b in child.__bases__ if b.__module__ == "builtins"]
        shown = child.__name__ + (f" ({', '.join(builtins)})" if builtins else "")
        lines.append(prefix + ("└── " if last else "├── ") + shown)
        lines += _tree(child, prefix + ("    " if last else "│   "))
    return lines


def test_the_error_tree_is_the_code_s() -> None:
    import agent_session.agent_loop
    import agent_session.audit  # (SigningError)
    import agent_session.otel.export  # (TraceExportError)
    import agent_session.otel.settings  # (TraceSettingsError)
    import agent_session.see.prices  # (PriceTableError)
    import agent_session.testing  # noqa: F401
    from agent_session import SessionError

    text = (ROOT / "docs" / "errors.md").read_text()
    drawn = re.search(r"```text\nSessionError\n(.*?)```", text, re.S)
    assert drawn is not None
    shape = re.compile(r"[│ ]*[├└]── \w+(?: \(\w+\))?")
    names = [shape.match(line).group(0) for line in drawn.group(1).splitlines()]  # type: ignore[union-attr]
    assert names == _tree(SessionError)


def test_the_exit_codes_on_the_page_are_the_code_s() -> None:
    from agent_session.cli import exits

    def table(text: str) -> list[tuple[str, str]]:
        plain = text.replace("``", "`").replace("\\|", "|")
        return re.findall(r"(?m)^\| (\d+) \| (.*?) \|$", plain)

    page = table((ROOT / "docs" / "operations.md").read_text())
    assert page == table(exits.__doc__ or "")
    assert [int(code) for code, _ in page] == sorted(
        value for name, value in vars(exits).items() if name.isupper() and isinstance(value, int)
    )


def test_every_command_is_on_the_cli_page_and_run_there() -> None:
    from agent_session.cli.arguments import EXAMPLES

    page = (ROOT / "docs" / "cli.md").read_text()
    assert sorted(re.findall(r"(?m)^## ([\w-]+)$", page)) == sorted(EXAMPLES)
    for command in EXAMPLES:
        assert f"$ agent-session {command} " in page, command


def test_the_dependencies_the_pages_name_are_the_package_s() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    names = sorted(re.split(r"[<>=\[ ]", d)[0] for d in project["dependencies"])
    page = (ROOT / "docs" / "development.md").read_text()
    stated = re.search(r"(\w+) runtime dependencies: (.*?)\.", page)
    assert stated is not None
    words = ["one", "two", "three", "four", "five"]
    assert stated.group(1) == words[len(names) - 1]
    assert sorted(re.findall(r"`([\w-]+)`", stated.group(2))) == names


def test_the_readme_recipe_killed_inside_its_tool_sends_once_and_exports_a_valid_request(
    tmp_path: Path,
) -> None:
    """The README's recipe on its crash path: SIGKILLed inside ``send_email`` after the
    effect, then run again. It settles the call (idempotent: sent again under its id), the
    model goes on from the cut, and the log holds one ``call-1`` that every export accepts."""
    import signal
    import subprocess
    import sys

    from tests.docs_runner import blocks
    from tests.test_cli import cli

    [recipe] = [b.text for b in blocks(README) if b.kind == "python"][:1]
    effect = '            outbox.append((args["to"], call.call_id))'
    assert effect in recipe
    kill = "import os, signal; os.path.exists('died') or (open('died', 'w').close(), os.kill(os.getpid(), signal.SIGKILL))"
    script = tmp_path / "recipe.py"
    script.write_text(recipe.replace(effect, f"{effect}\n            {kill}"))
    runs = [
        subprocess.run(
            [sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=120
        )
        for _ in range(2)
    ]
    assert runs[0].returncode == -signal.SIGKILL, runs[0].stderr
    assert runs[1].returncode == 0, runs[1].stderr
    assert runs[1].stdout == "{'kind': 'completed'} [('ada@example.com', 'call-1')]\n"
    store = str(tmp_path / "agent-sessions")
    assert "chat-1: balanced" in cli("verify", store).stdout
    exported = cli("export", store, "chat-1", "--format", "openai").stdout
    assert exported.count('"id": "call-1"') + exported.count('"id":"call-1"') == 1
