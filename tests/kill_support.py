"""kill -9 of a real `ga fanout` process at seeded random moments, then `--resume` to the end; what each kill cost.

Used by tests/orchestrator/test_fanout_kills.py (asserts) and bench/fanout_kills.py (prints the figures). Every task runs a
real code_run (a process that sleeps, found by a marker in its command line), commits one memory file, then answers; a reduce merges them.
"""
from __future__ import annotations

import os
import random
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from tests.fanout_support import first_user_message, ledger, read_jsonl, result_lines

ROOT = Path(__file__).resolve().parents[1]
REDUCE_MARK = "MERGE-ALL-RESULTS"
FINAL = {"succeeded", "failed", "needs_input", "limit"}


def task_id(i: int) -> str:
    return f"k{i:02d}"


def sleeps(n: int, long: float = 3.0, short: float = 0.6) -> list[float]:
    """Every third task's code_run outlasts the 2 s after a kill (an actor left working would ask the model then)."""
    return [long if i % 3 == 0 else short for i in range(n)]


def kill_script(seconds: list[float], marker: str) -> dict[str, Any]:
    """One script entry per task (each writes its own memory file), the reduce first (its prompt holds every id).
    Task i's code_run sleeps seconds[i] in a process whose command line holds `marker` (found from outside any
    sandbox or pid namespace by code_run_pids)."""
    entries: list[dict[str, Any]] = [{"match": REDUCE_MARK, "turns": [  # a tool run backs its answer: succeeded
        {"content": "merging", "tool_calls": [{"name": "code_run", "arguments": {"type": "python", "script": "print(1)"}}]},
        {"content": "merged everything"}]}]
    for i, sleep in enumerate(seconds):
        work = (f"import os, sys\nos.execv(sys.executable, [sys.executable, '-c', "
                f"\"import time; time.sleep({sleep}); print('worked {task_id(i)}')\", '{marker}-{task_id(i)}'])")
        entries.append({"match": f"kill-task-{task_id(i)}\\b", "turns": [
            {"content": "working", "tool_calls": [{"name": "code_run", "arguments": {"type": "python", "script": work}}]},
            {"tool_calls": [{"name": "start_long_term_update", "arguments": {}}]},
            {"tool_calls": [{"name": "file_write", "arguments": {
                "path": f"memory/L2/kill-{task_id(i)}.md", "content": f"# {task_id(i)}\n- verified by code_run\n"}}]},
            {"content": "Result:", "echo_last_tool_result": True}]})
    return {"tasks": entries}


def tasks_file(path: Path, url: str, n: int, concurrency: int) -> Path:
    tasks = "\n".join(f"  - {{id: {task_id(i)}, prompt: \"kill-task-{task_id(i)}: do the work\"}}" for i in range(n))
    path.write_text(f"version: 1\nname: killed\nconcurrency: {concurrency}\nretries: 0\n"
                    f"defaults: {{model: \"scripted@{url}\"}}\n"
                    f"reduce: {{prompt: \"{REDUCE_MARK}: merge the answers\"}}\ntasks:\n{tasks}\n")
    return path


@dataclass
class Kill:
    at: float  # time.time() of the kill
    in_flight: set[str]  # tasks the driver had sent and not recorded as finished
    finished_before: set[str]  # tasks recorded as finished when it died
    children_left: list[int] = field(default_factory=list)  # code_run processes still alive child_wait s after
    late_requests: int = 0  # model requests later than REQUEST_WAIT s after the kill (and before the next start)


@dataclass
class KillRun:
    run_dir: Path
    kills: list[Kill]
    resumed_at: list[float]  # time.time() each later driver started


def start_driver(tasks: Path, runs: Path, address: Optional[str], resume: Optional[str],
                 env: dict[str, str]) -> subprocess.Popen:
    """`ga fanout` on the Ray cluster at `address`, or (None) with the in-process executor."""
    command = [sys.executable, "-m", "cli", "fanout", str(tasks), *(["--address", address] if address else []),
               "--out", str(runs), "--json"]
    if resume:
        command += ["--resume", resume]
    return subprocess.Popen(command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)


