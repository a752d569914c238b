"""`ga schedule`: the pure rules (table-driven, injected clock), the jobs file, the runner and its state."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from configs import load_settings
from memory_shared import Archive, MemoryStore
from orchestrator.triggers.jobrules import JobState, after_run_started, after_skip, decide, latest_slot, next_slot
from orchestrator.triggers.jobs import Job, JobsError, load_jobs
from orchestrator.triggers.schedule import ScheduleError, load_state, run_schedule, scheduler_lock
from tests.ga_support import GA, ga_env, invoke_ga

REPO = Path(__file__).resolve().parents[2]
UTC = timezone.utc


pytestmark = pytest.mark.usefixtures("runs_in_tmp")


def at(day: int, hour: int, minute: int = 0, second: int = 0) -> datetime:
    """2026-06-<day> in UTC; 2026-06-01 is a Monday."""
    return datetime(2026, 6, day, hour, minute, second, tzinfo=UTC)


def job(**fields) -> Job:
    return Job.model_validate({"name": "j", "task": "do it", **fields})


def state(last_slot=None, last_run=None, runs=0) -> JobState:
    return JobState(last_slot=last_slot, last_run=last_run if last_run else last_slot, runs=runs)


DAILY = {"at": "03:00"}
EVERY_30 = {"every": "30m"}

# (case, job fields, state, now, expected action, expected slot)
RULES = [
    ("before the time of day", DAILY, state(), at(1, 2, 59), "wait", at(1, 3)),
    ("at the time of day", DAILY, state(), at(1, 3, 0, 20), "run", at(1, 3)),
    ("just after a run", DAILY, state(at(1, 3), runs=1), at(1, 3, 5), "wait", at(2, 3)),
    ("the next day", DAILY, state(at(1, 3), runs=1), at(2, 3, 0, 30), "run", at(2, 3)),
    ("missed twice: caught up once, within max_delay", DAILY, state(at(1, 3), runs=1), at(4, 3, 40), "run", at(4, 3)),
    ("missed beyond max_delay: skipped", DAILY, state(at(1, 3), runs=1), at(4, 5), "skip", at(4, 3)),
    ("max_delay set wider", {**DAILY, "max_delay": "3h"}, state(at(1, 3), runs=1), at(4, 5), "run", at(4, 3)),
    ("a new job does not run a slot older than max_delay", DAILY, state(), at(4, 5), "wait", at(5, 3)),
    ("a clock set back does not repeat", DAILY, state(at(4, 3), runs=1), at(3, 3, 30), "wait", at(4, 3)),
    ("interval: first look runs the current slot", EVERY_30, state(), at(1, 10, 10), "run", at(1, 10)),
    ("interval: between slots", EVERY_30, state(at(1, 10), runs=1), at(1, 10, 20), "wait", at(1, 10, 30)),
    ("interval: next slot", EVERY_30, state(at(1, 10), runs=1), at(1, 10, 30, 5), "run", at(1, 10, 30)),
    ("interval: hours missed, one run", EVERY_30, state(at(1, 10), runs=1), at(1, 15, 40), "run", at(1, 15, 30)),
    ("cooldown holds a due slot back", {**EVERY_30, "cooldown": "45m"}, state(at(1, 10), runs=1), at(1, 10, 31),
     "wait", at(1, 10, 30)),
    ("cooldown over: the held slot runs", {**EVERY_30, "cooldown": "45m"}, state(at(1, 10), runs=1), at(1, 10, 46),
     "run", at(1, 10, 30)),
    ("cooldown outlasting max_delay: skipped", {**EVERY_30, "cooldown": "45m", "max_delay": "10m"},
     state(at(1, 10), runs=1), at(1, 10, 41), "skip", at(1, 10, 30)),
    ("days: not today, last one handled", {**DAILY, "days": ["mon"]}, state(at(1, 3), runs=1), at(2, 3, 5), "wait",
     at(8, 3)),
    ("days: the allowed day comes round", {**DAILY, "days": ["mon"]}, state(at(1, 3), runs=1), at(8, 3, 0, 10), "run",
     at(8, 3)),
    ("weekdays: Saturday waits for Monday", {**DAILY, "repeat": "weekdays"}, state(at(5, 3), runs=1), at(6, 3, 5),
     "wait", at(8, 3)),
    ("weekdays: Friday runs", {**DAILY, "repeat": "weekdays"}, state(at(4, 3), runs=1), at(5, 3, 1), "run", at(5, 3)),
    ("interval with days: Monday skips the weekend grid", {"every": "6h", "days": ["sat", "sun"]}, state(),
     at(1, 1), "wait", at(6, 0)),
    ("interval with days: Saturday midnight", {"every": "6h", "days": ["sat", "sun"]}, state(), at(6, 0, 0, 1), "run",
     at(6, 0)),
    ("once: first slot runs", {**DAILY, "repeat": "once"}, state(), at(1, 3, 1), "run", at(1, 3)),
    ("once: never again", {**DAILY, "repeat": "once"}, state(at(1, 3), runs=1), at(2, 3, 1), "wait", None),
    ("disabled", {**DAILY, "enabled": False}, state(), at(1, 3, 1), "wait", None),
]


@pytest.mark.parametrize("case,fields,current,now,action,slot", RULES, ids=[row[0] for row in RULES])
def test_rules(case, fields, current, now, action, slot):
    decision = decide(job(**fields), current, now)
    assert (decision.action, decision.slot) == (action, slot), decision.reason


def test_catch_up_reason_says_late_and_skip_reason_says_max_delay():
    late = decide(job(**DAILY), state(at(1, 3), runs=1), at(4, 3, 40))
    assert "catching up" in late.reason and "40m late" in late.reason
    skipped = decide(job(**DAILY), state(at(1, 3), runs=1), at(4, 5))
    assert "2h" in skipped.reason and "max_delay 1h" in skipped.reason


def simulate(the_job: Job, start: datetime, end: datetime, step: timedelta, off: tuple = ()) -> list:
    """Tick from start to end (not while the machine is `off`), applying each decision to the state."""
    current, events, now = JobState(), [], start
    while now <= end:
        if not any(a <= now < b for a, b in off):
            decision = decide(the_job, current, now)
            if decision.action == "run":
                current = after_run_started(current, decision.slot, now)
            elif decision.action == "skip":
                current = after_skip(current, decision.slot)
            if decision.action != "wait":
                events.append((decision.action, decision.slot, now))
        now += step
    return events


def test_three_days_of_ticks_run_once_per_day_at_the_time():
    events = simulate(job(**DAILY), at(1, 0), at(3, 23, 59), timedelta(minutes=1))
    assert events == [("run", at(d, 3), at(d, 3)) for d in (1, 2, 3)]


def test_machine_off_over_two_slots_catches_up_once_then_resumes():
    off = ((at(1, 12), at(3, 3, 30)),)  # off from day 1 noon to day 3 03:30: day 2 and day 3 slots missed
    events = simulate(job(**DAILY), at(1, 0), at(4, 12), timedelta(minutes=5), off)
    assert events == [("run", at(1, 3), at(1, 3)), ("run", at(3, 3), at(3, 3, 30)), ("run", at(4, 3), at(4, 3))]


def test_machine_off_past_max_delay_skips_once_and_records_it():
    off = ((at(1, 12), at(3, 6)),)
    events = simulate(job(**DAILY), at(1, 0), at(4, 12), timedelta(minutes=5), off)
    assert events == [("run", at(1, 3), at(1, 3)), ("skip", at(3, 3), at(3, 6)), ("run", at(4, 3), at(4, 3))]


def test_interval_slots_on_a_grid_from_midnight():
    every = job(every="45m")
    assert latest_slot(every, at(1, 1, 40)) == at(1, 1, 30)
    assert next_slot(every, at(1, 1, 40)) == at(1, 2, 15)
    assert next_slot(job(**DAILY), at(1, 3)) == at(2, 3)


# ---- the jobs file ---------------------------------------------------------------------------------

BAD_FILES = [
    ("jobs:\n  - name: a\n    task: t\n", 2, "exactly one of 'at'"),
    ("jobs:\n  - name: a\n    task: t\n    at: '25:00'\n", 4, "not a time of day"),
    ("jobs:\n  - name: a\n    task: t\n    every: soon\n", 4, "not a duration"),
    ("jobs:\n  - name: a\n    task: t\n    at: '03:00'\n    repeat: hourly\n", 5, "'repeat'"),
    ("jobs:\n  - name: a\n    task: t\n    at: '03:00'\n    days: [mon, funday]\n", 5, "'days'"),
    ("jobs:\n  - name: a\n    task: t\n    at: '03:00'\n    colldown: 5m\n", 5, "unknown key 'colldown'"),
    ("jobs:\n  - name: a\n    at: '03:00'\n", 2, "exactly one of 'task'"),
    ("jobs:\n  - name: a\n    builtin: archive_compress\n    args: {days: 3}\n    at: '03:00'\n", 2, "allowed args"),
    ("jobs:\n  - name: a\n    task: t\n    every: 1h\n  - name: a\n    task: u\n    every: 2h\n", 1, "two jobs are named"),
    ("jobs:\n  - name: a\n    task: t\n    every: 1h\n    repeat: daily\n", 2, "'repeat' applies to 'at' jobs"),
    ("jobs: [\n", 2, "YAML syntax error"),
    ("- name: a\n", 1, "'jobs:' list"),
]


@pytest.mark.parametrize("text,line,needle", BAD_FILES, ids=[row[2] for row in BAD_FILES])
def test_bad_jobs_file_is_one_line_with_file_and_line(tmp_path, text, line, needle):
    path = tmp_path / "jobs.yaml"
    path.write_text(text)
    with pytest.raises(JobsError) as caught:
        load_jobs(path)
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith(f"{path}:{line}: "), message
    assert needle in message


def test_example_jobs_file_loads_and_unquoted_time_is_read_as_a_time(tmp_path):
    jobs = load_jobs(REPO / "configs/examples/jobs.yaml")
    assert [j.builtin for j in jobs][0] == "archive_compress"
    path = tmp_path / "jobs.yaml"
    path.write_text("jobs:\n  - {name: a, task: t, at: 03:30}\n")  # YAML 1.1 reads 03:30 as 210
    assert load_jobs(path)[0].at.strftime("%H:%M") == "03:30"


# ---- the runner: state on disk, builtin, worker task, crash, lock, reload, signal -------------------

@pytest.fixture
def settings(ga_home):
    return load_settings()


@pytest.fixture
def archive_with_old_session(settings, tmp_path):
    MemoryStore(settings.memory_root, create=True)
    history = tmp_path / "history.jsonl"
    history.write_text(json.dumps({"role": "user", "content": "an old session"}) + "\n")
    archive = Archive(settings.memory_root)
    archive.store_session("old-task", history, when=at(1, 9) - timedelta(days=30))
    return archive


def write_jobs(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def fixed(moment: datetime):
    return lambda: moment


def test_builtin_compresses_the_archive_and_a_restart_does_not_repeat(tmp_path, settings, archive_with_old_session):
    jobs = write_jobs(tmp_path / "jobs.yaml", "jobs:\n  - {name: squeeze, builtin: archive_compress, at: '03:00'}\n")
    first = run_schedule(jobs, settings, once=True, now=fixed(at(1, 3, 0, 30)))
    assert [(r["event"], r["status"], r["compressed"]) for r in first.records] == [("ran", "succeeded", 1)]
    assert archive_with_old_session.status()["raw_sessions"] == 0
    state_file = settings.home_dir / "schedule" / "state.json"
    stored = load_state(state_file)["squeeze"]
    assert (stored.state.last_slot, stored.state.runs, stored.last_status, stored.running_pid) == \
        (at(1, 3), 1, "succeeded", None)
    again = run_schedule(jobs, settings, once=True, now=fixed(at(1, 3, 10)))  # a new process, same state file
    assert again.records == []
    next_day = run_schedule(jobs, settings, once=True, now=fixed(at(2, 3, 1)))
    assert [r["event"] for r in next_day.records] == ["ran"]
    assert load_state(state_file)["squeeze"].state.runs == 2
    history = [json.loads(line) for line in (state_file.parent / "history.jsonl").read_text().splitlines()]
    assert [h["slot"] for h in history] == [at(1, 3).isoformat(), at(2, 3).isoformat()]


def test_restart_after_downtime_catches_up_once_then_skips_when_too_late(tmp_path, settings):
    jobs = write_jobs(tmp_path / "jobs.yaml",
                      "jobs:\n  - {name: squeeze, builtin: archive_compress, at: '03:00', max_delay: 2h}\n")
    run_schedule(jobs, settings, once=True, now=fixed(at(1, 3)))
    caught = run_schedule(jobs, settings, once=True, now=fixed(at(4, 4, 30)))
    assert [(r["event"], r["slot"]) for r in caught.records] == [("ran", at(4, 3).isoformat())]
    assert "catching up" in caught.records[0]["why"]
    assert run_schedule(jobs, settings, once=True, now=fixed(at(4, 4, 40))).records == []
    late = run_schedule(jobs, settings, once=True, now=fixed(at(6, 9)))
    assert [r["event"] for r in late.records] == ["skipped"]
    assert "max_delay 2h" in late.records[0]["why"]
    assert run_schedule(jobs, settings, once=True, now=fixed(at(6, 9, 5))).records == []


def test_builtin_without_memory_store_fails_with_the_fix(tmp_path, settings):
    jobs = write_jobs(tmp_path / "jobs.yaml", "jobs:\n  - {name: squeeze, builtin: archive_compress, every: 1h}\n")
    records = run_schedule(jobs, settings, once=True, now=fixed(at(1, 3))).records
    assert records[0]["status"] == "failed" and "ga memory init" in records[0]["reason"]
    assert not (settings.memory_root / "archive").exists()


def test_task_job_runs_a_worker_through_the_cli(tmp_path, ga_home):
    work = tmp_path / "work"
    (work / "inbox").mkdir(parents=True)
    (work / "inbox" / "note.md").write_text("Water the plants on Friday.\n")
    jobs = write_jobs(tmp_path / "jobs.yaml", f"""jobs:
  - name: summarize
    task: "Summarize the note {work / 'inbox' / 'note.md'} in one line"
    at: "08:00"
    workdir: {work}
    model: scripted:configs/examples/scripts/reflect_inbox.yaml
