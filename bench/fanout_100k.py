"""A hundred thousand tasks in one file: `ga fanout` of this tree against a baseline revision.

One matrix tasks file (a CSV of N items, default 100,000), the scripted model in its own process
(bench/fanout.py's ModelServer, `latency: 0`, one turn a task). For each tree it prints:
  dry run        `ga fanout FILE --dry-run --json` and without --json (the table): wall time, CPU time
                 (user+system) and peak RSS (the process's own, wait4)
  first request  seconds from spawning `ga fanout FILE` to the first request the model server logs, and
                 the CPU the process had used by then (the process is killed -9 then; the run is not finished)
  Ctrl-C         the same run, sent SIGINT --interrupt-after seconds after its first request: seconds from the
                 signal to the process's exit, its exit code, the ledger's skipped lines, the process's peak RSS
On a shared machine the wall times follow the load; the CPU times say what ga itself spent.
  full run       a complete `ga fanout` of --full tasks (default 2,000; the same file's first rows):
                 its wall time, the lines it prints at the end, and the run directory's bytes per task
                 (du -b apparent sizes), with and without the tasks' history.jsonl files

    python bench/fanout_100k.py                        # this tree only
    python bench/fanout_100k.py --baseline main        # main's tree too (its first request takes minutes)
    python bench/fanout_100k.py --tasks 20000 --full 500

Goals (issue 25): dry run <= 3 s and <= 300 MB, first request <= 5 s, output <= 200 lines,
<= 4 KB per finished trivial task besides its history. Issue 33: first request <= 5 s, Ctrl-C <= 3 s, peak memory
<= 300 MB.
"""
from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Optional

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from fanout import ModelServer  # noqa: E402  (bench/, the script's own folder)
from revision import extract  # noqa: E402

SCRIPT = {"latency": 0, "tasks": [{"match": ".*", "turns": [{"content": "task done"}]}]}
FIRST_REQUEST_LIMIT = 600.0


def write_tasks(folder: Path, n: int, url: str, name: str) -> Path:
    items = folder / f"{name}.csv"
    items.write_text("n,topic\n" + "".join(f"{i},topic number {i}\n" for i in range(n)))
    path = folder / f"{name}.yaml"
    path.write_text(f"version: 1\nname: {name}\nconcurrency: 16\nmemory: {{commit: false}}\n"
                    f"defaults: {{model: 'scripted@{url}', max_turns: 3}}\n"
                    f"matrix:\n  template: 'Write one line about {{{{topic}}}}.'\n  from: {items.name}\n"
                    "  id: 'item-{{n}}'\n")
    return path


def dry_run(tree: Path, tasks: Path, env: dict, *extra: str) -> tuple[float, float, float]:
    """(seconds, CPU seconds, peak RSS in MB) of `ga fanout --dry-run EXTRA`."""
    started = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "cli", "fanout", str(tasks), "--dry-run", *extra], cwd=tree,
                            env={**env, "PYTHONPATH": str(tree)}, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - started
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"dry run failed in {tree}: {proc.stderr.read().decode()[-800:]}")
    return seconds, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def first_request(tree: Path, tasks: Path, env: dict, server: ModelServer, out: Path) -> tuple[Optional[float], float]:
    """Seconds from spawn to the model server's first request (None past FIRST_REQUEST_LIMIT), and the CPU
    seconds the process had used when it was seen."""
    spawned = time.time()
    proc = subprocess.Popen([sys.executable, "-m", "cli", "fanout", str(tasks), "--out", str(out), "--no-preflight",
                             "--json"], cwd=tree, env={**env, "PYTHONPATH": str(tree)},
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        while time.time() - spawned < FIRST_REQUEST_LIMIT:
            times = server.requests_between(spawned, time.time() + 1)
            if times:
                return times[0] - spawned, _cpu_seconds(proc.pid)
            if proc.poll() is not None:
                raise SystemExit(f"ga fanout in {tree} exited {proc.returncode} before any request")
            time.sleep(0.05)
        return None, _cpu_seconds(proc.pid)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        shutil.rmtree(out, ignore_errors=True)


def interrupted(tree: Path, tasks: Path, env: dict, server: ModelServer, out: Path,
                after: float) -> tuple[float, int, int, float]:
    """(seconds from SIGINT to exit, exit code, skipped ledger lines, peak RSS in MB) of a run interrupted `after`
    seconds past its first request."""
    spawned = time.time()
    proc = subprocess.Popen([sys.executable, "-m", "cli", "fanout", str(tasks), "--out", str(out), "--no-preflight",
                             "--json"], cwd=tree, env={**env, "PYTHONPATH": str(tree)},
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        while not server.requests_between(spawned, time.time() + 1):
            if proc.poll() is not None or time.time() - spawned > FIRST_REQUEST_LIMIT:
                raise SystemExit(f"ga fanout in {tree}: no request before it ended or {FIRST_REQUEST_LIMIT:.0f} s")
            time.sleep(0.05)
        time.sleep(after)
        signalled = time.perf_counter()
        proc.send_signal(signal.SIGINT)
        _, status, usage = os.wait4(proc.pid, 0)
        seconds = time.perf_counter() - signalled
        ledger = next(out.glob("*/ledger.jsonl"))
        skipped = ledger.read_bytes().count(b'"event": "skipped"')
        return seconds, os.waitstatus_to_exitcode(status), skipped, usage.ru_maxrss / 1024
    finally:
        if proc.returncode is None and proc.poll() is None:
            proc.kill()
            proc.wait()
        shutil.rmtree(out, ignore_errors=True)


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime


def full_run(tree: Path, tasks: Path, env: dict, out: Path) -> tuple[float, int, float, float]:
    """(seconds, lines printed, bytes per task, bytes per task besides history.jsonl) of a complete run."""
    started = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "cli", "fanout", str(tasks), "--out", str(out), "--no-preflight"],
                          cwd=tree, env={**env, "PYTHONPATH": str(tree), "COLUMNS": "100"}, capture_output=True, text=True)
    seconds = time.perf_counter() - started
    if proc.returncode not in (0, 1):  # 1: the tasks end unverified (no tool backs "done")
        raise SystemExit(f"ga fanout in {tree} failed ({proc.returncode}): {proc.stderr[-800:]}")
    run_dir = next(out.iterdir())
    n = len((run_dir / "results.jsonl").read_bytes().splitlines())
    total = _apparent_bytes(run_dir)
    histories = sum(p.stat().st_size for p in [*(run_dir / "tasks").glob("*/history.jsonl"),
                                                *(run_dir / "histories").glob("*.jsonl")])  # packed (RunDir.pack)
    shutil.rmtree(out, ignore_errors=True)
    return seconds, len(proc.stdout.splitlines()), total / n, (total - histories) / n