def kill_and_resume(tasks: Path, runs: Path, address: Optional[str], log_path: Path, marker: str, *, kills: int, seed: int,
                    delay: tuple[float, float], child_wait: float = 20.0, request_wait: float = 2.0,
                    settle: float = 3.0, env: Optional[dict[str, str]] = None) -> KillRun:
    """Start `ga fanout`, kill -9 it `kills` times (each a seeded random delay after its first task started),
    checking after each kill that no code_run child and no model request outlives it; leaves the run unfinished."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    rng = random.Random(seed)
    run_id: Optional[str] = None
    done: list[Kill] = []
    starts: list[float] = []
    for _ in range(kills):
        began = time.time()
        starts.append(began)
        proc = start_driver(tasks, runs, address, run_id, env)
        run_dir = _wait_for_a_started_task(runs, run_id, began, proc)
        run_id = run_dir.name
        wait = rng.uniform(*delay)
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.02)
        if proc.poll() is not None:
            raise AssertionError(f"the driver ended before its kill: {proc.stderr.read().decode()[-1500:]}")
        proc.send_signal(signal.SIGKILL)
        at = time.time()
        proc.wait()
        proc.stderr.close()
        kill = _state_at_kill(run_dir, at)
        # The sandboxes die with the driver (bubblewrap's --die-with-parent): wait for that, generously, since a
        # loaded machine takes its time; what is still alive after `child_wait` outlived the kill: the scripts
        # (their command line holds the marker) and anything else of the sandboxes (bwrap, the relay of the
        # model gateway), whose command lines name the run directory.
        deadline = time.monotonic() + child_wait
        while (left := code_run_pids(marker) + code_run_pids(str(run_dir))) and time.monotonic() < deadline:
            time.sleep(0.1)
        kill.children_left = left
        time.sleep(max(0.0, settle - (time.time() - at)))
        requests = read_jsonl(log_path)
        kill.late_requests = sum(1 for r in requests if r["time"] > at + request_wait)
        done.append(kill)
    return KillRun(runs / run_id, done, starts[1:])


def _wait_for_a_started_task(runs: Path, run_id: Optional[str], began: float, proc: subprocess.Popen,
                             timeout: float = 120) -> Path:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for path in runs.glob("*/ledger.jsonl") if run_id is None else [runs / run_id / "ledger.jsonl"]:
            if any(e["event"] == "started" and e["time"] >= began - 0.01 for e in read_jsonl(path)):
                return path.parent
        if proc.poll() is not None:
            raise AssertionError(f"the driver ended before starting a task: {proc.stderr.read().decode()[-1500:]}")
        time.sleep(0.02)
    raise AssertionError("no task started in time")


def _state_at_kill(run_dir: Path, at: float) -> Kill:
    """What the killed driver had sent and not recorded (its ledger is fsynced line by line)."""
    events = ledger(run_dir)
    last_start = max(i for i, e in enumerate(events) if e["event"] in ("run_started", "run_resumed"))
    in_flight: set[str] = set()
    for event in events[last_start:]:
        tid = event.get("task_id")
        if not tid or event.get("step") == "reduce":
            continue
        if event["event"] == "started":
            in_flight.add(tid)
        elif event["event"] in FINAL or event["event"] in ("retried", "requeued", "interrupted"):
            in_flight.discard(tid)
    return Kill(at, in_flight, {r["task_id"] for r in result_lines(run_dir)})


def code_run_pids(marker: str) -> list[int]:
    """Live (not zombie) processes whose command line holds `marker`."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if marker.encode() in (entry / "cmdline").read_bytes() and \
                    (entry / "stat").read_text().rsplit(")", 1)[1].split()[0] != "Z":
                found.append(int(entry.name))
        except (OSError, IndexError):
            continue
    return found


def map_requests(log: list[dict[str, Any]]) -> list[tuple[float, str, int]]:
    """(time, task id, turn) of every request a map task made."""
    out = []
    for record in log:
        found = re.search(r"kill-task-(k\d\d)\b", first_user_message(record))
        if found and REDUCE_MARK not in first_user_message(record):
            out.append((record["time"], found.group(1), record.get("turn", 0)))
    return out


def resent_after(kills: list[Kill], log: list[dict[str, Any]]) -> list[set[str]]:
    """For each kill: the tasks whose first request was sent again after it (their work restarted)."""
    requests = map_requests(log)
    out = []
    for index, kill in enumerate(kills):
        until = kills[index + 1].at if index + 1 < len(kills) else float("inf")
        before = {task for when, task, _ in requests if when < kill.at}
        again = {task for when, task, turn in requests if kill.at < when < until and turn == 0}
        out.append(again & before)
    return out


def reduce_requests(log: list[dict[str, Any]]) -> int:
    return sum(1 for record in log if REDUCE_MARK in first_user_message(record))


def resent_requests(kills: list[Kill], log: list[dict[str, Any]]) -> list[int]:
    """For each kill: model requests after it that repeat a (task, turn) already asked before it."""
    requests = map_requests(log)
    out = []
    for index, kill in enumerate(kills):
        until = kills[index + 1].at if index + 1 < len(kills) else float("inf")
        before = {(task, turn) for when, task, turn in requests if when < kill.at}
        out.append(sum(1 for when, task, turn in requests if kill.at < when < until and (task, turn) in before))
    return out
