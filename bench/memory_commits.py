"""Benchmark of the memory store, the copy-on-write store side by side with the store before it.

    python bench/memory_commits.py [-P 8] [-K 45] [--sizes 10,1000,10000,100000] [--size-commits 10]
                                   [--throughput-files 1000] [--baseline 3a72b77]

The store before copy-on-write (hard-linking the whole tree per commit) is `--baseline`'s memory_shared,
taken with `git archive` into the work directory; each measurement runs in a child process importing one
of the two. Measured: P processes x K commits on a store seeded with --throughput-files files (commits/s,
latency, lost updates, with the reference's naive writes as a third column), then the one-file commit
latency (p50, p95) against the store's size.

Each process cycles through three kinds of commit: a new file of its own (disjoint paths), an
append-style patch of one shared file (every process patches the same unique anchor), and a
read-modify-write increment of one shared counter (retried on CommitConflict). The naive baseline does
what the reference GenericAgent does, on the same workload: read, modify, `open(..., "w")`, no lock.
Lost updates = own files missing + shared lines missing + counter increments missing.
"""
from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
IMPL_ENV = "GA_BENCH_MEMORY_IMPL"  # the folder holding the memory_shared a child process measures
sys.path.insert(0, os.environ.get(IMPL_ENV) or str(REPO))

from revision import extract  # noqa: E402  (bench/, the script's own folder)

from memory_shared import CommitConflict, MemoryStore  # noqa: E402

CTX = mp.get_context("fork")
SHARED, COUNTER = "L2/shared.md", "L2/counter.md"
END = "<!-- end -->\n"


def kind_of(j: int) -> str:
    return ("own", "append", "increment")[j % 3]


def own_path(i: int, j: int) -> str:
    return f"L3/p{i}/n{j}.md"


# ---- workers ----------------------------------------------------------------------------------------


def store_worker(root: str, i: int, commits: int, barrier, results) -> None:
    store = MemoryStore(root)
    latencies, snapshots, conflicts = [], [], 0
    barrier.wait()
    for j in range(commits):
        started = time.perf_counter()
        store.snapshot().release()
        snapshots.append(time.perf_counter() - started)
        started = time.perf_counter()
        while True:
            try:
                with store.transaction(f"p{i} {kind_of(j)} {j}", f"p{i}") as txn:
                    if kind_of(j) == "own":
                        txn.write(own_path(i, j), f"p{i} n{j}\n")
                    elif kind_of(j) == "append":
                        txn.patch(SHARED, END, f"- p{i} n{j}\n{END}")
                    else:
                        txn.write(COUNTER, str(int(txn.read(COUNTER)) + 1))
                break
            except CommitConflict:
                conflicts += 1
        latencies.append(time.perf_counter() - started)
    results.put((latencies, snapshots, conflicts))


def naive_worker(root: str, i: int, commits: int, barrier, results) -> None:
    """The reference's file_write / file_patch: read, change, open(..., "w"), no lock, no retry."""
    base = Path(root)
    latencies, failures = [], 0
    barrier.wait()
    for j in range(commits):
        started = time.perf_counter()
        if kind_of(j) == "own":
            path = base / own_path(i, j)
            path.parent.mkdir(parents=True, exist_ok=True)
            with open(path, "w") as fh:
                fh.write(f"p{i} n{j}\n")
        elif kind_of(j) == "append":
            text = (base / SHARED).read_text()
            if text.count(END) != 1:  # a torn read: the reference's patch reports "old text not found"
                failures += 1
            else:
                with open(base / SHARED, "w") as fh:
                    fh.write(text.replace(END, f"- p{i} n{j}\n{END}"))
        else:
            text = (base / COUNTER).read_text()
            value = int(text) if text.strip().isdigit() else 0
            with open(base / COUNTER, "w") as fh:
                fh.write(str(value + 1))
        latencies.append(time.perf_counter() - started)
    results.put((latencies, [], failures))


