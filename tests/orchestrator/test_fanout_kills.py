"""kill -9 of `ga fanout`: its actors stop, its code_run children and Ray processes go, and a resume pays once.

Everything is real: `ga fanout` subprocesses, the scripted model over HTTP (its request log is the evidence),
Ray on 127.0.0.1, code_run processes, the memory store.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

from configs import load_settings
from memory_shared import MemoryStore
from orchestrator import fanout
from tests.fanout_support import ledger, read_jsonl, result_lines, start_server
from tests.kill_support import (
    FINAL,
    ROOT,
    code_run_pids,
    kill_and_resume,
    kill_script,
    map_requests,
    reduce_requests,
    resent_after,
    sleeps,
    task_id,
    tasks_file,
)


def _commits_by_task(prefix: str = "worker:k") -> Counter:
    store = MemoryStore(load_settings().memory_root)
    return Counter(c.author.split()[0].removeprefix("worker:") for c in store.log() if c.author.startswith(prefix))


def _memory_log_size() -> int:
    return len(MemoryStore(load_settings().memory_root).log())


def test_five_kills_then_resume_send_no_finished_task_again_and_pay_the_reduce_once(tmp_path: Path,
                                                                                     ray_session: dict) -> None:
    n = 24
    marker = f"ga-kill-{tmp_path.name}"
    log_path = tmp_path / "requests.jsonl"
    server = start_server(kill_script(sleeps(n), marker), log_path)
    tasks = tasks_file(tmp_path / "tasks.yaml", server.base_url, n, concurrency=3)
    runs = tmp_path / "runs"
    try:
        report = kill_and_resume(tasks, runs, ray_session["address"], log_path, marker, kills=5, seed=7,
                                 delay=(1.0, 4.0))
        final = fanout(tasks, resume=report.run_dir.name, out=runs, display="quiet")
        requests_then, commits_then = len(read_jsonl(log_path)), _memory_log_size()
        again = fanout(tasks, resume=report.run_dir.name, out=runs, display="quiet")
    finally:
        server.stop()

    for number, kill in enumerate(report.kills, 1):
        assert len(kill.finished_before) < n, f"kill {number} landed after the map ended (raise n)"
        assert kill.children_left == [], f"code_run processes outlived kill {number}: {kill.children_left}"
        assert kill.late_requests == 0, f"{kill.late_requests} model requests later than 2 s after kill {number}"
    assert final.status == "succeeded" and final.reduce.status == "succeeded"
    lines = result_lines(report.run_dir)
    assert sorted(r["task_id"] for r in lines) == [task_id(i) for i in range(n)]  # each exactly once

    log = read_jsonl(log_path)
    recorded = {e["task_id"]: e["time"] for e in ledger(report.run_dir)
                if e["event"] in FINAL and e.get("task_id") and e.get("step") != "reduce"}
    sent_after_finish = [(task, when) for when, task, _ in map_requests(log) if when > recorded[task]]
    assert sent_after_finish == [], "a finished task was sent to the model again"
    for kill, resent in zip(report.kills, resent_after(report.kills, log), strict=True):
        assert resent <= kill.in_flight, f"re-sent {sorted(resent)} but only {sorted(kill.in_flight)} were in flight"
    assert reduce_requests(log) == 2  # the reduce's two turns, once
    assert _commits_by_task() == Counter({task_id(i): 1 for i in range(n)})  # one memory commit per task

    assert again.status == "succeeded" and again.reduce.answer == final.reduce.answer
    assert len(read_jsonl(log_path)) == requests_then, "resuming a finished run called the model"
    assert _memory_log_size() == commits_then, "resuming a finished run committed memory"


def test_kill_right_after_the_reduce_then_resume_neither_calls_the_model_nor_commits(tmp_path: Path,
                                                                                      ray_session: dict) -> None:
    log_path = tmp_path / "requests.jsonl"
    script = kill_script([0.1] * 3, f"ga-kill-{tmp_path.name}")
    script["tasks"][0]["turns"] = [  # the reduce commits memory too
        {"content": "check", "tool_calls": [{"name": "code_run", "arguments": {"type": "python", "script": "print(1)"}}]},
        {"tool_calls": [{"name": "start_long_term_update", "arguments": {}}]},
        {"tool_calls": [{"name": "file_write", "arguments": {"path": "memory/L2/merged.md", "content": "# merged\n"}}]},
        {"content": "merged everything"}]
    server = start_server(script, log_path)
    tasks = tasks_file(tmp_path / "tasks.yaml", server.base_url, 3, concurrency=3)
    runs = tmp_path / "runs"
    try:
        proc = subprocess.Popen([sys.executable, "-m", "cli", "fanout", str(tasks), "--address", ray_session["address"],
                                 "--out", str(runs), "--json"], cwd=ROOT, stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, env={**os.environ, "PYTHONPATH": str(ROOT)})
        deadline = time.monotonic() + 180
        run_dir = None
        while time.monotonic() < deadline:  # the moment the reduce's result is in the ledger
            found = list(runs.glob("*/ledger.jsonl"))
            if found and any(e["event"] == "reduce_result" for e in ledger(found[0].parent)):
                run_dir = found[0].parent
                break
            assert proc.poll() is None, proc.stderr.read().decode()[-2000:]
            time.sleep(0.005)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        assert run_dir is not None
        requests_then, commits_then = len(read_jsonl(log_path)), _memory_log_size()
        resumed = fanout(tasks, resume=run_dir.name, out=runs, display="quiet")
        finished_again = fanout(tasks, resume=run_dir.name, out=runs, display="quiet")
    finally:
        server.stop()
    assert resumed.status == "succeeded" and resumed.reduce.answer == "merged everything"
    assert resumed.reduce.memory_generation is not None and resumed.reduce.reused == ["reduce"]
    assert finished_again.status == "succeeded" and finished_again.reduce.reused == ["reduce"]
    assert len(read_jsonl(log_path)) == requests_then, "a resume called the model again"
    assert _memory_log_size() == commits_then, "a resume committed memory again"
    assert reduce_requests(read_jsonl(log_path)) == 4  # the reduce's four turns, once
    assert (run_dir / "reduce" / "answer.md").read_text() == "merged everything\n"
    authors = [c.author for c in MemoryStore(load_settings().memory_root).log()]
    assert sum(a.startswith("worker:reduce ") for a in authors) == 1


def test_kill_of_a_driver_that_started_its_own_ray_leaves_no_process_behind(tmp_path: Path) -> None:
    marker = f"ga-kill-{tmp_path.name}"
    log_path = tmp_path / "requests.jsonl"
    server = start_server(kill_script([60, 60], marker), log_path)
    tasks = tasks_file(tmp_path / "tasks.yaml", server.base_url, 2, concurrency=2)
    try:
        proc = subprocess.Popen([sys.executable, "-m", "cli", "fanout", str(tasks), "--address", "local",
                                 "--out", str(tmp_path / "runs"), "--json"], cwd=ROOT, stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, env={**os.environ, "PYTHONPATH": str(ROOT)})
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline and len(code_run_pids(marker)) < 2:  # both code_run scripts sleep
            assert proc.poll() is None, proc.stderr.read().decode()[-2000:]
            time.sleep(0.05)
        started = _descendants(proc.pid)
        children = code_run_pids(marker)
        assert len(children) == 2 and any("raylet" in _cmdline(pid) for pid in started)
        proc.send_signal(signal.SIGKILL)
        killed_at, killed_wall = time.monotonic(), time.time()
        proc.wait()
        # Generous: on a loaded machine the reaper and Ray's own clean-up run late. How fast they go is
        # bench/fanout_kills.py's figure; this test asks that everything goes, and that nothing asks the model.
        while time.monotonic() - killed_at < 60:
            alive = {pid for pid, when in started.items() if _start_time(pid) == when}
            left = [pid for pid in children if _start_time(pid) is not None]
            if not alive and not left:
                break
            time.sleep(0.1)
        requests_after_kill = [r for r in read_jsonl(log_path) if r["time"] > killed_wall]
    finally:
        server.stop()
    assert left == [], "a code_run child outlived the killed driver by 60 s"
    assert not alive, f"Ray processes left 60 s after the kill: {[_cmdline(p)[:80] for p in alive]}"
    # both tasks sat in their 60 s scripts when the driver was killed: any later request came from an actor that
    # outlived it and carried on with its killed script's result
    assert requests_after_kill == [], f"the killed driver's actors asked the model again: {requests_after_kill}"


def _descendants(root: int) -> dict[int, int]:
    """pid -> start time of every process below root (read from /proc here, not with the code under test)."""
    parents = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and (stat := _stat(int(entry.name))):
            parents[int(entry.name)] = stat
    found: dict[int, int] = {}
    frontier = [root]
    while frontier:
        parent = frontier.pop()
        for pid, (ppid, when) in parents.items():
            if ppid == parent and pid not in found:
                found[pid] = when
                frontier.append(pid)
    return found


def _stat(pid: int) -> tuple[int, int] | None:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return (int(fields[1]), int(fields[19])) if fields[0] != "Z" else None


def _start_time(pid: int) -> int | None:
    stat = _stat(pid)
    return stat[1] if stat else None


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""
