"""A finished task releases what it held at once: its files, its Worker, its messages.

A real `ga fanout` process runs 2,000 trivial tasks under `ulimit -n 256` against the scripted model over real
HTTP. Before, each finished task kept its history's two descriptors and ~20 KB until its timeout (1,800 s) came
round in the deadline heap: the run hit EMFILE a few hundred tasks in, and `--json` printed no JSON.
"""
from __future__ import annotations

import json
import os
import resource
import subprocess
import threading
import time
import weakref
from pathlib import Path
from typing import Callable

from orchestrator.actor import Deadlines
from tests.fanout_support import start_server
from tests.ga_support import GA, REPO, ga_env

N = 2000
FILE_LIMIT = 256
EARLY, LATE = 400, 1800  # results at which the process's descriptors and memory are compared
CONCURRENCY = 32
FDS_PER_RUNNING = 4  # a running task's history file and folder, its model connection, a file being written
GROWTH_PER_TASK = 3 * 1024  # bytes of RSS a finished task may still cost (its results line, its id: not its Worker)


def _tasks_file(path: Path, url: str) -> Path:
    lines = [f"version: 1\nname: leak\nconcurrency: {CONCURRENCY}\nretries: 0\nmemory: {{commit: false}}",
             f"defaults: {{model: 'scripted@{url}', max_turns: 3, check: {{pattern: done}}}}", "tasks:"]
    lines += [f"  - {{id: t{i:04d}, prompt: 'item {i}'}}" for i in range(N)]
    path.write_text("\n".join(lines) + "\n")
    return path


def _limit_files() -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE, (FILE_LIMIT, FILE_LIMIT))


def _sample(pid: int) -> tuple[int, int]:
    """(open descriptors, resident bytes) of the process."""
    fds = len(os.listdir(f"/proc/{pid}/fd"))
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return fds, int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def _results(runs: Path) -> int:
    found = list(runs.glob("*/results.jsonl"))
    return found[0].read_bytes().count(b"\n") if found else 0


def test_two_thousand_tasks_under_ulimit_256_all_succeed_and_hold_nothing_after_they_finish(tmp_path: Path) -> None:
    server = start_server({"latency": 0, "tasks": [{"match": ".*", "turns": [{"content": "task done"}]}]},
                          tmp_path / "requests.jsonl")
    runs = tmp_path / "runs"
    samples: dict[str, tuple[int, int]] = {}
    try:
        tasks = _tasks_file(tmp_path / "tasks.yaml", server.base_url)
        errors = (tmp_path / "stderr").open("w")  # a file, not a pipe: nobody reads it while the run goes
        proc = subprocess.Popen([*GA, "fanout", str(tasks), "--out", str(runs), "--no-preflight", "--json"], cwd=REPO,
                                env=ga_env(), stdout=subprocess.PIPE, stderr=errors, text=True, preexec_fn=_limit_files)
        deadline = time.monotonic() + 600
        while proc.poll() is None and time.monotonic() < deadline and "late" not in samples:
            done = _results(runs)
            try:
                if done >= EARLY and "early" not in samples:
                    samples["early"] = _sample(proc.pid)
                elif done >= LATE:
                    samples["late"] = _sample(proc.pid)
            except (FileNotFoundError, ProcessLookupError):
                break
            time.sleep(0.02)
        out, _ = proc.communicate(timeout=max(1.0, deadline - time.monotonic()))
    finally:
        server.stop()
    err = (tmp_path / "stderr").read_text()

    assert proc.returncode == 0, err[-3000:]
    data = json.loads(out)
    assert data["status"] == "succeeded" and data["tasks"]["total"] == N and data["tasks"]["succeeded"] == N, out[-2000:]
    assert "early" in samples and "late" in samples, f"the run ended before it could be sampled: {samples}"
    (fds_early, rss_early), (fds_late, rss_late) = samples["early"], samples["late"]
    assert fds_late - fds_early <= FDS_PER_RUNNING * CONCURRENCY, f"descriptors grew from {fds_early} to {fds_late}"
    allowed = (LATE - EARLY) * GROWTH_PER_TASK
    assert rss_late - rss_early <= allowed, \
        f"memory grew {(rss_late - rss_early) >> 10} KB over {LATE - EARLY} finished tasks (allowed {allowed >> 10} KB)"


class _Held:
    """Stands for what a timeout's closure holds (a Worker)."""


def _holding(held: _Held) -> Callable[[], None]:
    return lambda: print(held)


def test_a_cancelled_deadline_lets_go_of_what_its_action_holds_and_the_heap_stays_small() -> None:
    deadlines = Deadlines()
    held = _Held()
    gone = weakref.ref(held)
    first = deadlines.add(1800, _holding(held))
    del held
    deadlines.cancel(first)
    assert gone() is None, "a cancelled deadline still holds its action's closure"
    for _ in range(5000):  # short tasks with a long timeout: the heap must not keep an entry for each
        deadlines.cancel(deadlines.add(1800, lambda: None))
    assert len(deadlines) <= 2 * Deadlines.COMPACT_FROM
    fired = threading.Event()
    deadlines.add(0.01, fired.set)  # one that is not cancelled still runs
    assert fired.wait(30)


def test_a_run_whose_end_cannot_be_noted_still_prints_its_json(tmp_path: Path, ga_home: Path) -> None:
    """The note of a job's end (GA_HOME/activity) is written after the run: when that fails (out of descriptors,
    here a file where its folder goes), the finished run's JSON is printed all the same, with one warning."""
    (ga_home / "activity").mkdir(parents=True)
    (ga_home / "activity" / "ended").write_text("not a folder")
    server = start_server({"latency": 0, "tasks": [{"match": ".*", "turns": [{"content": "task done"}]}]},
                          tmp_path / "requests.jsonl")
    try:
        tasks = tmp_path / "tasks.yaml"
        tasks.write_text(f"version: 1\nname: noted\nmemory: {{commit: false}}\n"
                         f"defaults: {{model: 'scripted@{server.base_url}', check: {{pattern: done}}}}\n"
                         "tasks:\n  - {id: a, prompt: 'one'}\n  - {id: b, prompt: 'two'}\n")
        proc = subprocess.run([*GA, "fanout", str(tasks), "--out", str(tmp_path / "runs"), "--no-preflight", "--json"],
                              cwd=REPO, env=ga_env(), capture_output=True, text=True, timeout=300)
    finally:
        server.stop()
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert json.loads(proc.stdout)["status"] == "succeeded"
    assert "user_job_end_not_recorded" in proc.stderr
