"""Start-up of the `ga` command: wall time of `ga --help` and `ga <cmd> --help`, this tree against a baseline tree.

Each command runs as a fresh `python -m cli` (what the console script does), alternating the two trees so
that the machine's load hits both alike; the median of --runs is printed with the ratio this/baseline.

    python bench/cli_startup.py                                   # this tree only
    python bench/cli_startup.py --baseline /tmp/ga-before --runs 15
(a baseline tree: `git archive <commit> | tar -x -C /tmp/ga-before`)
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Optional

ROOT = Path(__file__).resolve().parents[1]
COMMANDS = (["--help"], ["fanout", "--help"], ["memory", "--help"], ["explore", "--help"], ["runs", "list", "--help"])


def once(tree: Path, args: list[str], home: str) -> float:
    env = {**os.environ, "PYTHONPATH": str(tree), "GA_HOME": home}
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "cli", *args], cwd=tree, env=env, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - started


def measure(trees: list[Path], runs: int) -> dict[tuple[str, Path], float]:
    medians = {}
    with tempfile.TemporaryDirectory(prefix="ga-bench-home-") as home:
        for args in COMMANDS:
            times: dict[Path, list[float]] = {tree: [] for tree in trees}
            for _ in range(runs):
                for tree in trees:
                    times[tree].append(once(tree, args, home))
            for tree in trees:
                medians[(" ".join(args), tree)] = statistics.median(times[tree])
    return medians


def main(baseline: Optional[Path], runs: int) -> None:
    trees = [ROOT] + ([baseline] if baseline else [])
    load_before = os.getloadavg()
    medians = measure(trees, runs)
    print(f"median of {runs} runs each; load average {load_before[0]:.2f} before, {os.getloadavg()[0]:.2f} after")
    header = f"{'command':<24}{'this tree':>12}" + (f"{'baseline':>12}{'ratio':>8}" if baseline else "")
    print(header)
    for args in COMMANDS:
        name = "ga " + " ".join(args)
        mine = medians[(" ".join(args), ROOT)]
        line = f"{name:<24}{mine:>11.3f}s"
        if baseline:
            base = medians[(" ".join(args), baseline)]
            line += f"{base:>11.3f}s{mine / base:>8.2f}"
        print(line)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", type=Path, help="Another tree to compare with (e.g. before this change)")
    parser.add_argument("--runs", type=int, default=9, help="Runs of each command per tree")
    options = parser.parse_args()
    main(options.baseline.resolve() if options.baseline else None, options.runs)
