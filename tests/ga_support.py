"""The one way a test runs `ga`: `invoke_ga` on the Typer app in this process, or `run_ga` as a real process.

Use `invoke_ga` unless the test needs what only a process has: the exit code, stdout and stderr exactly as a
user's shell sees them (a traceback would show), an environment of its own (keys unset, another GA_HOME), a
`python -m cli` start-up, or a store changed underneath by another process. A test that holds the process
while it runs (signals, kills, a prompt) starts `GA` itself with `ga_env()`.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from click.testing import Result
from typer.testing import CliRunner

REPO = Path(__file__).resolve().parents[1]
# The installed lane (tests/installed_lane.py) names an installed `ga` here: it is then the `ga` tests start, as a
# user's shell finds it, with nothing of this tree on PYTHONPATH.
INSTALLED = os.environ.get("GA_TEST_INSTALLED")
GA = [INSTALLED] if INSTALLED else [sys.executable, "-m", "cli"]  # the command line of a real `ga`


def ga_env(changes: dict[str, str | None] | None = None) -> dict[str, str]:
    """This process's environment with this tree on PYTHONPATH and wide output; a None value unsets a name.

    PYTHONPATH because `python -m` puts the cwd first, and a test's cwd may hold a configs/ folder of its own."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "COLUMNS": "400"}
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
