"""`ga fanout --dry-run` of 10,000 tasks: wall time of the real command, this tree against a baseline tree.

Two shapes, each 10,000 tasks: a matrix read from a CSV with a model from ./models.yaml (prices come
from the models files), and an explicit `tasks:` list with a scripted:FILE model (prices come from
the script). Goal: under 2 s each. The baseline (default /work/main, the tree before the fix) resolved
the model's prices once per task.

    python bench/spec_dry_run.py                        # this tree only
    python bench/spec_dry_run.py --baseline /work/main  # both, side by side (the baseline takes minutes)
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TASKS = 10_000
GOAL_SECONDS = 2.0
SCRIPT = ROOT / "configs" / "examples" / "scripts" / "hello.yaml"


def write_cases(folder: Path) -> dict[str, Path]:
    user = folder / "user-home" / ".config" / "ga"  # the user's models.yaml (a project one may not add models)
    user.mkdir(parents=True)
    (user / "models.yaml").write_text("models:\n  bench-model:\n    base_url: http://127.0.0.1:9/v1\n    model: fake\n"
                                        "    price_input: 1.0\n    price_output: 3.0\n")
    (folder / "items.csv").write_text("n,topic\n" + "".join(f"{i},topic number {i}\n" for i in range(TASKS)))
    matrix = folder / "matrix.yaml"
    matrix.write_text("version: 1\ndefaults: {model: bench-model, max_turns: 5}\nmatrix:\n"
                      "  template: 'Write one line about {{topic}}.'\n  from: items.csv\n  id: 'item-{{n}}'\n"
                      "reduce: {prompt: merge}\n")
    explicit = folder / "explicit.yaml"
    explicit.write_text(f"version: 1\ndefaults: {{model: 'scripted:{SCRIPT}', max_turns: 5}}\ntasks:\n"
                        + "".join(f"  - {{id: t{i}, prompt: 'Write one line about topic {i}.'}}\n" for i in range(TASKS)))
    return {"matrix from CSV, models.yaml model": matrix, "tasks list, scripted:FILE model": explicit}


def time_dry_run(tree: Path, tasks: Path, home: Path) -> tuple[float, int]:
    env = {**os.environ, "PYTHONPATH": str(tree), "GA_HOME": str(home), "HOME": str(tasks.parent / "user-home")}
    started = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "cli", "fanout", str(tasks), "--dry-run", "--json"], cwd=tasks.parent,
                          env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - started
    if proc.returncode != 0:
        raise SystemExit(f"dry run failed in {tree}: {proc.stderr[-500:]}")
    return seconds, sum(1 for row in json.loads(proc.stdout)["tasks"] if row["id"] != "(reduce)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", type=Path, help="another checkout to compare with (e.g. /work/main)")
    args = parser.parse_args()
    trees = [("this tree", ROOT)] + ([("baseline", args.baseline.resolve())] if args.baseline else [])
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())} ({os.cpu_count()} cores)")
    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        cases = write_cases(folder)
        print(f"{'case':40} " + " ".join(f"{label:>12}" for label, _ in trees) + ("   ratio" if len(trees) > 1 else ""))
        for case, tasks in cases.items():
            time_dry_run(ROOT, tasks, folder / "home")  # warm the file cache and .pyc files
            figures = []
            for _, tree in trees:
                seconds, rows = time_dry_run(tree, tasks, folder / "home")
                figures.append(seconds)
            ratio = f"  {figures[1] / figures[0]:5.1f}x" if len(figures) > 1 else ""
            goal = "meets" if figures[0] < GOAL_SECONDS else "misses"
            print(f"{case:40} " + " ".join(f"{s:11.2f}s" for s in figures) + ratio
                  + f"   ({rows:,} tasks; {goal} the {GOAL_SECONDS:.0f} s goal)")
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