""")
    result = invoke_ga("schedule", str(jobs), "--once", "--json", "--now", "2026-06-01T08:00:05+00:00")
    assert result.exit_code == 0, result.output + result.stderr
    records = [json.loads(line) for line in result.stdout.splitlines()]
    assert [(r["job"], r["event"], r["status"]) for r in records] == [("summarize", "ran", "succeeded")]
    assert "Water the plants" in records[0]["answer"]  # the worker's code_run read the note in the job's workdir
    listed = invoke_ga("schedule", str(jobs), "--list", "--json", "--now", "2026-06-01T08:00:06+00:00")
    row = json.loads(listed.stdout)[0]
    assert (row["runs"], row["last_status"], row["next"]) == (1, "succeeded", "2026-06-02T08:00:00+00:00")


HANGING_SCRIPT = """tasks:
  - match: ".*"
    turns: [{content: "never seen"}]
    faults: [{turn: 0, kind: hang, seconds: 60}]
"""


def test_scheduler_killed_during_a_run_does_not_repeat_it(tmp_path, ga_home):
    script = tmp_path / "hang.yaml"
    script.write_text(HANGING_SCRIPT)
    jobs = write_jobs(tmp_path / "jobs.yaml",
                      f"jobs:\n  - {{name: slow, task: 'wait for it', at: '08:00', model: 'scripted:{script}'}}\n")
    env = ga_env({"GA_HOME": str(ga_home)})
    command = [*GA, "schedule", str(jobs), "--once", "--now", "2026-06-01T08:00:05+00:00"]
    process = subprocess.Popen(command, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    state_file = ga_home / "schedule" / "state.json"
    deadline = time.monotonic() + 60
    while not (state_file.exists() and load_state(state_file).get("slow") and load_state(state_file)["slow"].running_pid):
        assert process.poll() is None and time.monotonic() < deadline, "the run never started"
        time.sleep(0.1)
    process.kill()  # SIGKILL mid-run: no cleanup at all
    process.wait()
    result = invoke_ga("schedule", str(jobs), "--once", "--json", "--now", "2026-06-01T08:00:30+00:00",
                       env={"GA_HOME": str(ga_home)})
    assert result.exit_code == 0, result.output + result.stderr
    records = [json.loads(line) for line in result.stdout.splitlines()]
    assert [(r["job"], r["event"]) for r in records] == [("slow", "interrupted")]
    stored = load_state(state_file)["slow"]
    assert (stored.state.runs, stored.last_status, stored.running_pid) == (1, "interrupted", None)


def test_second_scheduler_on_the_same_home_is_refused(tmp_path, settings):
    jobs = write_jobs(tmp_path / "jobs.yaml", "jobs:\n  - {name: a, builtin: archive_compress, every: 1h}\n")
    with scheduler_lock(settings.home_dir):
        with pytest.raises(ScheduleError, match=f"pid {os.getpid()}"):
            run_schedule(jobs, settings, once=True)


def test_corrupt_state_is_a_one_line_error(tmp_path, ga_home):
    jobs = write_jobs(tmp_path / "jobs.yaml", "jobs:\n  - {name: a, builtin: archive_compress, every: 1h}\n")
    (ga_home / "schedule").mkdir(parents=True)
    (ga_home / "schedule" / "state.json").write_text("{not json")
    result = invoke_ga("schedule", str(jobs), "--once")
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "state.json" in lines[0] and "move it aside" in lines[0]


def test_cli_bad_jobs_file_and_now_without_once(tmp_path):
    jobs = write_jobs(tmp_path / "jobs.yaml", "jobs:\n  - name: a\n    task: t\n    at: '03:00'\n    every: 1h\n")
    result = invoke_ga("schedule", str(jobs), "--once")
    assert result.exit_code == 2 and result.stderr.startswith(f"error: {jobs}:2: job 'a': give exactly one of 'at'")
    result = invoke_ga("schedule", str(REPO / "configs/examples/jobs.yaml"), "--now", "2026-06-01T00:00:00")
    assert result.exit_code == 2 and "--now needs --once or --list" in result.stderr


def test_loop_ticks_with_the_clock_and_reloads_the_file(tmp_path, settings):
    jobs = write_jobs(tmp_path / "jobs.yaml", "jobs:\n  - {name: a, builtin: archive_compress, at: '03:00'}\n")
    minutes = iter(range(10_000))
    clock = lambda: at(1, 2, 58) + timedelta(minutes=next(minutes))  # noqa: E731  (one minute per look)
    summary = run_schedule(jobs, settings, tick=0.001, max_ticks=6, now=clock)
    assert [(r["event"], r["slot"]) for r in summary.records if "slot" in r] == [("ran", at(1, 3).isoformat())]
    stop = threading.Event()
    seen: list[dict] = []

    def save(text: str) -> None:  # as editors do: a reader never sees a half-written file
        (tmp_path / "jobs.tmp").write_text(text)
        os.replace(tmp_path / "jobs.tmp", jobs)

    def edit_then_break() -> None:
        time.sleep(0.3)
        save("jobs:\n  - {name: b, builtin: archive_compress, at: '04:00'}\n")
        while not any(r["event"] == "reloaded" for r in list(seen)):
            time.sleep(0.05)
        save("jobs: [broken\n")
        while not any(r["event"] == "reload_failed" for r in list(seen)):
            time.sleep(0.05)
        stop.set()

    editor = threading.Thread(target=edit_then_break)
    editor.start()
    run_schedule(jobs, settings, tick=0.05, stop=stop, now=fixed(at(1, 3, 30)), on_record=seen.append)
    editor.join()
    events = [r["event"] for r in seen]
    assert events == ["reloaded", "reload_failed"], events
    assert seen[0]["jobs"] == ["b"] and "YAML syntax error" in seen[1]["error"]


def test_sigterm_stops_the_scheduler_cleanly(tmp_path, ga_home):
    at = (datetime.now() + timedelta(hours=12)).strftime("%H:%M")  # never due (nor caught up) while it runs
    jobs = write_jobs(tmp_path / "jobs.yaml", f"jobs:\n  - {{name: a, builtin: archive_compress, at: '{at}'}}\n")
    process = subprocess.Popen([*GA, "--log-level", "info", "schedule", str(jobs), "--tick", "60"], cwd=REPO,
                               env=ga_env({"GA_HOME": str(ga_home)}), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True)
    lock = ga_home / "schedule" / "lock"
    deadline = time.monotonic() + 60
    while not (lock.exists() and lock.read_text().strip() == str(process.pid)):
        assert process.poll() is None and time.monotonic() < deadline, process.stderr.read()
        time.sleep(0.1)
    started = time.monotonic()
    process.send_signal(signal.SIGTERM)
    out, err = process.communicate(timeout=30)
    assert process.returncode == 0, err
    assert time.monotonic() - started < 10  # did not sit out the 60 s tick
    assert "schedule_stopped" in err
