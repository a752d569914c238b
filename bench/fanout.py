"""Fan-out wall time and memory, cold and warm, against a thread-per-agent baseline and `ga run` subprocesses.

With the scripted model (its own process) at latency L per call, T calls per task, N tasks and W at a
time, the ideal wall time is ceil(N/W)·T·L. For each case this prints, side by side, wall time,
measured/ideal and the peak memory of the whole process tree (bench/proctree.py: the peak of the summed
VmRSS of the process and all its descendants, Ray's daemons and workers included, sampled every 50 ms;
with the sum of each process's own VmHWM and the peak summed PSS, sampled every 1 s), and the tree's user+system
CPU per model request (the requests the scripted server logged during the row), with the context switches per
request and the most threads the tree had at once, of:
  threads   bench/fanout_threads.py: the GenericAgent reference's conductor style, N agents as threads
            in one process, W at a time, openai SDK over real HTTP (imports included in its time)
  sockets   bench/fanout_sockets.py: the minimal thread client, the same agents on a thread each, HTTP/1.1 by
            hand on blocking sockets
  asyncio   bench/fanout_asyncio.py: the same agents as coroutines on one event loop, HTTP/1.1 by hand on
            asyncio streams: the floor a Python client reaches
  cold      `ga fanout FILE --json` in a fresh process, no cluster running: Python start, imports,
            whatever the executor starts, the run, shutdown (through bench/fanout_timed.py, which
            timestamps the start-up; the breakdown is printed below the case)
  warm-cli  `ga fanout FILE --address ADDR --json`, a fresh process attached to a Ray this bench
            started, whose worker pool a previous run left warm (the tree: the cluster plus the process)
  warm-api  `orchestrator.fanout(...)` in this process, already attached (the notebook / parent case)
  ga-run    N `ga run TASK --json` subprocesses, W at a time (the tree: all those running at once)
and the quick start, `ga fanout configs/examples/quickstart.yaml`, cold, on its own line.

    python bench/fanout.py                         # N=16 W=4 and N=64 W=16, T=3, L=0.5
    python bench/fanout.py --issue33 --no-warm --no-ga-run --no-quickstart   # issue 33's sizes and goals
    python bench/fanout.py --case 8,4,2,0.2 --no-warm --no-ga-run
    python bench/fanout.py --variant ray= --variant threads="--executor threads"   # per executor
    python bench/fanout.py --baseline main --no-warm --no-ga-run                    # cold: before and after
    python bench/fanout.py --case 1000,256,3,0.5 --baseline main --no-warm --no-ga-run --no-quickstart  # scale
    python bench/fanout.py --case 1000,64,3,0.5 --variant local="--executor local" \
        --variant ray="--executor ray" --no-warm --no-ga-run --no-quickstart      # both executors at scale

Where two cases differ only in T, the CPU per task of each client is split into a fixed part and a part per turn
(CPU per task = fixed + T x per turn). CPU and context switches of a process that ran to its end come from its
rusage (all its threads); the memory and the threads from the sampled tree.

--variant LABEL=ARGS runs the cold cases and the quick start once per variant, ARGS added to
`ga fanout` (default: one variant, no extra arguments); --baseline REV runs them in the tree of a git
revision too (extracted with git archive), next to this tree's.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import resource
import shlex
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # this tree's packages, not an installed copy's
from proctree import TreeSampler  # noqa: E402  (bench/, the script's own folder)
from revision import extract  # noqa: E402

DEFAULT_CASES = [(16, 4, 3, 0.5), (64, 16, 3, 0.5)]
ISSUE_CASES = [(1000, 256, 3, 0.5), (10000, 64, 1, 0.05), (1000, 64, 1, 0.05), (1000, 64, 3, 0.05), (1000, 1000, 3, 0.5)]
GOALS = """issue 33's goals: N=1000 W=256 T=3 L=0.5: <= 1.1x the asyncio client's wall, <= 0.8 ms CPU per request, <= 150 MB;
N=10000 W=64 T=1 L=0.05: <= 2x the (minimal: sockets) thread client's wall; N=1000 W=1000: <= 1.5x the clients;
memory at N=1000 and N=10000 (W=64 T=1): within 1.2x of each other"""
LINGER = 20.0  # seconds to wait for a cold run's processes to go before the next measurement


def script(turns: int, latency: float) -> dict:
    """T model calls per task: T-1 turns with a cheap tool call (a file_write: no subprocess), then the answer. A
    file_write backs no computed answer, so the tasks end unverified; the bench counts succeeded and unverified
    alike as answered (it measures cost, not labels)."""
    steps = [{"content": "noting", "tool_calls": [{"name": "file_write",
                                                   "arguments": {"path": "notes.md", "content": f"step {i}\n"}}]}
             for i in range(turns - 1)]
    return {"latency": latency, "tasks": [{"match": ".*", "turns": steps + [{"content": "task done"}]}]}


SERVE = """
import sys
from worker.scripted import ScriptedServer
server = ScriptedServer(sys.argv[1], port=0, log_path=sys.argv[2], keep=0)
print(server.start(), flush=True)
server.serve_forever()
"""


class ModelServer:
    """The scripted model in its own process, so its CPU is not the driver's; every request is logged with
    its arrival time (the breakdown's "first model request")."""

    def __init__(self, script_data: dict, folder: Path, env: dict):
        import yaml

        stem = folder / f"model-{time.monotonic_ns()}"
        Path(f"{stem}.yaml").write_text(yaml.safe_dump(script_data))
        self.log = Path(f"{stem}.jsonl")
        self.proc = subprocess.Popen([sys.executable, "-c", SERVE, f"{stem}.yaml", str(self.log)], stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, text=True, env=env, cwd=ROOT)
        self.base_url = self.proc.stdout.readline().strip()
        if not self.base_url.startswith("http"):
            raise SystemExit("the scripted model server did not start")

    def requests_between(self, start: float, end: float) -> list[float]:
        times = []
        with open(self.log, encoding="utf-8") as lines:
            for line in lines:
                when = json.loads(line)["time"]
                if start <= when <= end:
                    times.append(when)
        return sorted(times)

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait(10)


def tasks_file(folder: Path, url: str, n: int, w: int, turns: int) -> Path:
    path = folder / f"bench-{n}-{w}.yaml"
    lines = [f"version: 1\nname: bench\nconcurrency: {w}\nmemory: {{commit: false}}",
             f'defaults: {{model: "scripted@{url}", max_turns: {turns + 2}}}', "tasks:"]
    lines += [f'  - {{id: t{i:03d}, prompt: "bench task {i}"}}' for i in range(n)]
    path.write_text("\n".join(lines) + "\n")
    return path


@dataclass
class Row:
    label: str
    seconds: float
    tree: Optional[TreeSampler]
    load: tuple[float, float]
    note: str = ""
    requests: int = 0  # model requests the server logged for this row (0: not counted)
    usage: Optional[tuple[float, int]] = None  # (CPU seconds, context switches) from rusage, when it ran to its end
    tasks: int = 0

    @property
    def cpu_seconds(self) -> float:
        return self.usage[0] if self.usage else (self.tree.cpu_seconds if self.tree else 0.0)

    def cpu(self) -> str:
        """The CPU (user+system), per model request (what the client costs a request), context switches per
        request, and the most threads at once."""
        if not self.tree:
            return ""
        per = f", {self.cpu_seconds * 1000 / self.requests:.2f} ms/request" if self.requests else ""
        switches = f", {self.usage[1] / self.requests:.1f} switches/request" if self.usage and self.requests else ""
        return f" | CPU {self.cpu_seconds:.1f}s{per}{switches}, {self.tree.peak_threads} threads"

    def memory(self) -> str:
        if not self.tree:
            return "-"
        return (f"{self.tree.peak_rss_mb:6.0f} MB  (VmHWM sum {self.tree.hwm_sum_mb:.0f}, PSS {self.tree.peak_pss_mb:.0f}, "
                f"{self.tree.peak_count} procs at most)")


def load1() -> float:
    return os.getloadavg()[0]


def measured(label: str, tree: Optional[TreeSampler], started_load: float, seconds: float, note: str = "") -> Row:
    return Row(label, seconds, tree, (started_load, load1()), note)


def children_usage() -> tuple[float, int]:
    """(CPU seconds, context switches) of this process's children that ended and were waited for."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime, usage.ru_nvcsw + usage.ru_nivcsw


def usage_since(before: tuple[float, int]) -> tuple[float, int]:
    after = children_usage()
    return after[0] - before[0], after[1] - before[1]


def cold_run(command: list[str], env: dict, folder: Path, server: Optional[ModelServer],
             tree: Path = ROOT) -> tuple[Row, str]:
    """One `ga fanout` of `tree` in a fresh process through bench/fanout_timed.py: the row and its start-up breakdown."""
    marks_path = folder / f"marks-{time.monotonic_ns()}.json"
    run_env = {k: v for k, v in env.items() if k not in ("RAY_ADDRESS", "GA_RAY_ADDRESS")}
    run_env.update(GA_BENCH_MARKS=str(marks_path), PYTHONPATH=str(tree))
    load = load1()
    before = children_usage()
    spawned = time.time()
    proc = subprocess.Popen([sys.executable, str(ROOT / "bench" / "fanout_timed.py"), *command], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=run_env, cwd=tree)
    with TreeSampler(lambda: {proc.pid}) as tree:
        out, err = proc.communicate()
        exited = time.time()
        deadline = time.monotonic() + LINGER
        while tree.alive() and time.monotonic() < deadline:
            time.sleep(0.05)
        gone = time.time() if not tree.alive() else None
    if proc.returncode not in (0, 1):  # 1: answers not backed by a tool run (T=1: the task only answers)
        raise SystemExit(f"ga {' '.join(command[:2])} failed ({proc.returncode}): {err[-1500:]}")
    try:
        result = json.loads(out)
    except json.JSONDecodeError:
        raise SystemExit(f"ga {' '.join(command[:2])} printed no JSON: {out[-800:]!r} {err[-800:]!r}") from None
    counts = result.get("tasks") or {}
    answered = counts.get("succeeded", 0) + counts.get("unverified", 0)
    if answered == 0:
        raise SystemExit(f"ga {' '.join(command[:2])}: run {result.get('status')}: {json.dumps(result)[:800]}")
    lost = "" if answered == counts.get("total") else f"FAILED {counts.get('total', 0) - answered:,} tasks; "
    if lost:  # a tree that loses tasks (the descriptor leak of issue 33) is shown, not hidden by an abort
        reasons = sorted({r.get("reason", "")[:120] for r in result.get("results", []) if r["status"] == "failed"})
        lost += f"e.g. {reasons[:2]}; "
    marks = json.loads(marks_path.read_text()) if marks_path.exists() else {}
    ledger = _ledger_times(Path(result["run_dir"]) / "ledger.jsonl")
    requests = server.requests_between(spawned, exited) if server else []
    row = measured("cold", tree, load, exited - spawned, f"{lost}its run alone {result.get('seconds') or 0:.1f}s")
    row.requests, row.tasks = len(requests), result["tasks"]["total"]
    if not tree.alive():  # a Ray it started has ended too: its CPU is in the rusage of waited-for children
        row.usage = usage_since(before)
    return row, breakdown(spawned, exited, gone, marks, ledger, tree, requests)


def _ledger_times(path: Path) -> dict[str, float]:
    found: dict[str, float] = {}
    for line in path.read_text().splitlines():
        record = json.loads(line)
        found.setdefault(record["event"], record["time"])
    return found


def breakdown(spawned: float, exited: float, gone: Optional[float], marks: dict, ledger: dict, tree: TreeSampler,
              requests: list[float]) -> str:
    """The start-up of a cold run, as seconds since the process was spawned, in the order things happened."""
    points: list[tuple[str, Optional[float]]] = [
        ("python up", marks.get("python_up")),
        ("entry point imported", marks.get("cli_imported")),
        ("import ray", marks.get("ray_import_started")), ("ray imported", marks.get("ray_imported")),
        ("ray.init called", marks.get("ray_init_called")), ("ray.init returned", marks.get("ray_init_returned")),
        ("ledger run_started", ledger.get("run_started")), ("first task started", ledger.get("started")),
    ]
    for title, label in (("gcs_server", "gcs_server up"), ("ray::WorkerActor", "actor process")):
        times = tree.seen_times(title)
        if times:
            points.append((f"first {label}", times[0]))
            if len(times) > 1:
                points.append((f"{len(times)}th {label}", times[-1]))
    if requests:
        points += [("first model request", requests[0]), (f"last model request ({len(requests)})", requests[-1])]
    points += [("ledger run_finished", ledger.get("run_finished")), ("command returned", marks.get("command_returned")),
               ("exit handlers done", marks.get("exit_handlers_done")), ("process exited", exited),
               ("tree gone" if gone else f"tree still alive after {LINGER:g}s", gone)]
    shown = sorted((t - spawned, name) for name, t in points if t is not None)
    phases = _phases(spawned, exited, marks, ledger, requests)
    timeline = " | ".join(f"{name} {t:.2f}" for t, name in shown)
    return f"    start-up (s since spawn): {timeline}\n    phases: {phases}"


def _phases(spawned: float, exited: float, marks: dict, ledger: dict, requests: list[float]) -> str:
    """Durations between the marks that exist, each named for what happens in it."""
    t = {"spawn": spawned, "python": marks.get("python_up"), "entry": marks.get("cli_imported"),
         "ray_in": marks.get("ray_init_called"), "ray_out": marks.get("ray_init_returned"),
         "first": requests[0] if requests else None, "last": requests[-1] if requests else None,
         "finished": ledger.get("run_finished"), "returned": marks.get("command_returned"), "exit": exited}
    ray = bool(t["ray_out"])
    spans = [("python start", "spawn", "python"), ("entry-point imports", "python", "entry"),
             ("command up to ray.init (imports, spec, preflight)", "entry", "ray_in"), ("ray.init", "ray_in", "ray_out"),
             ("to the first model request (actors, worker imports)" if ray else
              "to the first model request (command imports, spec, preflight, workers)", "ray_out" if ray else "entry", "first"),
             ("map (first to last request)", "first", "last"), ("last request (its reply, L) to run_finished", "last", "finished"),
             ("to command return", "finished", "returned"),
             ("exit (Ray shuts down in an exit handler)" if ray else "exit", "returned", "exit")]
    parts = [f"{name} {t[b] - t[a]:.2f}s" for name, a, b in spans if t.get(a) and t.get(b)]
    return " · ".join(parts)


def client_baseline(label: str, n: int, w: int, turns: int, url: str, env: dict, folder: Path) -> Row:
    """bench/fanout_LABEL.py (threads or asyncio): the same agents, without ga."""
    load = load1()
    before = children_usage()
    started = time.monotonic()
    proc = subprocess.Popen([sys.executable, str(ROOT / "bench" / f"fanout_{label}.py"), url, str(n), str(w),
                             "--max-turns", str(turns + 2), "--workdir", str(folder / f"{label}-{n}-{w}")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT)
    with TreeSampler(lambda: {proc.pid}) as tree:
        out, err = proc.communicate()
    seconds = time.monotonic() - started
    if proc.returncode != 0:
        raise SystemExit(f"{label} baseline failed: {err[-1500:]}")
    result = json.loads(out)
    if result["answered"] != n:
        raise SystemExit(f"{label} baseline: {result['answered']} of {n} agents answered")
    row = measured(label, tree, load, seconds, f"{result['requests']} requests")
    row.requests, row.tasks, row.usage = result["requests"], n, usage_since(before)
    return row


def ga_run_baseline(n: int, w: int, turns: int, url: str, env: dict, folder: Path) -> Row:
    """N `ga run` processes, W at a time."""
    live: set[int] = set()
    lock = threading.Lock()

    def one(i: int) -> None:
        workdir = folder / f"run-{n}-{i}"
        workdir.mkdir(parents=True, exist_ok=True)
        proc = subprocess.Popen([sys.executable, "-m", "cli", "run", f"bench task {i}", "--model", f"scripted@{url}",
                                 "--max-turns", str(turns + 2), "--workdir", str(workdir), "--json"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, cwd=ROOT)
        with lock:
            live.add(proc.pid)
        proc.wait()
        with lock:
            live.discard(proc.pid)
        if proc.returncode != 0:
            raise RuntimeError(f"ga run {i} exited {proc.returncode}")

    def roots() -> set[int]:
        with lock:
            return set(live)

    load = load1()
    started = time.monotonic()
    with TreeSampler(roots) as tree, ThreadPoolExecutor(max_workers=w) as pool:
        list(pool.map(one, range(n)))
    return measured("ga-run", tree, load, time.monotonic() - started)


def warm_rows(spec: Path, folder: Path, env: dict, repeat: int, exclude: set[int]) -> list[Row]:
    """Attached to the Ray this process started: one unmeasured run fills the pool, then the measured ones."""
    import ray

    from orchestrator import fanout

    address = ray.get_runtime_context().gcs_address
    fanout(spec, out=folder / "runs", display="quiet", address=address)  # fills the warm pool (not measured)
    rows = []
    load = load1()
    started = time.monotonic()
    with TreeSampler(lambda: {os.getpid()}, exclude=lambda: exclude) as tree:
        proc = subprocess.run([sys.executable, "-m", "cli", "fanout", str(spec), "--address", address, "--json",
                               "--out", str(folder / "runs")], capture_output=True, text=True, env=env, cwd=ROOT)
    seconds = time.monotonic() - started
    if proc.returncode != 0:
        raise SystemExit(f"warm ga fanout failed ({proc.returncode}): {proc.stderr[-1500:]}")
    out = json.loads(proc.stdout)
    rows.append(measured("warm-cli", tree, load, seconds, f"its run alone {out['seconds']:.1f}s"))
    times = []
    load = load1()
    with TreeSampler(lambda: {os.getpid()}, exclude=lambda: exclude) as tree:
        for _ in range(repeat):
            started = time.monotonic()
            run = fanout(spec, out=folder / "runs", display="quiet", address=address)
            times.append(time.monotonic() - started)
            if run.status != "succeeded":
                raise SystemExit(f"warm fanout(): run {run.status}")
    note = f"median of {repeat}, best {min(times):.1f}s" if repeat > 1 else ""
    rows.append(measured("warm-api", tree, load, sorted(times)[len(times) // 2], note))
    return rows


def print_row(case: str, row: Row, ideal: Optional[float], baselines: Optional[list[Row]] = None) -> None:
    ratio = f"{row.seconds / ideal:5.2f}x ideal" if ideal else ""
    versus = ""
    for baseline in baselines or []:
        if baseline is not row and row.tree and baseline.tree:
            versus += f" | {row.seconds / baseline.seconds:.2f}x the {baseline.label} client's time, " \
                      f"{row.tree.peak_rss_mb / baseline.tree.peak_rss_mb:.1f}x its memory"
    note = f" ({row.note})" if row.note else ""
    print(f"{case:24} {row.label:9} {row.seconds:6.1f}s {ratio} | {row.memory()}{versus}{row.cpu()} | "
          f"load {row.load[0]:.1f}->{row.load[1]:.1f}{note}", flush=True)




def parse_variants(values: Optional[list[str]]) -> list[tuple[str, list[str]]]:
    if not values:
        return [("", [])]
    variants = []
    for value in values:
        label, _, args = value.partition("=")
        variants.append((label, shlex.split(args)))
    return variants


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", action="append", help="N,W,T,L (repeatable; default 16,4,3,0.5 and 64,16,3,0.5)")
    parser.add_argument("--variant", action="append", help="LABEL=ARGS added to the cold `ga fanout` (repeatable)")
    parser.add_argument("--baseline", help="a git revision whose tree also runs the cold cases (git archive)")
    parser.add_argument("--repeat", type=int, default=1, help="warm API runs per case (median)")
    parser.add_argument("--no-warm", action="store_true")
    parser.add_argument("--no-ga-run", action="store_true")
    parser.add_argument("--no-threads", action="store_true")
    parser.add_argument("--no-asyncio", action="store_true")
    parser.add_argument("--no-sockets", action="store_true")
    parser.add_argument("--issue33", action="store_true", help="issue 33's cases (--case adds to them)")
    parser.add_argument("--no-quickstart", action="store_true")
    args = parser.parse_args()
    cases = [tuple(float(x) if i == 3 else int(x) for i, x in enumerate(c.split(","))) for c in args.case or []]
    cases = (ISSUE_CASES + cases) if args.issue33 else (cases or DEFAULT_CASES)
    variants = parse_variants(args.variant)
    folder = Path(tempfile.mkdtemp(prefix="ga-bench-fanout-"))
    env = {**os.environ, "GA_HOME": str(folder / "home"), "PYTHONPATH": str(ROOT)}
    os.environ["GA_HOME"] = env["GA_HOME"]
    bytecode = "off (PYTHONDONTWRITEBYTECODE: every process compiles ga's sources)" \
        if os.environ.get("PYTHONDONTWRITEBYTECODE") else "on"
    print(f"machine: {os.cpu_count()} cpus, load average {' '.join(f'{x:.2f}' for x in os.getloadavg())} at start; "
          f"python {sys.version.split()[0]}; .pyc caching {bytecode}", flush=True)
    if Path("/tmp/ray/ray_current_cluster").exists():
        print("note: /tmp/ray/ray_current_cluster exists (a `ray start` cluster?): a cold run would attach to it", flush=True)
    if args.issue33:
        print(GOALS, flush=True)
    memory_note = "memory: peak of the tree's summed RSS sampled every 50 ms (VmHWM sum; PSS peak sampled every 1 s)"
    print(memory_note, flush=True)

    servers: dict[tuple, ModelServer] = {}
    try:
        trees = [("", ROOT)]
        if args.baseline:
            trees.insert(0, (f"@{args.baseline}", extract(args.baseline, folder / f"baseline-{args.baseline}")))
        kinds = cold_kinds(variants, trees)
        if not args.no_quickstart:
            quickstart(kinds, folder, env)
        run_cases(args, cases, kinds, folder, env, servers)
    finally:
        for server in servers.values():
            server.close()
        shutil.rmtree(folder, ignore_errors=True)
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())} at end", flush=True)


def cold_kinds(variants: list, trees: list) -> list[tuple[str, Path, list[str]]]:
    """(label, tree, extra ga fanout arguments) of every cold run a case makes: each variant, in each tree."""
    return [(" ".join(filter(None, [variant, tree_label])), tree, extra)
            for tree_label, tree in trees for variant, extra in variants]


def quickstart(kinds: list, folder: Path, env: dict) -> None:
    """`ga fanout configs/examples/quickstart.yaml` as a newcomer runs it: cold, a fresh GA_HOME."""
    for index, (label, tree, extra) in enumerate(kinds):
        home = folder / f"quickstart-home-{index}"
        row, lines = cold_run(["fanout", str(tree / "configs/examples/quickstart.yaml"), "--json",
                               "--out", str(folder / "quickstart-runs"), *extra], {**env, "GA_HOME": str(home)}, folder,
                              None, tree)
        row.label = f"cold {label}".strip()
        print_row("quickstart", row, None)
        print(lines, flush=True)


def run_cases(args: argparse.Namespace, cases: list, kinds: list, folder: Path, env: dict, servers: dict) -> None:
    results: dict[tuple, list[Row]] = {}
    for n, w, turns, latency in cases:
        key = (turns, latency)
        if key not in servers:
            servers[key] = ModelServer(script(turns, latency), folder, env)
        server = servers[key]
        spec = tasks_file(folder, server.base_url, n, w, turns)
        ideal = math.ceil(n / w) * turns * latency
        case = f"N={n} W={w} T={turns} L={latency:g}"
        print(f"{case}: ideal {ideal:.1f}s", flush=True)
        rows = results.setdefault((n, w, turns, latency), [])
        bases = []
        for label, skip in (("threads", args.no_threads), ("sockets", args.no_sockets), ("asyncio", args.no_asyncio)):
            if not skip:
                bases.append(client_baseline(label, n, w, turns, server.base_url, env, folder))
                rows.append(bases[-1])
                print_row(case, bases[-1], ideal)
        colds = []
        for label, tree, extra in kinds:
            row, lines = cold_run(["fanout", str(spec), "--json", "--out", str(folder / "runs"), *extra], env, folder,
                                  server, tree)
            row.label = f"cold {label}".strip()
            rows.append(row)
            colds.append(row)
            print_row(case, row, ideal, bases)
            print(lines, flush=True)
        if args.baseline:
            print_before_after(case, colds)
        if not args.no_ga_run:
            row = ga_run_baseline(n, w, turns, server.base_url, env, folder / "ga-run")
            rows.append(row)
            print_row(case, row, ideal, bases)
    print_splits(results)
    print_memory_ratios(results)
    if not args.no_warm:
        import ray

        from orchestrator.pool import connect

        connect("local")
        try:
            exclude = {s.proc.pid for s in servers.values()}
            for (n, w, turns, latency), rows in results.items():
                spec = tasks_file(folder, servers[(turns, latency)].base_url, n, w, turns)
                ideal = math.ceil(n / w) * turns * latency
                bases = [r for r in rows if r.label in ("threads", "sockets", "asyncio")]
                for row in warm_rows(spec, folder, env, args.repeat, exclude):
                    rows.append(row)
                    print_row(f"N={n} W={w} T={turns} L={latency:g}", row, ideal, bases)
        finally:
            ray.shutdown()


def print_before_after(case: str, colds: list[Row]) -> None:
    """CPU per model request of each cold run in the --baseline tree and in this one, side by side: the baseline
    rows are labelled "cold ... @REV", this tree's the same without it."""
    for before in (r for r in colds if "@" in r.label):
        after = next((r for r in colds if r.label == before.label.split("@")[0].strip()), None)
        if after is None or not before.requests or not after.requests:
            continue
        was, now = before.cpu_seconds * 1000 / before.requests, after.cpu_seconds * 1000 / after.requests
        print(f"{case:24} CPU per request {before.label} -> this tree: {was:.2f} -> {now:.2f} ms ({now / was:.2f}x); "
              f"per task {before.cpu_seconds * 1000 / before.tasks:.2f} -> {after.cpu_seconds * 1000 / after.tasks:.2f} ms",
              flush=True)


def print_splits(results: dict[tuple, list[Row]]) -> None:
    """CPU per task = fixed + T x per turn, solved from two cases that differ only in T, for each client."""
    for (n, w, turns, latency), rows in results.items():
        for (n2, w2, turns2, latency2), rows2 in results.items():
            if (n2, w2, latency2) != (n, w, latency) or turns2 <= turns:
                continue
            for row in rows:
                other = next((r for r in rows2 if r.label == row.label and r.tasks), None)
                if not row.tasks or other is None:
                    continue
                low, high = row.cpu_seconds * 1000 / row.tasks, other.cpu_seconds * 1000 / other.tasks
                per_turn = (high - low) / (turns2 - turns)
                print(f"CPU per task N={n} W={w} L={latency:g}, T={turns} and T={turns2}: {row.label:9} "
                      f"fixed {low - turns * per_turn:5.2f} ms + {per_turn:5.2f} ms per turn", flush=True)


def print_memory_ratios(results: dict[tuple, list[Row]]) -> None:
    """Peak memory of the same client at two sizes of the same W, T, L (the goal: flat, within 1.2x)."""
    for (n, w, turns, latency), rows in results.items():
        for (n2, w2, turns2, latency2), rows2 in results.items():
            if (w2, turns2, latency2) != (w, turns, latency) or n2 <= n:
                continue
            for row in rows:
                other = next((r for r in rows2 if r.label == row.label), None)
                if row.tree and other is not None and other.tree:
                    print(f"memory W={w} T={turns} L={latency:g}, N={n} -> N={n2}: {row.label:9} "
                          f"{row.tree.peak_rss_mb:.0f} -> {other.tree.peak_rss_mb:.0f} MB "
                          f"({other.tree.peak_rss_mb / row.tree.peak_rss_mb:.2f}x)", flush=True)


if __name__ == "__main__":
    main()
