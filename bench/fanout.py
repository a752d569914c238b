"""Fan-out wall time against the ideal, cold and warm, next to plain `ga run` subprocesses.

With the scripted model (`ga fake-llm`, its own process) at latency L per call, T turns per task, N tasks and W workers, the ideal
wall time is ceil(N/W)·T·L. For each case this prints measured/ideal for:
  cold      `ga fanout FILE --address local --json` in a fresh process: Python start, a new local Ray,
            new worker actors, the run, shutdown
  warm-cli  `ga fanout FILE --address ADDR --json` in a fresh process attached to a running cluster
            whose worker pool is already warm
  warm-api  `orchestrator.fanout(...)` in a process already attached (the parent-agent / notebook case)
  ga-run    the same N tasks as `ga run TASK --json` subprocesses, W at a time (the reference's way)
and the peak resident memory (VmHWM) of each worker process.

    python bench/fanout.py                 # N=64 W=16 T=3 L=1.0, then N=16 W=4 T=3 L=0.5
    python bench/fanout.py --case 8,4,2,0.2
"""
from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

DEFAULT_CASES = [(64, 16, 3, 1.0), (16, 4, 3, 0.5)]


def script(turns: int, latency: float) -> dict:
    """T model calls per task: T-1 turns with a cheap tool call (no subprocess), then the answer. The call is a
    file_write, which (unlike a checkpoint) backs the answer, so the tasks end succeeded, not unverified."""
    steps = [{"content": "noting", "tool_calls": [{"name": "file_write",
                                                   "arguments": {"path": "notes.md", "content": f"step {i}\n"}}]}
             for i in range(turns - 1)]
    return {"latency": latency, "tasks": [{"match": ".*", "turns": steps + [{"content": "done"}]}]}


class ModelServer:
    """The scripted model in its own process (`ga fake-llm`), so its CPU is not the driver's: a real
    endpoint costs the machine running ga nothing while it thinks."""

    def __init__(self, script_data: dict, folder: Path, env: dict):
        import yaml

        path = folder / f"script-{time.monotonic_ns()}.yaml"
        path.write_text(yaml.safe_dump(script_data))
        self.proc = subprocess.Popen([sys.executable, "-m", "cli", "fake-llm", "--script", str(path), "--port", "0"],
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env, cwd=ROOT)
        line = self.proc.stdout.readline()  # "scripted model at http://127.0.0.1:PORT/v1: use ..."
        self.base_url = line.split("scripted model at ", 1)[1].split(" ", 1)[0].rstrip(":")

    def __enter__(self) -> "ModelServer":
        return self

    def __exit__(self, *exc: object) -> None:
        self.proc.terminate()
        self.proc.wait(10)


def tasks_file(folder: Path, url: str, n: int, w: int, turns: int) -> Path:
    path = folder / f"bench-{n}-{w}.yaml"
    lines = [f"version: 1\nname: bench\nconcurrency: {w}\nmemory: {{commit: false}}",
             f'defaults: {{model: "scripted@{url}", max_turns: {turns + 2}}}', "tasks:"]
    lines += [f'  - {{id: t{i:03d}, prompt: "bench task {i}"}}' for i in range(n)]
    path.write_text("\n".join(lines) + "\n")
    return path


def timed(command: list[str], env: dict) -> tuple[float, dict]:
    started = time.monotonic()
    proc = subprocess.run(command, capture_output=True, text=True, env=env, cwd=ROOT)
    seconds = time.monotonic() - started
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(command[:4])}... failed ({proc.returncode}): {proc.stderr[-1500:]}")
    try:
        return seconds, json.loads(proc.stdout)
    except json.JSONDecodeError:
        raise SystemExit(f"{' '.join(command[:4])}... printed no JSON: {proc.stdout[-1500:]!r} {proc.stderr[-1500:]!r}") from None


def ga_run_baseline(n: int, w: int, url: str, turns: int, env: dict, folder: Path) -> tuple[float, float]:
    """N `ga run` processes, W at a time; returns (wall seconds, peak RSS MB of one process)."""
    peaks: list[int] = []
    lock = threading.Lock()

    def one(i: int) -> None:
        workdir = folder / f"run-{i}"
        workdir.mkdir(parents=True, exist_ok=True)
        proc = subprocess.Popen([sys.executable, "-m", "cli", "run", f"bench task {i}", "--model", f"scripted@{url}",
                                 "--max-turns", str(turns + 2), "--workdir", str(workdir), "--json"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, cwd=ROOT)
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        with lock:
            peaks.append(usage.ru_maxrss)
        if proc.returncode != 0:
            raise RuntimeError(f"ga run {i} exited {proc.returncode}")

    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=w) as pool:
        list(pool.map(one, range(n)))
    return time.monotonic() - started, max(peaks) / 1024


