"""The test suite (or part of it) beside a CPU hog on every core: what fails only when the machine is busy.

Starts one `while True: pass` process per core (--hogs to choose), runs pytest with the arguments given after
`--` (default: the whole suite), stops the hogs, and prints pytest's exit status, the wall time, the CPU time of
pytest and the processes it waited for (about what the run takes on an idle machine, less its sleeps) and the
load average seen while it ran. Exit status: pytest's.

    python bench/under_load.py                                   # the whole suite, a hog per core
    python bench/under_load.py -- -m "not proc and not ray and not browser and not slow"
    python bench/under_load.py --hogs 0 -- tests/worker/test_telemetry.py   # the same without the hogs, to compare
"""
from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HOG = "while True: pass"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hogs", type=int, default=os.cpu_count() or 2, help="busy processes (default: one a core)")
    parser.add_argument("pytest_args", nargs="*", help="after --: what to pass to pytest")
    args = parser.parse_args()
    hogs = [subprocess.Popen([sys.executable, "-c", HOG]) for _ in range(args.hogs)]
    loads: list[float] = []
    done = threading.Event()

    def sample() -> None:
        while not done.wait(5):
            loads.append(os.getloadavg()[0])

    threading.Thread(target=sample, daemon=True).start()
    started = time.monotonic()
    try:
        env = {**os.environ, "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}
        tests = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args.pytest_args],
                               cwd=ROOT, env=env)
        used = resource.getrusage(resource.RUSAGE_CHILDREN)  # pytest's: the hogs are not waited for yet
    finally:
        done.set()
        for hog in hogs:
            hog.kill()
            hog.wait()
    seconds = time.monotonic() - started
    spread = f"{min(loads):.1f}-{max(loads):.1f}" if loads else "n/a"
    print(f"under_load: {args.hogs} hog(s), pytest exit {tests.returncode}, wall {seconds:.0f} s, "
          f"cpu {used.ru_utime + used.ru_stime:.0f} s, load (1 min) {spread}", flush=True)
    return tests.returncode


if __name__ == "__main__":
    sys.exit(main())
