"""What a worker process imports: the heavy packages it does not use on the fan-out path stay out.

openai's types cost ~0.3 s and Playwright ~60 ms in every worker process and in `ga fanout`; the model
client reads replies with its own models and the web tools import the browser at their first call.
"""
from __future__ import annotations

import inspect
import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

PROBE = """
import json, sys
import worker.agent, worker.model.client
from worker.tools import REGISTRY
print(json.dumps({"loaded": [m for m in ("openai", "playwright", "lxml") if m in sys.modules],
                  "tools": sorted(REGISTRY)}))
"""


def test_a_worker_imports_neither_openai_nor_playwright_until_it_browses():
    proc = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, cwd=REPO, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert proc.returncode == 0, proc.stderr
    found = json.loads(proc.stdout)
    assert found["loaded"] == []
    assert {"web_scan", "web_execute_js", "code_run", "file_write"} <= set(found["tools"])  # still registered


SESSIONS_PROBE = """
import sys
from typer.testing import CliRunner
from cli import app
result = CliRunner().invoke(app, ["sessions", "list", "--all"])
assert result.exit_code == 0, result.output
print(sorted(m for m in ("worker.agent", "worker.conversations", "worker.tools") if m in sys.modules))
"""


def test_listing_sessions_loads_no_agent_loop(tmp_path: Path):
    """`ga sessions list` reads session records and prints a table (worker/sessionfiles.py, worker/chatview.py):
    the agent loop, its tools and the browser stay out of the process."""
    proc = subprocess.run([sys.executable, "-c", SESSIONS_PROBE], capture_output=True, text=True, cwd=REPO, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(REPO), "GA_HOME": str(tmp_path)})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().splitlines()[-1] == "[]"


HELP_PROBE = """
import sys
from typer.testing import CliRunner
from cli import app
result = CliRunner().invoke(app, ["--help"])
assert result.exit_code == 0, result.output
print(sorted(m for m in sys.modules if m.startswith("cli.") and m not in ("cli.errors", "cli.kit", "cli.root")))
"""


def test_ga_help_loads_no_command_module(tmp_path: Path):
    """`ga --help` lists the commands from cli/root.py's COMMANDS: each command's module is loaded when it runs."""
    proc = subprocess.run([sys.executable, "-c", HELP_PROBE], capture_output=True, text=True, cwd=REPO, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(REPO), "GA_HOME": str(tmp_path)})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().splitlines()[-1] == "[]"


def test_the_summaries_in_ga_help_are_the_commands_own():
    """What `ga --help` shows of a command without loading it is the first paragraph of the command's own help."""
    from cli.root import COMMANDS, load_command

    for name, command in COMMANDS.items():
        real = load_command(name)
        assert real.name == name
        assert inspect.cleandoc(real.help or "").split("\n\n")[0].strip() == command.summary, name
        assert (real.short_help, real.hidden, real.deprecated) == (None, False, False), name