def run(worker, root: str, procs: int, commits: int) -> dict:
    results = CTX.Queue()
    barrier = CTX.Barrier(procs + 1)
    workers = [CTX.Process(target=worker, args=(root, i, commits, barrier, results)) for i in range(procs)]
    for proc in workers:
        proc.start()
    barrier.wait()
    started = time.perf_counter()
    outputs = [results.get() for _ in workers]
    wall = time.perf_counter() - started
    for proc in workers:
        proc.join()
    latencies = sorted(x for out in outputs for x in out[0])
    snapshots = sorted(x for out in outputs for x in out[1])
    return {"wall": wall, "rate": len(latencies) / wall, "latencies": latencies, "snapshots": snapshots,
            "conflicts": sum(out[2] for out in outputs)}


def lost_updates(read, procs: int, commits: int) -> int:
    """Count the updates missing from the final state; `read(rel)` returns a file's text or None."""
    shared, counter = read(SHARED) or "", read(COUNTER) or "0"
    lost = 0
    increments = 0
    for i in range(procs):
        for j in range(commits):
            if kind_of(j) == "own":
                lost += read(own_path(i, j)) != f"p{i} n{j}\n"
            elif kind_of(j) == "append":
                lost += shared.count(f"- p{i} n{j}\n") != 1
            else:
                increments += 1
    return lost + max(0, increments - (int(counter) if counter.strip().isdigit() else 0))


# ---- measurements (in a child process, importing one implementation) -------------------------------


def seed(store: MemoryStore, files: int) -> None:
    with store.transaction("bench seed", "bench") as txn:
        txn.write(SHARED, "# shared\n" + END)
        txn.write(COUNTER, "0")
        for k in range(files):
            txn.write(f"L3/bulk/d{k // 100}/f{k}.md", f"file {k}\n")


def measure_throughput(workdir: Path, procs: int, commits: int, files: int) -> dict:
    store = MemoryStore(workdir / "store", create=True)
    seed(store, files)
    result = run(store_worker, str(store.root), procs, commits)
    with store.snapshot() as snap:
        lost = lost_updates(snap.read, procs, commits)
    return {"rate": result["rate"], "p50": pct(result["latencies"], .5), "p99": pct(result["latencies"], .99),
            "lost": lost, "conflicts": result["conflicts"], "wall": result["wall"], "problems": store.verify()}


def measure_size(workdir: Path, files: int, commits: int) -> dict:
    """One-file commit latency on a store of `files` files, and the time of the commit that wrote them."""
    store = MemoryStore(workdir / f"size-{files}", create=True)
    started = time.perf_counter()
    seed(store, files)
    build_s = time.perf_counter() - started
    times = []
    for n in range(commits):
        started = time.perf_counter()
        with store.transaction(f"one {n}", "bench") as txn:
            txn.write("L3/one.md", str(n))
        times.append(time.perf_counter() - started)
    shutil.rmtree(store.root)
    times.sort()
    return {"p50": pct(times, .5), "p95": pct(times, .95), "build_s": build_s}


def pct(values: list[float], q: float) -> float:
    return values[min(len(values) - 1, int(q * len(values)))] * 1000 if values else float("nan")


# ---- the parent: both implementations side by side ---------------------------------------------------


def baseline(ref: str, workdir: Path) -> Path:
    """`ref`'s memory_shared, extracted under workdir (the store before copy-on-write)."""
    return extract(ref, workdir / "baseline", "memory_shared")


def child(impl: Path, workdir: Path, *args: object) -> dict:
    """Run one measurement in a fresh process importing the memory_shared under `impl`."""
    folder = Path(tempfile.mkdtemp(prefix="m-", dir=workdir))
    try:
        out = subprocess.run([sys.executable, __file__, "--measure", *map(str, args), "--dir", str(folder)],
                             env={**os.environ, IMPL_ENV: str(impl)}, capture_output=True, text=True, check=True)
        return json.loads(out.stdout.splitlines()[-1])
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def naive_throughput(workdir: Path, procs: int, commits: int) -> dict:
    root = workdir / "naive"
    (root / "L2").mkdir(parents=True)
    (root / SHARED).write_text("# shared\n" + END)
    (root / COUNTER).write_text("0")
    result = run(naive_worker, str(root), procs, commits)
    result["lost"] = lost_updates(lambda rel: (root / rel).read_text() if (root / rel).is_file() else None,
                                  procs, commits)
    return result


