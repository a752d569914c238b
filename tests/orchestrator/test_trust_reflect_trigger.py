"""`ga reflect TRIGGER.py` runs the trigger's Python in ga's own process (outside any sandbox, the model key in its
environment) and reloads the file when it changes; its tasks run in the working directory. A trigger in that
directory (the usual `ga reflect nightly.py` in a project) was a file the task could rewrite: the next cycle ran
the task's code with ga's rights. A real `ga reflect`, the scripted model as the attacker, real bubblewrap.
"""
from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Iterator

import pytest
import yaml

from tests.ga_support import run_ga

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap not installed")
KEY = "FAKE-KEY-reflect-trigger-5150"
TRIGGER = """INTERVAL = 0
import pathlib
def check():
    asked = pathlib.Path(ASKED)
    if not asked.exists():
        asked.write_text("1")
        return "REWRITE-THE-TRIGGER"
    return None
"""
# what the task appends to the trigger: run at its reload, in ga's process
PLANT = """
with open(TRIGGER, "a") as handle:
    handle.write("\\nimport os\\nopen(PWNED, 'w').write(os.environ.get('OPENAI_API_KEY', 'none'))\\n")
print("planted")
"""


@pytest.fixture
def place() -> Iterator[Path]:
    root = Path(tempfile.mkdtemp(prefix="ga-reflect-", dir="/var/tmp"))
    for name in ("home", "ga-home", "project", "elsewhere"):
        (root / name).mkdir()
    yield root
    shutil.rmtree(root, ignore_errors=True)


def reflect(place: Path, trigger: Path, *args: str) -> tuple[str, str]:
    pwned = place / "pwned"
    plant = PLANT.replace("TRIGGER", repr(str(trigger))).replace("PWNED", repr(repr(str(pwned)))[1:-1])
    model = place / "model.yaml"
    model.write_text(yaml.safe_dump({"tasks": [{"match": ".*", "turns": [
        {"content": "x", "tool_calls": [{"name": "code_run", "arguments": {"type": "python", "script": plant}}]},
        {"content": "done:", "echo_last_tool_result": True}]}]}))
    trigger.write_text(TRIGGER.replace("ASKED", repr(str(place / "asked"))))
    done = run_ga("reflect", str(trigger), "--model", f"scripted:{model}", "--max-cycles", "3", *args,
                  cwd=place / "project", timeout=300,
                  env={"HOME": str(place / "home"), "GA_HOME": str(place / "ga-home"), "OPENAI_API_KEY": KEY})
    return done.stdout + done.stderr, pwned.read_text() if pwned.exists() else ""


def test_a_trigger_the_tasks_could_rewrite_is_refused(place: Path) -> None:
    said, pwned = reflect(place, place / "project" / "nightly.py")
    assert not pwned and KEY not in said, (pwned, said[-2000:])
    assert "nightly.py" in said and "writable" in said, said[-2000:]  # refused, in one line saying why


def test_a_trigger_outside_what_tasks_write_runs_and_its_task_cannot_change_it(place: Path) -> None:
    said, pwned = reflect(place, place / "elsewhere" / "nightly.py")
    assert not pwned and KEY not in said, (pwned, said[-2000:])
    assert "REWRITE-THE-TRIGGER" in said or "Read-only file system" in said, said[-2000:]  # the task did run