def _apparent_bytes(path: Path) -> int:
    return int(subprocess.run(["du", "-sb", str(path)], capture_output=True, text=True, check=True).stdout.split()[0])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=100_000, help="tasks in the file (dry run, first request)")
    parser.add_argument("--full", type=int, default=2_000, help="tasks of the complete run (0: none)")
    parser.add_argument("--baseline", help="a git revision whose tree runs the same cases (git archive)")
    parser.add_argument("--interrupt-after", type=float, default=5.0, help="seconds after the first request (Ctrl-C)")
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="ga-bench-100k-"))
    env = {**os.environ, "GA_HOME": str(folder / "home")}
    print(f"machine: {os.cpu_count()} cpus, load average {' '.join(f'{x:.2f}' for x in os.getloadavg())} at start",
          flush=True)
    server = ModelServer(SCRIPT, folder, {**env, "PYTHONPATH": str(ROOT)})
    try:
        trees = [("this tree", ROOT)]
        if args.baseline:
            trees.append((args.baseline, extract(args.baseline, folder / "baseline")))
        big = write_tasks(folder, args.tasks, server.base_url, "big")
        small = write_tasks(folder, args.full, server.base_url, "small") if args.full else None
        dry_run(ROOT, big, env, "--json")  # warms the file cache and .pyc files
        for extra, what in (("--json", "--json"), ("", "table")):
            for label, tree in trees:
                seconds, cpu, mb = dry_run(tree, big, env, *filter(None, [extra]))
                print(f"{label:12} dry run of {args.tasks:,} tasks ({what}): {seconds:6.2f} s wall, {cpu:5.2f} s CPU, "
                      f"peak RSS {mb:5.0f} MB", flush=True)
        for label, tree in trees:
            first, cpu = first_request(tree, big, env, server, folder / "runs-first")
            shown = f"{first:6.2f} s" if first is not None else f"none in {FIRST_REQUEST_LIMIT:.0f} s"
            print(f"{label:12} first model request of {args.tasks:,} tasks: {shown} after spawn, {cpu:5.2f} s CPU by then",
                  flush=True)
        for label, tree in trees:
            seconds, code, skipped, mb = interrupted(tree, big, env, server, folder / "runs-interrupted",
                                                     args.interrupt_after)
            print(f"{label:12} Ctrl-C {args.interrupt_after:g} s after the first request: exit {code} {seconds:6.2f} s "
                  f"after the signal, {skipped:,} skipped lines, peak RSS {mb:5.0f} MB", flush=True)
        for label, tree in trees if small else []:
            seconds, lines, per_task, besides = full_run(tree, small, env, folder / "runs-full")
            print(f"{label:12} full run of {args.full:,} tasks: {seconds:6.1f} s, {lines:,} lines printed, "
                  f"{per_task:,.0f} bytes per task in the run directory ({besides:,.0f} besides history.jsonl)",
                  flush=True)
    finally:
        server.close()
        shutil.rmtree(folder, ignore_errors=True)
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())} at end", flush=True)


if __name__ == "__main__":
    main()