def print_throughput(new: dict, old: dict, naive: dict) -> None:
    rows = [("commits/s", f"{new['rate']:.1f}", f"{old['rate']:.1f}", f"{naive['rate']:.1f}",
             f"{new['rate'] / old['rate']:.2f}x"),
            ("p50 commit latency ms", f"{new['p50']:.1f}", f"{old['p50']:.1f}",
             f"{pct(naive['latencies'], .5):.3f}", f"{new['p50'] / old['p50']:.2f}x"),
            ("p99 commit latency ms", f"{new['p99']:.1f}", f"{old['p99']:.1f}",
             f"{pct(naive['latencies'], .99):.3f}", f"{new['p99'] / old['p99']:.2f}x"),
            ("lost updates", str(new["lost"]), str(old["lost"]), str(naive["lost"]), ""),
            ("conflicts raised (retried)", str(new["conflicts"]), str(old["conflicts"]), "never detected", ""),
            ("verify", "clean" if not new["problems"] else f"{len(new['problems'])} problems",
             "clean" if not old["problems"] else f"{len(old['problems'])} problems", "n/a", "")]
    print(f"\n{'':28}{'new (cow)':>12}{'old (links)':>13}{'naive (open w)':>16}{'new/old':>9}")
    for name, *cells in rows:
        print(f"{name:28}{cells[0]:>12}{cells[1]:>13}{cells[2]:>16}{cells[3]:>9}")


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg()) + f" ({os.cpu_count()} cpus)"


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-P", "--procs", type=int, default=8, help="processes committing at once")
    parser.add_argument("-K", "--commits", type=int, default=45, help="commits per process")
    parser.add_argument("--sizes", default="10,1000,10000,100000", help="store sizes (files) for the latency curve")
    parser.add_argument("--size-commits", type=int, default=10, help="commits timed per store size")
    parser.add_argument("--throughput-files", type=int, default=1000, help="files in the store the P processes share")
    parser.add_argument("--baseline", default="3a72b77", help="git ref of the store before copy-on-write")
    parser.add_argument("--dir", type=Path, default=None, help="work directory (default: a temp dir)")
    parser.add_argument("--measure", nargs="+", help=argparse.SUPPRESS)  # a child: size FILES N | throughput P K F
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    if args.measure:
        kind, *n = args.measure[0], *map(int, args.measure[1:])
        args.dir.mkdir(parents=True, exist_ok=True)
        found = measure_size(args.dir, *n) if kind == "size" else measure_throughput(args.dir, *n)
        print(json.dumps(found))
        return
    workdir = Path(tempfile.mkdtemp(prefix="ga-bench-", dir=args.dir))
    P, K, F = args.procs, args.commits, args.throughput_files
    print(f"load average at start: {load()}")
    try:
        impls = {"new": REPO, "old": baseline(args.baseline, workdir)}
        print(f"memory_commits: P={P} processes x K={K} commits on a store of {F:,} files; kinds in turn: a new "
              "own file, an append-style patch of one shared file, an increment of one shared counter (the "
              f"stores retry on conflict); old = memory_shared of {args.baseline}")
        found = {name: child(path, workdir, "throughput", P, K, F) for name, path in impls.items()}
        print_throughput(found["new"], found["old"], naive_throughput(workdir, P, K))
        print(f"\none-file commit against store size (1 process, {args.size_commits} commits each):")
        print(f"{'files':>8}{'new p50 ms':>12}{'new p95 ms':>12}{'old p50 ms':>12}{'old p95 ms':>12}"
              f"{'old/new p50':>13}{'load (1 min)':>14}")
        for files in [int(s) for s in args.sizes.split(",") if s]:
            new, old = (child(impls[name], workdir, "size", files, args.size_commits) for name in ("new", "old"))
            print(f"{files:>8}{new['p50']:>12.1f}{new['p95']:>12.1f}{old['p50']:>12.1f}{old['p95']:>12.1f}"
                  f"{old['p50'] / new['p50']:>12.1f}x{os.getloadavg()[0]:>14.2f}", flush=True)
        print(f"load average at end: {load()}")
        if found["new"]["lost"] or found["old"]["lost"]:
            sys.exit(f"error: lost updates: new {found['new']['lost']}, old {found['old']['lost']}")
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
