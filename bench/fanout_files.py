"""File calls per task of a `ga fanout`, counted with strace, side by side with a baseline tree.

For each tree (this one, and --baseline REV's, extracted with git archive), two cold `ga fanout FILE --json` runs
of bench/fanout.py's trivial tasks (T model calls each, the scripted model in its own process) under `strace -f
-c`: N1 and N2 tasks at concurrency W. The calls per task are the difference divided by N2 - N1, so Python's
start-up, the imports and the run's own files drop out. Printed per kind (opens, stats, flocks, syncs, the
rest of the calls on names and directories), their sum, and what is left of the memory tier: the pins the run
left and the sessions it archived.

    python bench/fanout_files.py --baseline main                         # N=100 and 400, W=64, T=3
    python bench/fanout_files.py --baseline main --n 200,1000 --w 256
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
from fanout import ModelServer, script, tasks_file  # noqa: E402  (bench/, the script's own folder)
from revision import extract  # noqa: E402

KINDS = {
    "opens": ("open", "openat", "openat2", "creat"),
    "stats": ("stat", "lstat", "fstat", "newfstatat", "statx", "access", "faccessat", "faccessat2", "readlink",
              "readlinkat"),
    "flocks": ("flock",),
    "syncs": ("fsync", "fdatasync", "syncfs"),
    "names": ("unlink", "unlinkat", "rename", "renameat", "renameat2", "link", "linkat", "mkdir", "mkdirat",
              "rmdir", "getdents64", "utimensat", "symlink", "symlinkat"),
}
TRACED = ",".join(name for names in KINDS.values() for name in names)
ROW = re.compile(r"^\s*[\d.]+\s+[\d.]+\s+\d+\s+(\d+)\s+(?:\d+\s+)?(\w+)\s*$")


def counted(tree: Path, spec: Path, env: dict, folder: Path) -> tuple[Counter, dict[str, int]]:
    """The file calls of one cold run of `tree` (all its processes and threads) by kind, and what it left in the
    store (pins, archived sessions)."""
    summary = folder / f"strace-{os.getpid()}-{len(list(folder.iterdir()))}.txt"
    home = Path(env["GA_HOME"])
    before = _archived(home)
    proc = subprocess.run(["strace", "-f", "-c", "-qq", "-o", str(summary), "-e", f"trace={TRACED}",
                           sys.executable, "-m", "cli", "fanout", str(spec), "--json", "--out", str(folder / "runs")],
                          cwd=tree, env={**env, "PYTHONPATH": str(tree)}, capture_output=True, text=True)
    if proc.returncode not in (0, 1) or "status" not in json.loads(proc.stdout or "{}"):  # any outcome: calls count
        raise SystemExit(f"{tree}: ga fanout failed ({proc.returncode}): {(proc.stderr or proc.stdout)[-800:]}")
    calls: Counter = Counter()
    for line in summary.read_text().splitlines():
        found = ROW.match(line)
        if found and found.group(2) != "total":
            kind = next((k for k, names in KINDS.items() if found.group(2) in names), "names")
            calls[kind] += int(found.group(1))
    pins = home / "memory" / "pins"
    left = {"pins": len(os.listdir(pins)) if pins.is_dir() else 0, "archived": _archived(home) - before}
    return calls, left


def _archived(home: Path) -> int:
    raw = home / "memory" / "archive" / "raw"
    return sum(1 for p in raw.rglob("*.jsonl")) if raw.is_dir() else 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", default="100,400", help="N1,N2: the two run sizes whose difference is counted")
    parser.add_argument("--w", type=int, default=64, help="concurrency")
    parser.add_argument("--turns", type=int, default=3)
    parser.add_argument("--latency", type=float, default=0.2)
    parser.add_argument("--baseline", help="a git revision whose tree also runs (git archive)")
    args = parser.parse_args()
    small, large = (int(x) for x in args.n.split(","))
    with tempfile.TemporaryDirectory(prefix="ga-files-") as tmp:
        folder = Path(tmp)
        trees = [("this", ROOT)] + ([(args.baseline, extract(args.baseline, folder / "baseline"))] if args.baseline else [])
        env = {**os.environ, "GA_HOME": str(folder / "home"), "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}
        env.pop("RAY_ADDRESS", None)
        server = ModelServer(script(args.turns, args.latency), folder, env)
        try:
            specs = [tasks_file(folder, server.base_url, n, args.w, args.turns) for n in (small, large)]
            print(f"file calls per task: N={small} and N={large}, W={args.w}, T={args.turns}, L={args.latency:g} "
                  f"(the difference over {large - small} tasks)")
            rows = []
            for label, tree in trees:
                runs = [counted(tree, spec, env, folder) for spec in specs]
                per = {k: (runs[1][0][k] - runs[0][0][k]) / (large - small) for k in KINDS}
                rows.append((label, per, runs[1][1]))
            for label, per, left in rows:
                total = sum(per.values())
                print(f"  {label:>8}: {total:6.1f} file calls/task  " + "  ".join(f"{k} {v:5.1f}" for k, v in per.items())
                      + f"  | after N={large}: {left['pins']} pin(s) left, {left['archived']} session(s) archived",
                      flush=True)
            if len(rows) == 2:
                this, base = sum(rows[0][1].values()), sum(rows[1][1].values())
                print(f"  this tree makes {this / base:.2f}x the baseline's file calls per task" if base else "")
        finally:
            server.close()


if __name__ == "__main__":
    main()
