"""Benchmark: code_run start-up inside the bubblewrap sandbox against without, side by side in one run.

    python bench/sandbox.py [-n 40]

Each round runs the same trivial script through the real code_run tool (script file written, process
started, waited for, output read) once with `sandbox.mode: bwrap` and once with `off`, alternating so
both see the same machine load. Reported: median and p90 wall time per call, the difference (goal: at
most 30 ms added), the one-time support probe, and the load average before and after.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from configs import load_settings  # noqa: E402
from worker import sandbox  # noqa: E402
from worker.tools import REGISTRY, ToolContext  # noqa: E402

SCRIPTS = {"bash": "true", "python": "pass"}


def timed_call(ctx: ToolContext, kind: str) -> float:
    spec = REGISTRY["code_run"]
    started = time.perf_counter()
    result = spec.run(ctx, spec.args.model_validate({"type": kind, "script": SCRIPTS[kind]}))
    elapsed = time.perf_counter() - started
    if not result.ok:
        raise SystemExit(f"code_run failed ({ctx.settings.sandbox.mode}): {result.output.splitlines()[0]}")
    return elapsed


def p90(values: list[float]) -> float:
    return sorted(values)[max(0, int(len(values) * 0.9) - 1)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=40, help="rounds per script type")
    args = parser.parse_args()
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="ga-bench-sandbox-") as tmp:
        contexts = {}
        for mode in ("bwrap", "off"):
            work = Path(tmp) / mode
            work.mkdir()
            settings = load_settings({"sandbox.mode": mode})
            contexts[mode] = ToolContext(task_id=f"bench-{mode}", workdir=work, settings=settings, memory=None)
        policy = contexts["bwrap"].settings.sandbox
        started = time.perf_counter()
        problem = sandbox.support_problem(policy.bwrap, policy.network)
        probe_ms = (time.perf_counter() - started) * 1000
        if problem:
            raise SystemExit(problem)
        times: dict[tuple[str, str], list[float]] = {}
        for kind in SCRIPTS:
            for mode in ("bwrap", "off"):
                timed_call(contexts[mode], kind)  # warm caches (interpreter pages, the first script file)
            for _ in range(args.n):
                for mode in ("bwrap", "off"):
                    times.setdefault((kind, mode), []).append(timed_call(contexts[mode], kind))
    load_after = os.getloadavg()
    print(f"code_run start-up, {args.n} calls each, alternating (ms)")
    print(f"{'script':<8} {'sandbox':>14} {'without':>14} {'added':>8}  goal <= 30 ms added")
    for kind in SCRIPTS:
        inside, outside = times[(kind, "bwrap")], times[(kind, "off")]
        med_in, med_out = statistics.median(inside) * 1000, statistics.median(outside) * 1000
        print(f"{kind:<8} {med_in:7.1f} p90 {p90(inside) * 1000:4.0f} {med_out:7.1f} p90 {p90(outside) * 1000:4.0f}"
              f" {med_in - med_out:+7.1f}  ({med_in / med_out:.2f}x)")
    print(f"one-time support probe: {probe_ms:.1f} ms")
    print(f"load average (1, 5, 15 min): before {load_before[0]:.2f} {load_before[1]:.2f} {load_before[2]:.2f}, "
          f"after {load_after[0]:.2f} {load_after[1]:.2f} {load_after[2]:.2f}; cpus {os.cpu_count()}")


if __name__ == "__main__":
    main()
