"""Benchmark: code_run start-up and a script's model request, today's sandbox against the gateway's; the browser's
cold start-up and web_scan time, inside the task's sandbox against outside it; in one run.

    python bench/sandbox.py [-n 40] [-r 200] [-b 8] [-s 5] [--only code_run|browser]

Start-up: each round runs the same trivial script through the real code_run tool (script file written,
process started, waited for, output read) unsandboxed (`sandbox.mode: off`), sandboxed as before the gateway
(`network: open`: the host's network, no relay) and sandboxed with the gateway (`network: gateway`: own
network namespace, the launcher relaying 127.0.0.1:8411 to the gateway's socket), alternating so all see
the same machine load. Goal: the gateway adds at most 30 ms to today's sandbox.

Against the code before issue 30 (`--baseline REV`, default the tree before its sandbox work): the same
trivial scripts through code_run in gateway mode, the baseline's tree (extracted with `git archive`) and
this one each in a process of its own, alternating round by round. What issue 30 added to a start: the
environment's allow-list, the host's sockets listed and covered, /run, /var/run and /dev read-only, the
memory cgroup, the mount points ga makes, the disk watch, the launcher from its text. Goal: at most 5 ms.

Model request: one sandboxed script sends `-r` chat completions over one keep-alive connection through the
gateway (launcher relay, Unix socket, gateway, endpoint), another the same requests straight to the scripted
server (network open); both time each request inside the sandbox. Goal: at most 2 ms added at p50.
Also printed: the gateway's one-time start per task, the support probe, and the load average.

Browser start-up (-b rounds, alternating): a task's first web call until its page answers one evaluate (launch,
context, tab), today's way (bench/browser_today.py: Chromium outside any sandbox, a TCP DevTools port read from
its profile, CDP over a websocket) against the task's browser (worker/web: bubblewrap with the task's policy,
the default network, over a pipe); the Playwright driver is started before. Goal: at most 300 ms added.
web_scan (-s scans a page, after one unmeasured): the tool call on the pages of bench/web_scan.py (those on this
machine), in one tab of each browser, pages served on 127.0.0.1 (listed in sandbox.network, so the task's
browser goes through the egress proxy). Goal: at most 1.2x today's.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from configs import load_settings  # noqa: E402
from worker import sandbox  # noqa: E402
from worker.modelconfig import resolve_model  # noqa: E402
from worker.scripted import ScriptedServer  # noqa: E402
from worker.tools import REGISTRY, ToolContext  # noqa: E402
from worker.tools.web import Browser  # noqa: E402
from worker.web import WebSession  # noqa: E402
from worker.web import loop as web_loop  # noqa: E402
from worker.web.chromium import find_chromium  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
import browser_today  # noqa: E402
import web_scan as scan_bench  # noqa: E402  (its pages, and the tests' fixture server)

SCRIPTS = {"bash": "true", "python": "pass"}
MODES = {"off": {"sandbox.mode": "off", "sandbox.network": "off"},
         "open": {"sandbox.network": "open", "sandbox.env": ["BENCH_URL"]},  # the direct path's address
         "gateway": {"sandbox.network": "gateway"}}
REQUESTS = """
import http.client, json, os, sys, time, urllib.parse
url = urllib.parse.urlsplit(os.environ.get("BENCH_URL") or os.environ["OPENAI_BASE_URL"])
body = json.dumps({"model": "m", "messages": [{"role": "user", "content": "ping"}]})
connection = http.client.HTTPConnection(url.hostname, url.port, timeout=30)
times = []
for _ in range(%d):
    started = time.perf_counter()
    connection.request("POST", url.path + "/chat/completions", body, {"Content-Type": "application/json"})
    reply = connection.getresponse()
    assert reply.status == 200, reply.read()
    reply.read()
    times.append(time.perf_counter() - started)
print(json.dumps(times))
"""


ROOT = Path(__file__).resolve().parents[1]
BASELINE = "12d7bd2"  # the tree before issue 30's sandbox changes
# One tree's code_run, timed in a process whose import path starts at that tree: a (kind, script) a line in,
# (seconds, ok, the output's start) a line out.
ROUNDS = """
import json, sys, time
from pathlib import Path
from configs import load_settings
from worker.tools import REGISTRY, ToolContext
import worker
assert worker.__file__.startswith(sys.argv[2]), worker.__file__
spec = REGISTRY["code_run"]
ctx = ToolContext(task_id="bench", workdir=Path(sys.argv[1]), settings=load_settings({"sandbox.network": "gateway"}),
                  memory=None, model_config=None)
