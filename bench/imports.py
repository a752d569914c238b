"""Import time and memory of what a worker process and `ga fanout` load, this tree against a baseline tree.

Each figure is a fresh `python -c` importing the modules (perf_counter around the imports; modules
listed as preloaded are imported first and not counted, as `ray` is already in a Ray worker when the
actor class arrives), best and median of --repeat runs, alternating the trees, with the process's peak
resident set and which heavy third-party packages ended up loaded. Run as this machine's processes run
(PYTHONDONTWRITEBYTECODE=1 here: ga's own sources are compiled at every start) and, with --pyc, also
with .pyc files cached (PYTHONPYCACHEPREFIX in a temporary folder, filled by one run first).

    python bench/imports.py --baseline 3a72b77     # the tree at that commit (git archive) against this one
    python bench/imports.py                        # this tree only
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from revision import extract  # bench/, the script's own folder

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ["openai", "playwright", "lxml", "rich", "yaml", "pydantic", "structlog", "typer", "httpcore2", "tenacity",
         "ray", "numpy"]

PROBE = """
import json, resource, sys, time
for name in {preload!r}:
    __import__(name)
before = set(sys.modules)
started = time.perf_counter()
for name in {modules!r}:
    __import__(name)
seconds = time.perf_counter() - started
heavy = [h for h in {heavy!r} if h in sys.modules and h not in before]
print(json.dumps({{"seconds": seconds, "maxrss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "heavy": heavy, "modules": len(set(sys.modules) - before)}}))
"""


def entry_module(tree: Path) -> str:
    found = re.search(r'^ga\s*=\s*"([^":]+)', (tree / "pyproject.toml").read_text(), re.M)
    return found.group(1) if found else "cli"


def targets(tree: Path) -> list[tuple[str, list[str], list[str]]]:
    entry = entry_module(tree)
    return [
        ("worker actor's own imports (worker.agent, worker.model.client)", [], ["worker.agent", "worker.model.client"]),
        ("actor process once ray is in (orchestrator.actor + worker)", ["ray"],
         ["orchestrator.actor", "worker.agent", "worker.model.client"]),
        (f"ga entry point ({entry})", [], [entry]),
        ("ga fanout before ray (entry, orchestrator, model client)", [], [entry, "orchestrator", "worker.model.client"]),
    ]


def probe(tree: Path, preload: list[str], modules: list[str], env: dict) -> dict:
    code = PROBE.format(preload=preload, modules=modules, heavy=HEAVY)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tree,
                          env={**env, "PYTHONPATH": str(tree)})
    if proc.returncode != 0:
        raise SystemExit(f"importing {modules} in {tree} failed: {proc.stderr[-1200:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])




def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", help="a git revision to compare with (extracted with git archive)")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--pyc", action="store_true", help="also measure with .pyc files cached")
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="ga-bench-imports-"))
    try:
        trees = [("this tree", ROOT)]
        if args.baseline:
            trees.insert(0, (f"baseline {args.baseline}", extract(args.baseline, folder / f"baseline-{args.baseline}")))
        modes = [("no .pyc" if os.environ.get("PYTHONDONTWRITEBYTECODE") else "as run", dict(os.environ))]
        if args.pyc:
            cached = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
            cached["PYTHONPYCACHEPREFIX"] = str(folder / "pycache")
            modes.append((".pyc cached", cached))
        print(f"machine: {os.cpu_count()} cpus, load average {' '.join(f'{x:.2f}' for x in os.getloadavg())} at start; "
              f"best and median of {args.repeat} fresh processes", flush=True)
        for mode, env in modes:
            for index in range(len(targets(ROOT))):
                best: dict[str, dict] = {}
                for label, tree in trees:
                    name, preload, modules = targets(tree)[index]
                    if mode == ".pyc cached":
                        probe(tree, preload, modules, env)  # fills the cache
                    runs = [probe(tree, preload, modules, env) for _ in range(args.repeat)]
                    seconds = sorted(r["seconds"] for r in runs)
                    best[label] = {"name": name, "best": seconds[0], "median": statistics.median(seconds),
                                   "rss": min(r["maxrss_mb"] for r in runs), "heavy": runs[0]["heavy"],
                                   "modules": runs[0]["modules"]}
                base = next((v for k, v in best.items() if k != "this tree"), None)
                for label, row in best.items():
                    ratio = ""
                    if base is not None and label == "this tree":
                        ratio = f" | {base['best'] / row['best']:.2f}x faster (best), {row['rss'] - base['rss']:+.0f} MB"
                    print(f"[{mode}] {row['name']:60} {label:18} best {row['best'] * 1000:5.0f} ms, median "
                          f"{row['median'] * 1000:5.0f} ms, peak RSS {row['rss']:4.0f} MB, {row['modules']} modules, "
                          f"loads {', '.join(row['heavy']) or '-'}{ratio}", flush=True)
        print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())} at end", flush=True)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
