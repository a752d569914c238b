"""Every shell command the README and the user guide show works as printed (convention: tests/docs_commands.py).

Each page's commands run in order in one bash, in a scratch directory shaped like the checkout after
`make quickstart` (configs/ copied; .venv the environment running these tests, or in the installed lane the one
`ga` is installed in), with a HOME of its own (so `~/.ga` and `~/.config/ga` are fresh), no model key and 80
columns, against the scripted model."""
from __future__ import annotations

import doctest
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.docs_commands import Block, Command, bash_blocks
from tests.ga_support import INSTALLED

REPO = Path(__file__).resolve().parents[1]
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
SHOWING_COMMANDS = [page for page in PAGES if any(b.not_run is None and b.commands for b in bash_blocks(page))]
NOT_OURS = ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME", "OPENAI_API_KEY", "OPENAI_BASE_URL")
MOST_NOT_RUN = 4  # `<!-- not run -->` is for what cannot run here; more than a few means pages drift untested


def _page_id(path: Path) -> str:
    return str(path.relative_to(REPO))


def scratch_checkout(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """A directory a page's commands run in, and their environment."""
    checkout = tmp_path / "ga"
    shutil.copytree(REPO / "configs", checkout / "configs", ignore=shutil.ignore_patterns("__pycache__"))
    bin_dir = Path(INSTALLED).parent if INSTALLED else Path(sys.executable).parent  # the `ga` a user would run
    if not (bin_dir / "activate").is_file():
        pytest.fail(f"the docs' commands run from a virtual environment (make test makes .venv); {bin_dir} is not one")
    (checkout / ".venv").symlink_to(bin_dir.parent)
    home = tmp_path / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in NOT_OURS and not k.startswith("GA_")}
    env.update(HOME=str(home), PATH=f"{bin_dir}{os.pathsep}{env.get('PATH', '')}",
               COLUMNS="80", LINES="24", RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER="0")
    return checkout, env


def script_for(commands: list[Command], results: Path) -> str:
    """One bash script: each command as typed, its output and exit code kept apart; the first failure stops it."""
    lines = ["exec </dev/null"]
    for index, command in enumerate(commands):
        out, code = shlex.quote(str(results / f"{index}.out")), shlex.quote(str(results / f"{index}.rc"))
        lines += ["{", command.text, f"}} >{out} 2>&1; rc=$?; echo $rc >{code}; [ $rc = 0 ] || exit 0"]
    return "\n".join(lines) + "\n"


def _tidy(text: str) -> str:
    return "\n".join(line.rstrip() for line in text.rstrip().splitlines()) + "\n"


def mismatch(want: str, got: str) -> str | None:
    """None when `got` is what the page shows (`...` for any text); else what differs."""
    checker = doctest.OutputChecker()
    want, got = _tidy(want), _tidy(got)
    if checker.check_output(want, got, doctest.ELLIPSIS):
        return None
    return checker.output_difference(doctest.Example("", want), got, doctest.ELLIPSIS)


@pytest.mark.timeout(900)
@pytest.mark.parametrize("page", SHOWING_COMMANDS, ids=_page_id)
def test_every_command_of_the_page_works_as_printed(page: Path, tmp_path: Path) -> None:
    commands = [c for block in bash_blocks(page) if block.not_run is None for c in block.commands]
    checkout, env = scratch_checkout(tmp_path)
    results = tmp_path / "results"
    results.mkdir()
    subprocess.run(["bash", "-c", script_for(commands, results)], cwd=checkout, env=env, timeout=840, check=True)

    for index, command in enumerate(commands):
        where = f"{_page_id(page)}:{command.line}: {command.text}"
        code_file = results / f"{index}.rc"
        assert code_file.exists(), f"{where}: not run (an earlier command failed)"
        output = (results / f"{index}.out").read_text(errors="replace")
        assert code_file.read_text().strip() == "0", f"{where}: exit {code_file.read_text().strip()}\n{output[-3000:]}"
        if command.output is not None:
            difference = mismatch(command.output, output)
            assert difference is None, f"{where}: prints other than the page shows\n{difference}"


def _not_run() -> list[Block]:
    return [block for page in PAGES for block in bash_blocks(page) if block.not_run is not None]


def test_blocks_left_out_say_why_and_are_few() -> None:
    left_out = _not_run()
    assert all(block.not_run for block in left_out), [f"{b.path}:{b.line}" for b in left_out if not b.not_run]
    assert len(left_out) <= MOST_NOT_RUN, [f"{_page_id(b.path)}:{b.line}: {b.not_run}" for b in left_out]


def test_the_quick_start_is_the_two_commands_that_ci_and_the_fresh_clone_test_run() -> None:
    """The house rule: the README's Quick start is exactly two commands that work on a fresh machine with only
    the system's Python; tests/cli/test_quickstart_install.py runs the first in a fresh clone, .ci/run the second."""
    readme = (REPO / "README.md").read_text()
    quick_start = readme.split("\n## Quick start\n", 1)[1].split("\n## ", 1)[0]
    commands = [c.text for b in bash_blocks(REPO / "README.md", quick_start) for c in b.commands]
    assert commands == ["make quickstart", "make test"], commands

    fresh_clone = (REPO / "tests" / "cli" / "test_quickstart_install.py").read_text()
    assert '["make", "quickstart"]' in fresh_clone
    ci = [line for line in (REPO / ".ci" / "run").read_text().splitlines() if not line.lstrip().startswith("#")]
    assert any(re.search(r"\bmake test( |$)", line) for line in ci), "no `make test` in .ci/run"



def test_make_docs_builds_every_page_into_a_site_that_loads_nothing_from_the_web(tmp_path: Path) -> None:
    """What `make docs` runs (mkdocs.yml: strict, so a broken link or anchor fails it too)."""
    site = tmp_path / "site"
    done = subprocess.run([str(Path(sys.executable).parent / "mkdocs"), "build", "--site-dir", str(site)], cwd=REPO,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    for page in (REPO / "docs").glob("*.md"):
        built = site / "index.html" if page.stem == "index" else site / page.stem / "index.html"
        assert built.is_file(), f"{page.name} was not built"
        remote = re.findall(r'<(?:script|link)[^>]+(?:src|href)="(https?://[^"]+)"', built.read_text())
        assert not remote, f"{built} loads {remote}"