for line in sys.stdin:
    kind, script = json.loads(line)
    started = time.perf_counter()
    result = spec.run(ctx, spec.args.model_validate({"type": kind, "script": script, "timeout": 300}))
    print(json.dumps([time.perf_counter() - started, result.ok, result.output[:300]]), flush=True)
ctx.close()
"""


class TreeRunner:
    """code_run of the code in `tree`, in a child process (see ROUNDS)."""

    def __init__(self, tree: Path, work: Path):
        work.mkdir(parents=True)
        env = {**os.environ, "PYTHONPATH": str(tree)}
        self.tree = tree
        self.proc = subprocess.Popen([sys.executable, "-c", ROUNDS, str(work), str(tree)], cwd=work, env=env,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def run(self, kind: str, script: str) -> float:
        assert self.proc.stdin and self.proc.stdout
        self.proc.stdin.write(json.dumps([kind, script]) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise SystemExit(f"the code_run of {self.tree} ended early (exit {self.proc.wait()})")
        seconds, ok, output = json.loads(line)
        if not ok:
            raise SystemExit(f"code_run failed ({self.tree}): {output}")
        return seconds * 1000

    def close(self) -> None:
        assert self.proc.stdin
        self.proc.stdin.close()
        self.proc.wait(timeout=60)


def against_baseline(revision: str, rounds: int) -> dict[str, tuple[list[float], list[float]]]:
    """(baseline ms, now ms) per script type, alternating the two trees. Under /var/tmp: a baseline's launcher
    under /tmp would be hidden by its own private /tmp (one of the bugs issue 30 fixed)."""
    place = Path(tempfile.mkdtemp(prefix="ga-bench-baseline-", dir="/var/tmp"))
    try:
        old = place / "tree"
        old.mkdir()
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", revision], capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", str(old)], input=archive, check=True)
        runners = {"before": TreeRunner(old, place / "work-before"), "now": TreeRunner(ROOT, place / "work-now")}
        times: dict[str, tuple[list[float], list[float]]] = {kind: ([], []) for kind in SCRIPTS}
        try:
            for kind, script in SCRIPTS.items():
                for runner in runners.values():
                    runner.run(kind, script)  # the gateway starts, caches warm
                for _ in range(rounds):
                    times[kind][0].append(runners["before"].run(kind, script))
                    times[kind][1].append(runners["now"].run(kind, script))
        finally:
            for runner in runners.values():
                runner.close()
        return times
    finally:
        shutil.rmtree(place, ignore_errors=True)


def run(ctx: ToolContext, script: str, kind: str) -> tuple[float, str]:
    spec = REGISTRY["code_run"]
    started = time.perf_counter()
    result = spec.run(ctx, spec.args.model_validate({"type": kind, "script": script, "timeout": 300}))
    elapsed = time.perf_counter() - started
    if not result.ok:
        raise SystemExit(f"code_run failed ({ctx.task_id}): {result.output[:400]}")
    return elapsed, result.output.split("\n", 1)[1]


def p(values: list[float], share: float) -> float:
    return sorted(values)[max(0, int(len(values) * share + 0.5) - 1)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=40, help="start-up rounds per script type")
    parser.add_argument("-r", type=int, default=200, help="model requests per path")
    parser.add_argument("--baseline", default=BASELINE, help="the revision code_run's start-up is compared with")
    parser.add_argument("-b", type=int, default=12, help="browser start-up rounds per browser")
    parser.add_argument("-s", type=int, default=20, help="web_scan calls per page and browser")
    parser.add_argument("--only", choices=["code_run", "browser"], help="run one part")
    args = parser.parse_args()
    if args.only != "browser":
        code_run_part(args)
    if args.only != "code_run":
        browser_part(args)


def code_run_part(args: argparse.Namespace) -> None:
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="ga-bench-sandbox-") as tmp, \
            ScriptedServer({"tasks": [{"match": ".*", "turns": [{"content": "pong"}] * (args.r + 5)}]}) as server:
        model = resolve_model(f"scripted@{server.base_url}", load_settings())
        contexts = {}
        for mode, overrides in MODES.items():
            work = Path(tmp) / mode
            work.mkdir()
            contexts[mode] = ToolContext(task_id=f"bench-{mode}", workdir=work, settings=load_settings(overrides),
                                         memory=None, model_config=model)
        started = time.perf_counter()
        for network in (True, False):
            problem = sandbox.support_problem("bwrap", network)
            if problem:
                raise SystemExit(problem)
        probe_ms = (time.perf_counter() - started) * 1000
        first = {mode: run(contexts[mode], "true", "bash")[0] * 1000 for mode in MODES}  # the gateway starts here
        times: dict[tuple[str, str], list[float]] = {}
        for kind, script in SCRIPTS.items():
            for mode in MODES:
                run(contexts[mode], script, kind)  # warm caches (interpreter pages, the first script file)
            for _ in range(args.n):
                for mode in MODES:
                    times.setdefault((kind, mode), []).append(run(contexts[mode], script, kind)[0] * 1000)
        through = json.loads(run(contexts["gateway"], REQUESTS % args.r, "python")[1])
        os.environ["BENCH_URL"] = server.base_url  # listed in the open sandbox's sandbox.env
        try:
            direct = json.loads(run(contexts["open"], REQUESTS % args.r, "python")[1])
        finally:
            del os.environ["BENCH_URL"]
        for ctx in contexts.values():
            ctx.close()
    load_after = os.getloadavg()
    print(f"code_run start-up, {args.n} calls each, alternating (ms; median, p90)")
    print(f"{'script':<8} {'unsandboxed':>16} {'sandbox, open':>16} {'sandbox, gateway':>18} {'gateway added':>14}"
          "  goal <= 30 ms added")
    for kind in SCRIPTS:
        cells = {mode: (statistics.median(times[(kind, mode)]), p(times[(kind, mode)], 0.9)) for mode in MODES}
        print(f"{kind:<8}" + "".join(f" {cells[m][0]:8.1f} p90 {cells[m][1]:4.0f}" for m in ("off", "open"))
              + f"   {cells['gateway'][0]:8.1f} p90 {cells['gateway'][1]:4.0f}"
              + f" {cells['gateway'][0] - cells['open'][0]:+10.1f}")
    print(f"first code_run of a task (gateway started there): open {first['open']:.1f} ms, "
          f"gateway {first['gateway']:.1f} ms")
    print(f"\nmodel request from a sandboxed script, {args.r} each over one keep-alive connection (ms)")
    print(f"{'path':<28} {'p50':>7} {'p90':>7} {'p99':>7}")
    for name, values in (("direct (network open)", direct), ("through the gateway", through)):
        ms = [v * 1000 for v in values]
        print(f"{name:<28} {p(ms, 0.5):7.2f} {p(ms, 0.9):7.2f} {p(ms, 0.99):7.2f}")
    added = (p(through, 0.5) - p(direct, 0.5)) * 1000
    print(f"gateway added at p50: {added:+.2f} ms  (goal <= 2 ms)")
    baseline = against_baseline(args.baseline, args.n)
    which = " (before issue 30)" if args.baseline == BASELINE else ""
    print(f"\ncode_run start-up, gateway mode, against {args.baseline}{which}, {args.n} calls each, "
          "alternating (ms; median, p90)")
    print(f"{'script':<8} {'before':>16} {'now':>16} {'added':>9}  goal <= 5 ms added")
    for kind, (before, now) in baseline.items():
        print(f"{kind:<8} {statistics.median(before):8.1f} p90 {p(before, 0.9):4.0f} {statistics.median(now):8.1f} "
              f"p90 {p(now, 0.9):4.0f} {statistics.median(now) - statistics.median(before):+9.1f}")
    print(f"\none-time support probes: {probe_ms:.1f} ms")
    print(f"load average (1, 5, 15 min): before {load_before[0]:.2f} {load_before[1]:.2f} {load_before[2]:.2f}, "
          f"after {load_after[0]:.2f} {load_after[1]:.2f} {load_after[2]:.2f}; cpus {os.cpu_count()}")



# ---- the browser: today's launch against the task's sandboxed one
async def _evaluate_one(session: WebSession) -> object:
    return await (await session.page()).evaluate("1")


def browser_ctx(mode: str, settings, root: Path, name: str) -> ToolContext:
    """A task context whose first web call starts `mode`'s browser: today's (outside the sandbox) or the task's."""
    work = Path(tempfile.mkdtemp(prefix=f"{name}-", dir=root))
    ctx = ToolContext(f"bench-{name}", work, settings, memory=None)
    if mode == "today":
        ctx.state(Browser).session = WebSession(browser_today.TodaysBrowser(find_chromium(None)), 60.0)
    return ctx


