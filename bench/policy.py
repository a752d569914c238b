"""Benchmark: what the task's one policy (worker/policy.py) costs, this tree beside a baseline tree, in one run.

    python bench/policy.py [--baseline /work/main] [-n 200]

In a project directory like a checkout `ga run` works in (a .git, a .venv, 40 folders of 20 files, a runs/
directory of 100 runs), each tree's own code, in its own process, times:
- the policy's build (once per task: the first tool call that asks; the baseline has none);
- code_run's sandbox argv (task_policy and sandbox.wrap: what every code_run pays before bubblewrap starts);
- a file_write and a file_read of a small file through the real tools (each call checks the policy).
Medians of -n rounds, alternating the trees so both see the same machine load.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PROBE = r"""
import json, statistics, sys, time
from pathlib import Path
from configs import load_settings
from worker import sandbox
from worker.tools import REGISTRY, ToolContext
from worker.tools.code import task_policy

rounds, project = int(sys.argv[1]), Path(sys.argv[2])
settings = load_settings({"home": str(project.parent / "ga-home")}, environ={})

def context():
    return ToolContext(task_id="t", workdir=project, settings=settings, memory=None)

def call(ctx, name, **args):
    spec = REGISTRY[name]
    result = spec.run(ctx, spec.args.model_validate(args))
    assert result.ok, result.output

def median_ms(step):
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        step()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)

figures = {}
if hasattr(ToolContext, "policy"):
    figures["policy build (once per task)"] = median_ms(lambda: context().policy)
ctx = context()
figures["code_run's sandbox argv"] = median_ms(
    lambda: sandbox.wrap(["true"], task_policy(ctx, {}), "bwrap", project))
figures["file_write, 1 line"] = median_ms(lambda: call(ctx, "file_write", path="out/notes.txt", content="x\n"))
figures["file_read, 200 lines"] = median_ms(lambda: call(ctx, "file_read", path="data.txt"))
ctx.close()
print(json.dumps(figures))
"""


def make_project(root: Path) -> Path:
    project = root / "project"
    for folder in (project / ".git" / "objects", project / ".venv" / "lib", root / "ga-home"):
        folder.mkdir(parents=True)
    (project / ".venv" / "pyvenv.cfg").write_text("home = /usr/bin\n")
    for i in range(40):
        folder = project / f"package{i}"
        folder.mkdir()
        for j in range(20):
            (folder / f"module{j}.py").write_text("pass\n")
    for i in range(100):
        run = project / "runs" / f"run-{i:03d}"
        (run / "tasks").mkdir(parents=True)
        (run / "ledger.jsonl").write_text("{}\n")
    (project / "data.txt").write_text("".join(f"line {i}\n" for i in range(200)))
    return project


def measure(tree: Path, project: Path, rounds: int) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": str(tree), "HOME": str(project.parent)}
    done = subprocess.run([sys.executable, "-c", PROBE, str(rounds), str(project)], cwd=project, env=env,
                          capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        raise SystemExit(f"{tree}: {done.stderr.strip().splitlines()[-1]}")
    return json.loads(done.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--baseline", type=Path, help="another checkout to compare with (e.g. /work/main)")
    parser.add_argument("-n", type=int, default=200, help="rounds per figure")
    args = parser.parse_args()
    trees = [("this tree", ROOT)] + ([("baseline", args.baseline.resolve())] if args.baseline else [])
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())} ({os.cpu_count()} cores)")
    root = Path(tempfile.mkdtemp(prefix="ga-bench-policy-", dir="/var/tmp"))
    try:
        project = make_project(root)
        results: dict[str, list[dict[str, float]]] = {label: [] for label, _ in trees}
        for _ in range(3):  # alternate the trees; keep each figure's best median
            for label, tree in trees:
                results[label].append(measure(tree, project, args.n))
        best = {label: {k: min(r[k] for r in runs) for k in runs[0]} for label, runs in results.items()}
        names = list(best["this tree"])
        print(f"{'ms (median)':32} " + " ".join(f"{label:>12}" for label, _ in trees)
              + ("   added" if len(trees) > 1 else ""))
        for name in names:
            values = [best[label].get(name) for label, _ in trees]
            shown = " ".join(f"{v:12.3f}" if v is not None else f"{'-':>12}" for v in values)
            mine, other = values[0], values[-1]
            added = f"  {mine - other:+7.3f}" if len(values) > 1 and mine is not None and other is not None else ""
            print(f"{name:32} {shown}{added}")
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
