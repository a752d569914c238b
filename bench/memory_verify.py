"""Benchmark of tamper evidence: full verify, the pin check, and commit latency with manifests against without.

    python bench/memory_verify.py [--sizes 10,1000,10000] [--commits 15] [--rounds 3]

"Without manifests" is the memory_shared of the commit just before manifests were added (found in git
history and extracted to a temp dir), so both run on this machine in the same run. Commit latency is the
median of one-file commits on a store of N files, back to back on one handle (so each commit's base is
the generation the handle just published and trusts for CHECK_TRUST_S; a colder commit adds one "pin
check"), the two versions alternating round by round. Goals (issue 9): manifest overhead <= 10 %, pin
check <= 5 ms at 10,000 files.
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

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from revision import extract  # noqa: E402  (bench/, the script's own folder)

from memory_shared import MemoryStore  # noqa: E402

COMMITS = """
import json, statistics, sys, time
from memory_shared import MemoryStore
root, files, commits = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
store = MemoryStore(root, create=True)
if store.head() == 0:
    with store.transaction("bulk", "bench") as txn:
        for k in range(files):
            txn.write(f"L3/bulk/d{k // 100}/f{k}.md", f"file {k} " + "x" * 150 + "\\n")
times = []
for n in range(commits):
    started = time.perf_counter()
    with store.transaction(f"one {n}", "bench") as txn:
        txn.write("L3/one.md", str(n))
    times.append(time.perf_counter() - started)
print(json.dumps(times))
"""


def baseline_source(workdir: Path) -> Path:
    """memory_shared as it was just before manifests (the parent of the commit that added manifest.py)."""
    added = subprocess.run(["git", "-C", str(REPO), "log", "--diff-filter=A", "--format=%H", "--",
                            "memory_shared/manifest.py"], capture_output=True, text=True, check=True).stdout.split()
    if not added:
        sys.exit("bench: cannot find the commit that added memory_shared/manifest.py in git history")
    return extract(f"{added[-1]}^", workdir / "baseline", "memory_shared")


def commit_times(source: Path, root: Path, files: int, commits: int) -> list[float]:
    env = {**os.environ, "PYTHONPATH": str(source)}
    out = subprocess.run([sys.executable, "-c", COMMITS, str(root), str(files), str(commits)], env=env,
                         capture_output=True, text=True, check=True, cwd=source).stdout
    return json.loads(out)


def median_ms(values: list[float]) -> float:
    values = sorted(values)
    return values[len(values) // 2] * 1000


def timed(action, repeat: int = 5) -> float:
    """Median wall time of `action` in ms."""
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        action()
        times.append(time.perf_counter() - started)
    return median_ms(times)


def checks_at_size(workdir: Path, files: int) -> dict[str, float]:
    root = workdir / f"checks-{files}"
    subprocess.run([sys.executable, "-c", COMMITS, str(root), str(files), "1"], check=True, capture_output=True,
                   env={**os.environ, "PYTHONPATH": str(REPO)})
    store = MemoryStore(root)
    head = store.head()
    return {
        "verify_ms": timed(store.verify, 3),
        "verify_quick_ms": timed(lambda: store.verify(quick=True), 3),
        "pin_check_ms": timed(lambda: store.stat_check(head), 9),
        "snapshot_ms": timed(lambda: fresh_snapshot(store), 9),
    }


def fresh_snapshot(store: MemoryStore) -> None:
    """A pin as a new task takes it: checked (the handle's trust in its earlier checks forgotten)."""
    store.core.forget_checks()
    store.snapshot().release()


def sandbox_startup() -> None:
    """Placeholder for the other half of issue 9's benchmark: `code_run` start-up inside the bubblewrap
    sandbox against without (goal: <= 30 ms added). The sandbox engineer adds the figure here, or it lives
    in the sandbox's own bench script."""
    return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10,1000,10000", help="store sizes (files)")
    parser.add_argument("--commits", type=int, default=15, help="one-file commits timed per round")
    parser.add_argument("--rounds", type=int, default=3, help="rounds alternating the two versions")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",") if s]
    print(f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())} ({os.cpu_count()} cpus)")
    with tempfile.TemporaryDirectory(prefix="ga-bench-verify-") as tmp:
        workdir = Path(tmp)
        baseline = baseline_source(workdir)
        print("\nchecks (median ms)")
        print(f"{'files':>7} {'verify':>10} {'verify --quick':>15} {'pin check':>10} {'checked pin':>12}")
        for files in sizes:
            figures = checks_at_size(workdir, files)
            print(f"{files:>7} {figures['verify_ms']:>10.1f} {figures['verify_quick_ms']:>15.1f} "
                  f"{figures['pin_check_ms']:>10.2f} {figures['snapshot_ms']:>12.2f}")
        print(f"\none-file commit latency (median ms of {args.commits} x {args.rounds} rounds)")
        print(f"{'files':>7} {'without':>10} {'manifests':>10} {'ratio':>7}")
        for files in sizes:
            variants = [("without", baseline, []), ("with", REPO, [])]
            for label, source, _ in variants:  # build both stores first, untimed
                commit_times(source, workdir / f"{label}-{files}", files, 1)
            for round_ in range(args.rounds):
                for label, source, into in variants[::-1] if round_ % 2 else variants:
                    into += commit_times(source, workdir / f"{label}-{files}", files, args.commits)
            before, after = variants[0][2], variants[1][2]
            old, new = median_ms(before), median_ms(after)
            print(f"{files:>7} {old:>10.1f} {new:>10.1f} {new / old:>7.2f}")
        startup = sandbox_startup()
        if startup is not None:
            print(startup)
    print(f"\nload average at end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
