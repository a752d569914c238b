"""`ga reflect`: a real trigger file, the scripted model over HTTP, reloads, bad files, signals."""
from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path

import pytest

from configs import load_settings
from orchestrator.triggers.reflect import TriggerError, load_trigger, reflect
from tests.ga_support import GA, ga_env, invoke_ga

REPO = Path(__file__).resolve().parents[2]
MODEL = "scripted:configs/examples/scripts/reflect_inbox.yaml"


pytestmark = pytest.mark.usefixtures("runs_in_tmp")


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def test_a_task_from_check_runs_once_with_the_scripted_model(tmp_path, ga_home, runs_in_tmp):
    work = tmp_path / "work"
    (work / "inbox").mkdir(parents=True)
    (work / "inbox" / "todo.md").write_text("Call the bank about the card.\n")
    calls = tmp_path / "calls.txt"
    trigger = write(tmp_path / "inbox_trigger.py", f"""
from pathlib import Path
INTERVAL = 0
ONCE = True
CALLS = Path({str(calls)!r})

def check():
    CALLS.write_text(CALLS.read_text() + "x" if CALLS.exists() else "x")
    if len(CALLS.read_text()) < 2:
        return None          # nothing to do on the first look
    return "Summarize the note inbox/todo.md in one line"
""")
    result = invoke_ga("reflect", str(trigger), "--model", MODEL, "--workdir", str(work), "--json",
                       "--max-cycles", "5")
    assert result.exit_code == 0, result.output + result.stderr
    records = [json.loads(line) for line in result.stdout.splitlines()]
    assert [(r["event"], r["cycle"], r["status"]) for r in records] == [("task", 2, "succeeded")]
    assert "Call the bank" in records[0]["answer"]  # the worker's code_run read the note in --workdir
    assert calls.read_text() == "xx"  # ONCE: stopped after the first task, long before --max-cycles
    logged = (ga_home / "reflect" / "inbox_trigger.jsonl").read_text().splitlines()
    assert [json.loads(line)["task_id"] for line in logged] == [records[0]["task_id"]]
    assert Path(records[0]["history"]).is_file() and Path(records[0]["history"]).is_relative_to(runs_in_tmp)

    calls.unlink()
    shown = invoke_ga("reflect", str(trigger), "--model", MODEL, "--workdir", str(work), "--max-cycles", "5")
    assert shown.exit_code == 0, shown.output
    assert "Call the bank" in shown.stdout  # the answer, printed after the task's line


def test_the_trigger_is_reloaded_when_it_changes_and_a_broken_edit_keeps_the_last_good_one(tmp_path, ga_home):
    calls = tmp_path / "calls.txt"
    trigger = tmp_path / "self_editing.py"
    version = """
from pathlib import Path
INTERVAL = {interval}
THIS, CALLS = Path(__file__), Path({calls!r})

def check():
    with CALLS.open("a") as out:
        out.write("{name} ")
    {then}
    return None
"""

    def source(name: str, interval: float, then: str) -> str:
        return version.format(name=name, interval=interval, calls=str(calls), then=then)

    broken = "def check(:\\n"
    v2 = source("v2", 0.01, f"if CALLS.read_text().count('v2') == 1: THIS.write_text({broken!r})")
    write(trigger, source("v1", 0, f"THIS.write_text({v2!r})"))
    summary = reflect(trigger, load_settings(), max_cycles=4)
    assert calls.read_text().split() == ["v1", "v2", "v2", "v2"]
    events = [r["event"] for r in summary.records]
    assert events == ["reloaded", "reload_failed"]
    assert summary.records[0]["interval"] == 0.01
    assert f"{trigger}:1: syntax error" in summary.records[1]["error"]
    assert summary.stopped_by == "max_cycles" and summary.cycles == 4
    on_disk = [json.loads(line)["event"] for line in (ga_home / "reflect" / "self_editing.jsonl").read_text().splitlines()]
    assert on_disk == events


def test_a_failing_or_odd_check_is_logged_and_polling_goes_on(tmp_path):
    trigger = write(tmp_path / "flaky.py", """
INTERVAL = 0
state = {"n": 0}

def check():
    state["n"] += 1
    if state["n"] == 1:
        raise RuntimeError("sensor offline")
    if state["n"] == 2:
        return 42
    return None
""")
    summary = reflect(trigger, load_settings(), max_cycles=3)
    assert [(r["event"], r["error"]) for r in summary.records] == [
        ("check_failed", "RuntimeError: sensor offline"), ("check_failed", "check() returned int, not a str or None")]
    assert summary.cycles == 3


BAD_TRIGGERS = [
    ("def check(:\n    return None\n", ":1: syntax error in the reflect trigger", "fix the Python at that line"),
    ("INTERVAL = 5\n", "has no check() function", "add `def check() -> str | None"),
    ("import no_such_module_here\ndef check():\n    return None\n", ":1: the reflect trigger raised ModuleNotFoundError",
     "imports cleanly"),
    ("INTERVAL = 'soon'\ndef check():\n    return None\n", "INTERVAL = 'soon' is not a number", "INTERVAL = 1800"),
    ("ONCE = 'yes'\ndef check():\n    return None\n", "ONCE = 'yes' is not True or False", "ONCE = True"),
]


@pytest.mark.parametrize("body,where,fix", BAD_TRIGGERS, ids=[row[1] for row in BAD_TRIGGERS])
def test_a_bad_trigger_file_is_one_line_naming_the_file_and_the_fix(tmp_path, body, where, fix):
    trigger = write(tmp_path / "bad.py", body)
    result = invoke_ga("reflect", str(trigger), "--model", MODEL)
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {trigger}"), result.stderr
    assert where in lines[0] and fix in lines[0]
    with pytest.raises(TriggerError):
        load_trigger(trigger)


def test_a_missing_trigger_file_is_one_line(tmp_path):
    result = invoke_ga("reflect", str(tmp_path / "nope.py"))
    assert result.exit_code == 2 and "no such reflect trigger file" in result.stderr


def test_sigterm_stops_reflect_cleanly_between_checks(tmp_path, ga_home):
    trigger = write(tmp_path / "quiet.py", "INTERVAL = 60\ndef check():\n    return None\n")
    process = subprocess.Popen([*GA, "--log-level", "info", "reflect", str(trigger), "--model", MODEL], cwd=REPO,
                               env=ga_env({"GA_HOME": str(ga_home)}), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True)
    for line in process.stderr:  # logged once the signal handlers are in place
        if "reflect_started" in line:
            break
    else:
        pytest.fail(f"ga reflect exited early with {process.wait()}")
    time.sleep(0.5)  # into the 60 s wait after the first check
    started = time.monotonic()
    process.send_signal(signal.SIGTERM)
    out, err = process.communicate(timeout=30)
    assert process.returncode == 0, err
    assert time.monotonic() - started < 10
    assert "stopped by signal" in out
