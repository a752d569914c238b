"""`ga runs show RUN` of a run of 100,000 tasks: time to the first line, wall time, CPU and peak RSS, side by side.

The run is made from a real one: a `ga fanout` of --seed tasks (the scripted model in its own process, 3 calls
a task, no latency), whose spec, ledger and results lines are then repeated with renamed task ids up to --tasks
(the finished tasks' folders are not needed by `runs show` and are not copied). Then, for this tree and
--baseline REV's, `ga runs show RUN` and `ga runs show RUN --json` once each, output to a pipe that is read
as it comes: seconds to the first line, wall seconds, CPU seconds (user+system) and the peak RSS (wait4).

    python bench/runs_show_100k.py --baseline main
    python bench/runs_show_100k.py --tasks 20000
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from fanout import ModelServer, script, tasks_file  # noqa: E402  (bench/, the script's own folder)
from revision import extract  # noqa: E402


def seed_run(folder: Path, env: dict, n: int) -> Path:
    server = ModelServer(script(3, 0.0), folder, env)
    try:
        spec = tasks_file(folder, server.base_url, n, 16, 3)
        runs = folder / "seed-runs"
        proc = subprocess.run([sys.executable, "-m", "cli", "fanout", str(spec), "--json", "--out", str(runs)], cwd=ROOT,
                              env={**env, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True)
    finally:
        server.close()
    if proc.returncode != 0:
        raise SystemExit(f"the seed run failed: {proc.stderr[-800:]}")
    return Path(json.loads(proc.stdout)["run_dir"])


def scaled(seed: Path, target: Path, total: int) -> Path:
    """The seed run's lines repeated with ids `ID-kK` until `total` tasks."""
    target.mkdir(parents=True)
    (target / "tasks").mkdir()
    head, *task_lines = (seed / "spec.jsonl").read_text().splitlines()
    ledger = (seed / "ledger.jsonl").read_text().splitlines()
    results = (seed / "results.jsonl").read_text().splitlines()
    copies = -(-total // len(task_lines))
    ids = re.compile(r'"(t\d+)"')

    def renamed(line: str, k: int) -> str:
        return ids.sub(lambda m: f'"{m.group(1)}-k{k}"', line).replace("/tasks/", f"/tasks/k{k}-") if k else line

    body = [renamed(line, k) for k in range(copies) for line in task_lines][:total]
    fields = {**json.loads(head), "tasks": len(body)}
    (target / "spec.jsonl").write_text("\n".join([json.dumps(fields), *body]) + "\n")
    # the same plan as an older ga wrote it (one JSON document), for a --baseline tree from before spec.jsonl
    older = {**fields, "tasks": "@TASKS@"}
    (target / "spec.yaml").write_text(json.dumps(older).replace('"@TASKS@"', "[\n" + ",\n".join(body) + "\n]") + "\n")
    task_events = [line for line in ledger if '"task_id"' in line]
    run_events = [line for line in ledger if '"task_id"' not in line]
    with (target / "ledger.jsonl").open("w") as out:
        out.write(run_events[0] + "\n")
        for k in range(copies):
            out.writelines(renamed(line, k) + "\n" for line in task_events)
        out.writelines(line + "\n" for line in run_events[1:])
    with (target / "results.jsonl").open("w") as out:
        for k in range(copies):
            out.writelines(renamed(line, k) + "\n" for line in results)
    summary = json.loads((seed / "summary.json").read_text())
    for key in ("total", "succeeded"):
        summary["tasks"][key] = copies * len(results)
    (target / "summary.json").write_text(json.dumps(summary))
    return target


def measured(tree: Path, run: Path, env: dict, *extra: str) -> str:
    started = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "cli", "runs", "show", str(run), *extra], cwd=tree,
                            env={**env, "PYTHONPATH": str(tree), "COLUMNS": "120"}, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    assert proc.stdout is not None
    first = proc.stdout.readline()
    first_at = time.perf_counter() - started
    lines = 1 + sum(1 for _ in proc.stdout) if first else 0
    _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - started
    error = proc.stderr.read().decode()[-300:] if proc.stderr else ""
    if status != 0:
        return f"failed ({status >> 8}): {error}"
    return (f"first line {first_at:5.2f}s  wall {seconds:5.2f}s  CPU {usage.ru_utime + usage.ru_stime:5.2f}s  "
            f"peak RSS {usage.ru_maxrss / 1024:6.0f} MB  {lines} lines")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=200)
    parser.add_argument("--baseline", help="a git revision whose tree also runs (git archive)")
    parser.add_argument("--keep", type=Path, help="build the run here and keep it (reused when it exists)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="ga-show-") as tmp:
        folder = Path(tmp)
        env = {**os.environ, "GA_HOME": str(folder / "home")}
        run = args.keep or folder / "runs" / "20990101-000000-big-0000"
        if not (run / "spec.jsonl").is_file():
            scaled(seed_run(folder, env, args.seed), run, args.tasks)
        trees = [("this", ROOT)] + ([(args.baseline, extract(args.baseline, folder / "baseline"))] if args.baseline else [])
        for extra in ((), ("--json",)):
            for label, tree in trees:
                load = os.getloadavg()[0]
                print(f"runs show{' --json' if extra else '':7} {label:>8}: {measured(tree, run, env, *extra)}  "
                      f"load {load:.1f}", flush=True)


if __name__ == "__main__":
    main()