def peak_mb(pids: set[int]) -> list[float]:
    """VmHWM (peak resident set) of each process, in MB."""
    peaks = []
    for pid in pids:
        try:
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            continue
        peaks.append(int(next(line.split()[1] for line in status.splitlines() if line.startswith("VmHWM:"))) / 1024)
    return peaks


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", action="append", help="N,W,T,L (repeatable)")
    parser.add_argument("--skip-baseline", action="store_true")
    parser.add_argument("--repeat", type=int, default=3, help="warm API runs per case (median and best)")
    args = parser.parse_args()
    cases = [tuple(float(x) if i == 3 else int(x) for i, x in enumerate(c.split(","))) for c in args.case] if args.case \
        else DEFAULT_CASES
    folder = Path(tempfile.mkdtemp(prefix="ga-bench-fanout-"))
    env = {**os.environ, "GA_HOME": str(folder / "home"), "PYTHONPATH": str(ROOT)}
    os.environ["GA_HOME"] = env["GA_HOME"]
    print(f"machine: {os.cpu_count()} cpus, load average {os.getloadavg()[0]:.1f} at start", flush=True)

    import ray

    from orchestrator import fanout
    from orchestrator.pool import connect

    rows = []
    for n, w, turns, latency in cases:
        ideal = math.ceil(n / w) * turns * latency
        with ModelServer(script(turns, latency), folder, env) as server:
            spec = tasks_file(folder, server.base_url, n, w, turns)
            cold, cold_out = timed([sys.executable, "-m", "cli", "fanout", str(spec), "--address", "local", "--json",
                                    "--out", str(folder / "runs")], env)
            assert cold_out["status"] == "succeeded", cold_out
            if not ray.is_initialized():
                connect("local")
            address = ray.get_runtime_context().gcs_address
            fanout(spec, out=folder / "runs", display="quiet")  # fills the warm pool (not measured)
            warm_cli, out = timed([sys.executable, "-m", "cli", "fanout", str(spec), "--address", address, "--json",
                                   "--out", str(folder / "runs")], env)
            assert out["status"] == "succeeded", out
            warm_cli_run = out["seconds"]  # the same process from the run's start (after imports and attach)
            warm_runs = []
            for _ in range(args.repeat):
                started = time.monotonic()
                run = fanout(spec, out=folder / "runs", display="quiet")
                warm_runs.append(time.monotonic() - started)
                assert run.status == "succeeded"
            warm_api = sorted(warm_runs)[len(warm_runs) // 2]
            peaks = peak_mb({r["actor"]["pid"] for r in run.results})  # the processes the warm run used
            if args.skip_baseline:
                base, base_peak = float("nan"), float("nan")
            else:
                base, base_peak = ga_run_baseline(n, w, server.base_url, turns, env, folder / "ga-run")
        rows.append((n, w, turns, latency, ideal, cold, warm_cli, warm_api, base, peaks, base_peak))
        print(f"N={n} W={w} T={turns} L={latency:g}s ideal={ideal:.1f}s | cold {cold:.1f}s ({cold / ideal:.2f}x) | "
              f"warm-cli {warm_cli:.1f}s ({warm_cli / ideal:.2f}x; its run alone {warm_cli_run:.1f}s, "
              f"{warm_cli_run / ideal:.2f}x) | warm-api median of {len(warm_runs)} {warm_api:.1f}s ({warm_api / ideal:.2f}x, "
              f"best {min(warm_runs) / ideal:.2f}x) | "
              f"ga-run subprocesses {base:.1f}s ({base / ideal:.2f}x) | warm-api vs ga-run {base / warm_api:.2f}x faster | "
              f"peak RSS {sum(peaks) / w:.0f} MB per worker ({len(peaks)} processes, {max(peaks):.0f} MB at most each), "
              f"per ga run process {base_peak:.0f} MB", flush=True)
    print(f"load average {os.getloadavg()[0]:.1f} at end", flush=True)
    ray.shutdown()


if __name__ == "__main__":
    main()
