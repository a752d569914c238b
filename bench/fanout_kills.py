"""What kill -9 of `ga fanout` costs: model requests re-sent after each of 5 kills vs the tasks in flight then.

A real `ga fanout` subprocess (attached to a local Ray this script starts) is killed -9 at seeded random
moments, resumed with `--resume` each time, and finished in-process. Each task runs a real code_run (a sleep:
every third task 3 s, the others 0.6 s), commits a memory file and answers; a reduce merges them. The
scripted model's request log is the evidence. Then a driver that started its own Ray is killed once and the
time until every process it started is gone is measured.

    python bench/fanout_kills.py                  # 24 tasks, concurrency 3, 5 kills, seed 7
    python bench/fanout_kills.py --tasks 36 --kills 5 --seed 3
"""
from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.fanout_support import read_jsonl, start_server  # noqa: E402
from tests.kill_support import (  # noqa: E402
    code_run_pids,
    kill_and_resume,
    kill_script,
    reduce_requests,
    resent_after,
    resent_requests,
    sleeps,
    tasks_file,
)


def kills_figures(folder: Path, n: int, concurrency: int, kills: int, seed: int) -> None:
    from configs import load_settings
    from memory_shared import MemoryStore
    from orchestrator import fanout
    from orchestrator.pool import connect

    cluster = connect("local", num_cpus=2)
    marker = f"ga-bench-kill-{os.getpid()}"
    log_path = folder / "requests.jsonl"
    server = start_server(kill_script(sleeps(n), marker), log_path)
    tasks = tasks_file(folder / "tasks.yaml", server.base_url, n, concurrency)
    runs = folder / "runs"
    try:
        report = kill_and_resume(tasks, runs, cluster["address"], log_path, marker, kills=kills, seed=seed,
                                 delay=(1.0, 4.0))
        final = fanout(tasks, resume=report.run_dir.name, out=runs, display="quiet")
        before = len(read_jsonl(log_path)), len(MemoryStore(load_settings().memory_root).log())
        again = fanout(tasks, resume=report.run_dir.name, out=runs, display="quiet")
        after = len(read_jsonl(log_path)), len(MemoryStore(load_settings().memory_root).log())
    finally:
        server.stop()
    log = read_jsonl(log_path)
    tasks_again = resent_after(report.kills, log)
    requests_again = resent_requests(report.kills, log)
    print(f"{n} tasks, concurrency {concurrency}, {kills} kills (seed {seed}); run {final.status}, "
          f"reduce requests {reduce_requests(log)}")
    print(f"{'kill':>4} {'in flight':>9} {'tasks re-sent':>13} {'requests re-sent':>16} {'late requests':>13} "
          f"{'code_run left':>13}")
    for number, (kill, resent, count) in enumerate(zip(report.kills, tasks_again, requests_again, strict=True), 1):
        print(f"{number:>4} {len(kill.in_flight):>9} {len(resent):>13} {count:>16} {kill.late_requests:>13} "
              f"{len(kill.children_left):>13}")
    in_flight = sum(len(k.in_flight) for k in report.kills)
    print(f"total: {sum(len(r) for r in tasks_again)} tasks re-sent ({sum(requests_again)} requests) "
          f"for {in_flight} in flight at the kills")
    print(f"resume of the finished run ({again.status}): {after[0] - before[0]} requests, "
          f"{after[1] - before[1]} memory commits")


def own_ray_figure(folder: Path) -> None:
    marker = f"ga-bench-own-{os.getpid()}"
    server = start_server(kill_script([60, 60], marker), folder / "own.jsonl")
    tasks = tasks_file(folder / "own.yaml", server.base_url, 2, 2)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    try:
        proc = subprocess.Popen([sys.executable, "-m", "cli", "fanout", str(tasks), "--address", "local", "--out",
                                 str(folder / "own-runs"), "--json"], cwd=ROOT, env=env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        while len(code_run_pids(marker)) < 2:
            time.sleep(0.05)
        started = _descendants(proc.pid)
        proc.send_signal(signal.SIGKILL)
        killed = time.monotonic()
        proc.wait()
        children_gone = processes_gone = None
        while time.monotonic() - killed < 120 and processes_gone is None:
            if children_gone is None and not code_run_pids(marker):
                children_gone = time.monotonic() - killed
            if not [pid for pid, when in started.items() if _start_time(pid) == when]:
                processes_gone = time.monotonic() - killed
            time.sleep(0.05)
    finally:
        server.stop()
    print(f"driver with its own Ray killed -9: code_run children gone after {children_gone:.2f}s, "
          f"all {len(started)} processes it started gone after {processes_gone:.2f}s")


def _descendants(root: int) -> dict[int, int]:
    table = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and (stat := _stat(int(entry.name))):
            table[int(entry.name)] = stat
    found: dict[int, int] = {}
    frontier = [root]
    while frontier:
        parent = frontier.pop()
        for pid, (ppid, when) in table.items():
            if ppid == parent and pid not in found:
                found[pid] = when
                frontier.append(pid)
    return found


def _stat(pid: int):
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return (int(fields[1]), int(fields[19])) if fields[0] != "Z" else None


def _start_time(pid: int):
    stat = _stat(pid)
    return stat[1] if stat else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=24)
    parser.add_argument("--concurrency", type=int, default=3)
    parser.add_argument("--kills", type=int, default=5)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="ga-bench-kills-") as folder:
        os.environ["GA_HOME"] = str(Path(folder) / "home")
        print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
        kills_figures(Path(folder), args.tasks, args.concurrency, args.kills, args.seed)
        own_ray_figure(Path(folder))
        print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
