"""Durability points of a `ga fanout`: fsync, fdatasync and syncfs calls counted with strace, side by side.

For each case N,W (3 model calls a task, latency L) and each tree (this one, and --baseline REV's), one cold
`ga fanout FILE --json` under `strace -f -c`, with the scripted model in its own process (bench/fanout.py's
ModelServer). It prints the calls of each kind, their sum, the sum per task, the wall time and the load.

    python bench/fanout_syncs.py --baseline main                      # N=200 W=64 and N=1,000 W=256
    python bench/fanout_syncs.py --case 200,64 --latency 0.2
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

CALLS = ("fsync", "fdatasync", "syncfs")


def counted(tree: Path, spec: Path, env: dict, folder: Path) -> tuple[dict[str, int], float]:
    """The durability calls of one cold run of `tree` (all its processes) and its wall time."""
    summary = folder / f"strace-{time.monotonic_ns()}.txt"
    started = time.perf_counter()
    proc = subprocess.run(["strace", "-f", "-c", "-o", str(summary), "-e", f"trace={','.join(CALLS)}",
                           sys.executable, "-m", "cli", "fanout", str(spec), "--json"],
                          cwd=tree, env={**env, "PYTHONPATH": str(tree)}, capture_output=True, text=True)
    seconds = time.perf_counter() - started
    if proc.returncode != 0 or json.loads(proc.stdout or "{}").get("status") != "succeeded":
        raise SystemExit(f"{tree}: ga fanout failed ({proc.returncode}): {proc.stderr[-800:]}")
    counts = dict.fromkeys(CALLS, 0)
    for line in summary.read_text().splitlines():
        fields = line.split()
        if fields and fields[-1] in counts:
            counts[fields[-1]] = int(fields[3] if re.fullmatch(r"\d+", fields[3]) else fields[2])
    return counts, seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", action="append", help="N,W (repeatable; default 200,64 and 1000,256)")
    parser.add_argument("--latency", type=float, default=0.5)
    parser.add_argument("--baseline", help="a git revision whose tree also runs (git archive)")
    args = parser.parse_args()
    cases = [tuple(int(x) for x in c.split(",")) for c in args.case] if args.case else [(200, 64), (1000, 256)]
    with tempfile.TemporaryDirectory(prefix="ga-syncs-") as tmp:
        folder = Path(tmp)
        trees = [("this", ROOT)] + ([(args.baseline, extract(args.baseline, folder / "baseline"))] if args.baseline else [])
        env = {**os.environ, "GA_HOME": str(folder / "home"), "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}
        env.pop("RAY_ADDRESS", None)
        server = ModelServer(script(3, args.latency), folder, env)
        try:
            for n, w in cases:
                spec = tasks_file(folder, server.base_url, n, w, 3)
                for label, tree in trees:
                    load = os.getloadavg()[0]
                    counts, seconds = counted(tree, spec, env, folder)
                    total = sum(counts.values())
                    print(f"N={n} W={w} {label:>8}: " + " ".join(f"{k} {v}" for k, v in counts.items())
                          + f"  total {total} ({total / n:.2f}/task)  {seconds:.1f}s  load {load:.1f}", flush=True)
        finally:
            server.close()


if __name__ == "__main__":
    main()
