"""The one way a test runs `ga`: `invoke_ga` on the Typer app in this process, `run_ga` as a real process, or
`on_terminal` in a real 80x24 terminal, drawn as the person at it sees it.

Use `invoke_ga` unless the test needs what only a process has: the exit code, stdout and stderr exactly as a
user's shell sees them (a traceback would show), an environment of its own (keys unset, another GA_HOME), a
`python -m cli` start-up, or a store changed underneath by another process. A test that holds the process
while it runs (signals, kills, a prompt) starts `GA` itself with `ga_env()` (or `spawn_terminal` and `drawn`).

Every `ga` here is 80 columns wide and 24 lines high, as a stock terminal is: piped (COLUMNS, LINES) or on a
terminal of that size.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Optional

import pexpect
import pyte
from click.testing import Result
from typer.testing import CliRunner

REPO = Path(__file__).resolve().parents[1]
# The installed lane (tests/installed_lane.py) names an installed `ga` here: it is then the `ga` tests start, as a
# user's shell finds it, with nothing of this tree on PYTHONPATH.
INSTALLED = os.environ.get("GA_TEST_INSTALLED")
GA = [INSTALLED] if INSTALLED else [sys.executable, "-m", "cli"]  # the command line of a real `ga`
TERMINAL = (24, 80)  # lines, columns: a stock terminal


def ga_env(changes: dict[str, str | None] | None = None) -> dict[str, str]:
    """This process's environment with this tree on PYTHONPATH and a stock terminal's size; a None value unsets a
    name.

    PYTHONPATH because `python -m` puts the cwd first, and a test's cwd may hold a configs/ folder of its own."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "COLUMNS": str(TERMINAL[1]), "LINES": str(TERMINAL[0])}
    if INSTALLED:  # the installed lane: nothing of this tree
        del env["PYTHONPATH"]
    for name, value in (changes or {}).items():
        if value is None:
            env.pop(name, None)
        else:
            env[name] = value
    return env


def run_ga(*args: str, cwd: Path = REPO, env: dict[str, str | None] | None = None,
           timeout: float = 300) -> subprocess.CompletedProcess:
    """`ga ARGS` as a real process, run to its end; `env` changes the inherited environment (None unsets)."""
    return subprocess.run([*GA, *args], cwd=cwd, env=ga_env(env), capture_output=True, text=True, timeout=timeout)


def invoke_ga(*args: str, **options) -> Result:
    """`ga ARGS` on the Typer app in this process (CliRunner; `options` go to `invoke`, e.g. input=...)."""
    from cli import app  # here, not at the top: modules that only run real processes need not import the CLI

    return CliRunner().invoke(app, list(args), **options)


def spawn_terminal(*args: str, cwd: Path, env: dict[str, str | None] | None = None,
                   timeout: float = 120) -> pexpect.spawn:
    """`ga ARGS` in a real 80x24 terminal (xterm), its size the terminal's own (no COLUMNS, no LINES)."""
    return pexpect.spawn(GA[0], [*GA[1:], *args], cwd=str(cwd), encoding="utf-8", timeout=timeout,
                         dimensions=TERMINAL, env=ga_env({"COLUMNS": None, "LINES": None, "TERM": "xterm", **(env or {})}))


def drawn(output: str, columns: int = TERMINAL[1], lines: int = TERMINAL[0]) -> list[str]:
    """What a terminal of that size shows of `output`, every line that scrolled past included: the terminal's own
    wrapping, cursor moves and erasing applied (pyte), so a word the terminal broke is broken here too."""
    screen = pyte.HistoryScreen(columns, lines, history=100_000, ratio=0.5)
    pyte.Stream(screen).feed(output)
    scrolled = ["".join(row[x].data for x in range(columns)).rstrip() for row in screen.history.top]
    shown = [line.rstrip() for line in screen.display]
    while shown and not shown[-1]:
        shown.pop()
    return scrolled + shown


def on_terminal(*args: str, cwd: Path, env: dict[str, str | None] | None = None,
                timeout: float = 120) -> tuple[list[str], Optional[int]]:
    """`ga ARGS` in a real 80x24 terminal, run to its end: the lines drawn (see `drawn`) and its exit status."""
    child = spawn_terminal(*args, cwd=cwd, env=env, timeout=timeout)
    out = child.read()
    child.close()
    return drawn(out), child.exitstatus


def whole_on_a_line(lines: list[str], *texts: str) -> list[str]:
    """Those of `texts` that no drawn line holds whole (a word, an id or a command the terminal broke)."""
    return [text for text in texts if not any(text in line for line in lines)]
