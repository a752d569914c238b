"""Durability points of a `ga fanout`: fsync, fdatasync and syncfs calls counted with strace, side by side.

For each case N,W (3 model calls a task, latency L) and each tree (this one, and --baseline REV's), one cold
`ga fanout FILE --json` under `strace -f -c`, with the scripted model in its own process (bench/fanout.py's
ModelServer). It prints the calls of each kind, their sum, the sum per task, the wall time and the load, then
the calls by the file they flushed (strace -y; a syncfs counts for the file it was called on): the run's
ledger.jsonl and results.jsonl are the map loop's, history.jsonl the workers'.

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
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from fanout import ModelServer, script, tasks_file  # noqa: E402  (bench/, the script's own folder)
from revision import extract  # noqa: E402

CALLS = ("fsync", "fdatasync", "syncfs")
CALL = re.compile(r"\b(fsync|fdatasync|syncfs)\(\d+<([^>]*)>\)")
NAMED = ("ledger.jsonl", "results.jsonl", "history.jsonl")


def counted(tree: Path, spec: Path, env: dict, folder: Path) -> tuple[Counter, Counter, float]:
    """The durability calls of one cold run of `tree` (all its processes), by kind and by file, and its wall time."""
    trace = folder / f"strace-{time.monotonic_ns()}.txt"
    started = time.perf_counter()
    proc = subprocess.run(["strace", "-f", "-y", "-qq", "-o", str(trace), "-e", f"trace={','.join(CALLS)}",
                           sys.executable, "-m", "cli", "fanout", str(spec), "--json"],
                          cwd=tree, env={**env, "PYTHONPATH": str(tree)}, capture_output=True, text=True)
    seconds = time.perf_counter() - started
    if proc.returncode != 0 or json.loads(proc.stdout or "{}").get("status") != "succeeded":
        raise SystemExit(f"{tree}: ga fanout failed ({proc.returncode}): {proc.stderr[-800:]}")
    kinds: Counter = Counter()
    files: Counter = Counter()
    for found in CALL.finditer(trace.read_text()):
        kinds[found.group(1)] += 1
        files[Path(found.group(2)).name] += 1
    return kinds, files, seconds


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
                    kinds, files, seconds = counted(tree, spec, env, folder)
                    total = sum(kinds.values())
                    print(f"N={n} W={w} {label:>8}: " + " ".join(f"{k} {kinds[k]}" for k in CALLS)
                          + f"  total {total} ({total / n:.2f}/task)  {seconds:.1f}s  load {load:.1f}\n"
                          + " " * 18 + "by file: " + " ".join(f"{k} {files[k]}" for k in NAMED) + f"; others {sum(files.values()) - sum(files[k] for k in NAMED)}, most: "
                          + ", ".join(f"{k} {v}" for k, v in files.most_common(8) if k not in NAMED), flush=True)
        finally:
            server.close()


if __name__ == "__main__":
    main()