def start_once(mode: str, settings, root: Path) -> tuple[float, float]:
    """(ms from nothing to a tab that answered, ms to close it all) for one task's browser."""
    ctx = browser_ctx(mode, settings, root, f"start-{mode}")
    started = time.perf_counter()
    session = ctx.state(Browser).open()
    session.call(_evaluate_one)
    up = time.perf_counter()
    ctx.close()
    return (up - started) * 1000, (time.perf_counter() - up) * 1000


def scan_pages(rounds: int, root: Path) -> list[tuple[str, dict[str, list[float]]]]:
    pages = [page for page in scan_bench.FIXTURES_PAGES + scan_bench.CORPUS if (page.root / page.path).is_file()]
    servers: dict[Path, str] = {}
    settings = load_settings({"home": str(root / "home-scan"), "sandbox.network": ["127.0.0.1"]})
    contexts = {mode: browser_ctx(mode, settings, root, f"scan-{mode}") for mode in BROWSERS}
    found = []
    try:
        for page in pages:
            if page.root not in servers:
                servers[page.root] = scan_bench.serve(page.root)[1]
            times: dict[str, list[float]] = {mode: [] for mode in BROWSERS}
            for mode, ctx in contexts.items():
                nav = scan_bench.js(ctx, f"location.href = {servers[page.root] + '/' + page.path!r}")
                if not nav.ok or not scan_bench.scan(ctx).ok:  # one unmeasured scan: caches warm for both
                    raise SystemExit(f"bench/sandbox.py: {mode} browser: {page.path}: {nav.output[:300]}")
            for _ in range(rounds):
                for mode, ctx in contexts.items():
                    started = time.perf_counter()
                    result = scan_bench.scan(ctx)
                    times[mode].append((time.perf_counter() - started) * 1000)
                    assert result.ok, result.output[:300]
            found.append((f"{page.kind} {page.path}", times))
    finally:
        for ctx in contexts.values():
            ctx.close()
    skipped = len(scan_bench.FIXTURES_PAGES + scan_bench.CORPUS) - len(pages)
    if skipped:
        print(f"({skipped} corpus pages not on this machine: python bench/web_scan.py --install-corpus)")
    return found


