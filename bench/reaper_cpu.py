"""CPU the reaper (orchestrator/reaper.py) costs an idle fan-out, this tree beside a baseline revision.

Each tree's driver is a real process that starts its reaper as an executor does (`reaper.ensure()`), then a few
idle children (stand-ins for code_run scripts and Ray's daemons), and idles. The reaper's CPU time (utime +
stime, from /proc) over --seconds is the figure: the old reaper walks all of /proc every 0.3 s, so its cost grows
with the machine's process count, printed too. At the end each driver is killed -9 and the children still alive
a moment later are counted (both must be 0: a reaper that costs nothing because it kills nothing is no win).
The two drivers idle at the same time, so that the machine's load hits both alike. `ensure() ms` is what starting
the reaper costs the driver (the new one waits until the reaper has placed its tree).

    python bench/reaper_cpu.py --baseline integ            # 10 s, 8 children
    python bench/reaper_cpu.py --baseline HEAD~3 --seconds 30 --children 20
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
from typing import Optional

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.revision import extract  # noqa: E402

TICK = os.sysconf("SC_CLK_TCK")
DRIVER = """
import os, subprocess, sys, time
sys.path.insert(0, sys.argv[1])
from orchestrator import reaper
started = time.perf_counter()
reaper.ensure()
spent = time.perf_counter() - started
children = [subprocess.Popen(["sleep", "600"], start_new_session=True) for _ in range(int(sys.argv[2]))]
print(spent, reaper._THIS_PROCESS[0].pid, *[c.pid for c in children], flush=True)
time.sleep(3600)
"""


def cpu_seconds(pid: int) -> Optional[float]:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rfind(")") + 2:].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def start_driver(tree: Path, children: int) -> tuple[subprocess.Popen, int, list[int], float]:
    proc = subprocess.Popen([sys.executable, "-c", DRIVER, str(tree), str(children)], stdout=subprocess.PIPE,
                            text=True, cwd=tree)
    assert proc.stdout is not None
    spent, *pids = proc.stdout.readline().split()
    return proc, int(pids[0]), [int(p) for p in pids[1:]], float(spent)


def main(baseline: Optional[str], seconds: float, children: int) -> None:
    with tempfile.TemporaryDirectory(prefix="ga-reaper-bench-") as tmp:
        trees = {"this tree": ROOT}
        if baseline:
            trees[f"baseline {baseline}"] = extract(baseline, Path(tmp) / "baseline")
        drivers = {name: start_driver(tree, children) for name, tree in trees.items()}  # one after the other
        time.sleep(1.0)  # past the start-up
        before = {name: cpu_seconds(reaper) for name, (_, reaper, _, _) in drivers.items()}
        time.sleep(seconds)
        after = {name: cpu_seconds(reaper) for name, (_, reaper, _, _) in drivers.items()}
        processes = sum(1 for entry in os.scandir("/proc") if entry.name.isdigit())
        left = {}
        for proc, _, _, _ in drivers.values():
            proc.send_signal(signal.SIGKILL)
            proc.wait()
        time.sleep(2.0)
        for name, (_, _, kids, _) in drivers.items():
            left[name] = sum(1 for pid in kids if cpu_seconds(pid) is not None and _not_zombie(pid))
            for pid in kids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
    print(f"idle driver with {children} children for {seconds:g} s; {processes} processes on this machine")
    print(f"{'':<24}{'ensure() ms':>12}{'reaper CPU ms':>14}{'ms per s':>10}{'left after kill -9':>20}")
    for name in drivers:
        spent = (after[name] or 0.0) - (before[name] or 0.0)
        start = drivers[name][3] * 1000
        print(f"{name:<24}{start:>12.0f}{spent * 1000:>14.0f}{spent * 1000 / seconds:>10.2f}{left[name]:>20}")
    if baseline:
        this, base = ((after[n] or 0.0) - (before[n] or 0.0) for n in drivers)
        print(f"ratio this/baseline: {this / base:.3f}" if base else "ratio this/baseline: baseline spent 0 ticks")


def _not_zombie(pid: int) -> bool:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return text[text.rfind(")") + 2:].split()[0] != "Z"


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="CPU the reaper costs an idle fan-out, beside a baseline")
    parser.add_argument("--baseline", help="a revision to compare with (git rev), e.g. integ")
    parser.add_argument("--seconds", type=float, default=10.0, help="how long the drivers idle")
    parser.add_argument("--children", type=int, default=8, help="idle children each driver starts")
    args = parser.parse_args()
    main(args.baseline, args.seconds, args.children)
