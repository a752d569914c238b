"""Activity records and the idle test: real lock-holding processes, a real kill -9, an injected clock."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from configs import load_settings
from orchestrator.triggers.activity import (
    idle_now,
    idle_status,
    is_idle,
    last_active,
    record_activity,
    running_jobs,
    user_job,
)
from tests.ga_support import GA, REPO, ga_env, invoke_ga

WINDOW = timedelta(minutes=30)

pytestmark = pytest.mark.usefixtures("runs_in_tmp")

HOLDER = """
import sys, time
from orchestrator.triggers.activity import user_job
with user_job(sys.argv[1], sys.argv[2], heartbeat=float(sys.argv[3])):
    print("running", flush=True)
    sys.stdin.readline()  # runs until the test closes stdin (or kills it)
"""


def later(**delta) -> callable:
    moment = datetime.now().astimezone() + timedelta(**delta)
    return lambda: moment


def start_holder(home: Path, kind: str = "fanout", heartbeat: float = 30.0) -> subprocess.Popen:
    process = subprocess.Popen([sys.executable, "-c", HOLDER, str(home), kind, str(heartbeat)], stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, text=True)
    assert process.stdout.readline().strip() == "running"
    return process


def test_a_running_job_is_busy_until_it_ends_and_the_window_passes(ga_home):
    assert is_idle(ga_home, WINDOW)  # nothing ever ran
    holder = start_holder(ga_home)
    try:
        jobs = running_jobs(ga_home)
        assert [(j.kind, j.pid) for j in jobs] == [("fanout", holder.pid)]
        assert not is_idle(ga_home, WINDOW, now=later(days=30))  # however late it is: the job still runs
        assert "is running" in idle_status(ga_home, WINDOW).reason
    finally:
        holder.stdin.close()
        assert holder.wait(timeout=30) == 0
    assert running_jobs(ga_home) == []
    assert not is_idle(ga_home, WINDOW, now=later(minutes=10))
    assert is_idle(ga_home, WINDOW, now=later(minutes=31))
    ended = json.loads((ga_home / "activity" / "ended" / "fanout.json").read_text())
    assert ended["crashed"] is False


def test_a_crashed_holder_does_not_keep_it_busy(ga_home):
    holder = start_holder(ga_home, heartbeat=0.05)
    time.sleep(0.5)  # some heartbeats: the crash is dated by the last one, not by the start
    holder.send_signal(signal.SIGKILL)
    holder.wait(timeout=30)
    killed_at = datetime.now().astimezone()
    assert running_jobs(ga_home) == []  # the kernel dropped its lock; the record is reaped
    assert list((ga_home / "activity" / "jobs").glob("*.lock")) == []
    ended = json.loads((ga_home / "activity" / "ended" / "fanout.json").read_text())
    assert ended["crashed"] is True
    crash = datetime.fromisoformat(ended["ended"])
    assert datetime.fromisoformat(ended["started"]) + timedelta(seconds=0.2) < crash <= killed_at
    assert not is_idle(ga_home, WINDOW)  # it was active moments ago
    assert is_idle(ga_home, WINDOW, now=later(minutes=31))


def test_user_job_uses_the_injected_clock_and_only_user_kinds_count(ga_home):
    noon = datetime(2026, 6, 1, 12, 0, tzinfo=timezone.utc)
    with user_job(ga_home, "reflect", now=lambda: noon) as job:
        assert job.started == noon
        assert [j.kind for j in running_jobs(ga_home)] == ["reflect"]
        assert is_idle(ga_home, WINDOW, now=lambda: noon)  # reflect is not a user job by default
        assert not is_idle(ga_home, WINDOW, now=lambda: noon, kinds=("reflect",))
    with user_job(ga_home, "run", now=lambda: noon):
        pass
    assert last_active(ga_home) == noon
    assert not is_idle(ga_home, WINDOW, now=lambda: noon + timedelta(minutes=29))
    assert is_idle(ga_home, "30m", now=lambda: noon + timedelta(minutes=30))


def test_a_command_start_counts_as_activity(ga_home):
    start = datetime(2026, 6, 1, 12, 0, tzinfo=timezone.utc)
    record_activity(ga_home, "fanout", now=lambda: start)
    assert last_active(ga_home) == start
    assert not is_idle(ga_home, WINDOW, now=lambda: start + timedelta(minutes=5))
    record_activity(ga_home, "memory", now=lambda: start + timedelta(minutes=1))  # not a user job
    assert last_active(ga_home) == start


def test_every_ga_command_records_its_start(ga_home):
    result = invoke_ga("memory", "init")
    assert result.exit_code == 0, result.output
    record = json.loads((ga_home / "activity" / "commands" / "memory.json").read_text())
    assert record["command"] == "memory" and record["pid"] == os.getpid()
    assert abs(datetime.fromisoformat(record["time"]) - datetime.now().astimezone()) < timedelta(minutes=1)


def test_ga_run_is_a_user_job_while_it_runs(tmp_path, ga_home):
    """`ga run` holds its activity lock for the whole task: seen busy from another process meanwhile."""
    script = tmp_path / "slow.yaml"
    script.write_text("latency: 0\ntasks:\n  - match: '.*'\n    turns:\n      - tool_calls: [{name: code_run, "
                      "arguments: {type: bash, script: 'sleep 2; echo slept'}}]\n      - content: slept for two seconds\n")
    process = subprocess.Popen([*GA, "run", "sleep a bit", "--model", f"scripted:{script}", "--workdir", str(tmp_path),
                                "--json"], cwd=REPO, env=ga_env({"GA_HOME": str(ga_home)}),
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    deadline = time.monotonic() + 60
    while not running_jobs(ga_home):
        assert process.poll() is None and time.monotonic() < deadline, "ga run never showed up as running"
        time.sleep(0.05)
    assert [j.kind for j in running_jobs(ga_home)] == ["run"] and not is_idle(ga_home, WINDOW)
    out, _ = process.communicate(timeout=120)
    assert process.returncode == 0 and json.loads(out)["status"] == "succeeded"
    assert running_jobs(ga_home) == []
    assert not is_idle(ga_home, WINDOW) and is_idle(ga_home, WINDOW, now=later(minutes=31))


@pytest.mark.parametrize("body,idle,needle", [
    ("def check():\n    return True\n", True, "returned True"),
    ("def check():\n    return False\n", False, "returned False"),
    ("def check():\n    raise OSError('no sensor')\n", False, "raised OSError: no sensor"),
    ("def check(:\n", False, "syntax error"),
    ("INTERVAL = 3\n", False, "no check() function"),
])
def test_an_idle_trigger_replaces_the_window(tmp_path, ga_home, body, idle, needle):
    trigger = tmp_path / "away.py"
    trigger.write_text(body)
    with user_job(ga_home, "run"):
        pass  # a job ended just now: the window rule alone would say busy
    status = idle_status(ga_home, WINDOW, trigger=trigger)
    assert status.idle is idle and needle in status.reason, status.reason


def test_a_running_job_beats_an_idle_trigger(tmp_path, ga_home):
    trigger = tmp_path / "away.py"
    trigger.write_text(textwrap.dedent("""
        def check():
            return True
    """))
    with user_job(ga_home, "fanout"):
        assert idle_status(ga_home, WINDOW, trigger=trigger).idle is False
    assert idle_status(ga_home, WINDOW, trigger=trigger).idle is True


def test_idle_now_follows_the_settings(tmp_path, ga_home, monkeypatch):
    with user_job(ga_home, "fanout"):
        pass
    monkeypatch.setenv("GA_EXPLORE__IDLE_WINDOW", "1s")
    assert not idle_now(load_settings()).idle
    assert idle_now(load_settings(), now=later(seconds=2)).idle
    trigger = tmp_path / "never.py"
    trigger.write_text("def check():\n    return False\n")
    monkeypatch.setenv("GA_EXPLORE__IDLE_TRIGGER", str(trigger))
    status = idle_now(load_settings(), now=later(seconds=2))
    assert not status.idle and "never.py" in status.reason