BROWSERS = {"today": "today (outside, TCP port)", "sandboxed": "task's (bwrap, pipe)"}


def browser_part(args: argparse.Namespace) -> None:
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="ga-bench-browser-", dir="/var/tmp") as tmp:
        root = Path(tmp)
        settings = load_settings({"home": str(root / "home-start")})
        web_loop.run(browser_today.driver())  # the driver is per process: started once, in both designs
        for mode in BROWSERS:  # warm: binaries in the page cache, the bubblewrap probe
            start_once(mode, settings, root)
        up: dict[str, list[float]] = {mode: [] for mode in BROWSERS}
        down: dict[str, list[float]] = {mode: [] for mode in BROWSERS}
        for _ in range(args.b):
            for mode in BROWSERS:
                started, closed = start_once(mode, settings, root)
                up[mode].append(started)
                down[mode].append(closed)
        scans = scan_pages(args.s, root)
    load_after = os.getloadavg()
    print(f"\nbrowser cold start-up, {args.b} rounds each, alternating: a task's first web call until its tab answers"
          " (ms; median, p90)")
    print(f"{'':12} {BROWSERS['today']:>28} {BROWSERS['sandboxed']:>28} {'added':>9}  goal <= 300 ms added")
    cells = {m: f"{statistics.median(up[m]):8.0f} p90 {p(up[m], 0.9):6.0f}" for m in BROWSERS}
    added = statistics.median(up["sandboxed"]) - statistics.median(up["today"])
    print(f"{'start':12} {cells['today']:>28} {cells['sandboxed']:>28} {added:+9.0f}")
    cells = {m: f"{statistics.median(down[m]):8.0f} p90 {p(down[m], 0.9):6.0f}" for m in BROWSERS}
    print(f"{'close':12} {cells['today']:>28} {cells['sandboxed']:>28}")
    print(f"\nweb_scan tool call, {args.s} each per page and browser, alternating (ms; p50, p95)")
    print(f"{'page':44} {'today p50':>10} {'p95':>6} {'sandboxed p50':>14} {'p95':>6} {'ratio p50':>10}  goal <= 1.2x")
    ratios = []
    for name, times in scans:
        today, boxed = times["today"], times["sandboxed"]
        ratio = statistics.median(boxed) / statistics.median(today)
        ratios.append(ratio)
        print(f"{name[-44:]:44} {statistics.median(today):10.1f} {p(today, 0.95):6.0f} {statistics.median(boxed):14.1f}"
              f" {p(boxed, 0.95):6.0f} {ratio:9.2f}x")
    if ratios:
        print(f"{'all pages (geometric mean of the ratios)':44} {'':>10} {'':>6} {'':>14} {'':>6}"
              f" {statistics.geometric_mean(ratios):9.2f}x")
    print(f"load average (1, 5, 15 min): before {load_before[0]:.2f} {load_before[1]:.2f} {load_before[2]:.2f}, "
          f"after {load_after[0]:.2f} {load_after[1]:.2f} {load_after[2]:.2f}; cpus {os.cpu_count()}")


if __name__ == "__main__":
    main()
