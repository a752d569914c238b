"""Memory per idle worker in the in-process executor: W workers all waiting on the model at once.

The scripted model (its own process, bench/fanout.py's ModelServer) answers each request after L seconds
(default 5), one call per task, N = W tasks: for L seconds every worker of the run waits on its request.
`ga fanout --executor local` runs in a fresh process whose own VmRSS and thread count are sampled every
50 ms; the figure is the RSS while all W requests are in flight (the server has logged W of them),
minus the same at W=1, over W-1. Histories are a few hundred bytes, so this is the cost of a worker.

    python bench/idle_workers.py                 # W=256 against W=1, L=5
    python bench/idle_workers.py --workers 64 --latency 3
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fanout import ROOT, ModelServer, script, tasks_file  # noqa: E402


def _status(pid: int) -> dict[str, int]:
    found = {}
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            key, _, value = line.partition(":")
            if key in ("VmRSS", "Threads"):
                found[key] = int(value.split()[0])
    except (OSError, ValueError, IndexError):
        pass
    return found


def idle_rss(workers: int, latency: float, server: ModelServer, folder: Path, env: dict) -> dict[str, float]:
    """The ga process's RSS (KB) and threads while all its workers wait, and its peak over the whole run."""
    spec = tasks_file(folder, server.base_url, workers, workers, 1)
    spawned = time.time()
    proc = subprocess.Popen([sys.executable, "-m", "cli", "fanout", str(spec), "--executor", "local", "--json",
                             "--out", str(folder / "runs")], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env, cwd=ROOT)
    samples: list[tuple[float, dict[str, int]]] = []

    def sample() -> None:
        while proc.poll() is None:
            samples.append((time.time(), _status(proc.pid)))
            time.sleep(0.05)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    out, err = proc.communicate()
    sampler.join()
    if json.loads(out or "{}").get("status") not in ("succeeded", "unverified"):  # unverified: one call, no tool ran
        raise SystemExit(f"ga fanout at W={workers} failed ({proc.returncode}): {err[-800:]} {out[-400:]}")
    requests = server.requests_between(spawned, time.time())
    all_waiting = requests[workers - 1] if len(requests) >= workers else None
    if all_waiting is None:
        raise SystemExit(f"the model logged {len(requests)} requests at W={workers}, expected {workers}")
    # the requests are all in flight from the last arrival until the first answer, L seconds after the first one
    waiting = [s for t, s in samples if all_waiting <= t <= requests[0] + latency and "VmRSS" in s]
    if not waiting:
        raise SystemExit(f"no sample while all {workers} requests were in flight (raise --latency)")
    return {"rss": max(s["VmRSS"] for s in waiting), "threads": max(s.get("Threads", 0) for s in waiting),
            "peak": max(s.get("VmRSS", 0) for _, s in samples), "seconds": time.time() - spawned}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=256)
    parser.add_argument("--latency", type=float, default=5.0)
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="ga-bench-idle-"))
    env = {**os.environ, "GA_HOME": str(folder / "home"), "PYTHONPATH": str(ROOT)}
    print(f"machine: {os.cpu_count()} cpus, load average {' '.join(f'{x:.2f}' for x in os.getloadavg())} at start",
          flush=True)
    server = ModelServer(script(1, args.latency), folder, env)
    try:
        one = idle_rss(1, args.latency, server, folder, env)
        many = idle_rss(args.workers, args.latency, server, folder, env)
    finally:
        server.close()
        shutil.rmtree(folder, ignore_errors=True)
    for label, row in (("W=1", one), (f"W={args.workers}", many)):
        print(f"{label:>7}: RSS while all wait {row['rss'] / 1024:6.1f} MB, {row['threads']:4d} threads; "
              f"peak {row['peak'] / 1024:6.1f} MB; {row['seconds']:.1f}s", flush=True)
    per = (many["rss"] - one["rss"]) / (args.workers - 1)
    threads = (many["threads"] - one["threads"]) / (args.workers - 1)
    print(f"per idle worker: {per:.0f} KB of RSS, {threads:.1f} threads (goal: <= 200 KB beyond its history)")
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())} at end", flush=True)


if __name__ == "__main__":
    main()
