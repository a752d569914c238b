"""Where a fan-out's CPU goes: the cold `ga fanout` of bench/fanout.py's case, run under yappi (CPU clock, all threads).

    python bench/fanout_profile.py --case 1000,256,3,0.5            # the top 40 by own time and by total time
    python bench/fanout_profile.py --case 1000,256,3,0.5 --top 80 --save /tmp/prof.pstat

The scripted model runs in its own process (as in bench/fanout.py), so only ga's process is profiled. yappi
slows the run several times over: read the shares, not the seconds.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
from fanout import ModelServer, script, tasks_file  # noqa: E402

RUN = """
import sys, yappi
root, spec, runs, save, top = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
sys.path.insert(0, root)
yappi.set_clock_type("cpu")
yappi.start(builtins=True)
from cli import app
try:
    app(["fanout", spec, "--json", "--out", runs], standalone_mode=False)
finally:
    yappi.stop()
    stats = yappi.get_func_stats()
    if save:
        stats.save(save, type="pstat")
    total = sum(t.ttot for t in yappi.get_thread_stats())
    print(f"CPU seen by yappi (all threads): {total:.1f}s", file=sys.stderr)
    for key, title in (("tsub", "own time"), ("ttot", "total time")):
        print(f"--- top {top} by {title} (own, total, calls) ---", file=sys.stderr)
        for f in list(stats.sort(key, "desc"))[:top]:
            where = f"{f.module.replace(root + '/', '')}:{f.lineno}"
            print(f"{f.tsub:8.2f} {f.ttot:8.2f} {f.ncall:9d}  {f.name}  {where}", file=sys.stderr)
"""


def main() -> None:
    parser = argparse.ArgumentParser(description="Where a fan-out's CPU goes, under yappi")
    parser.add_argument("--case", default="1000,256,3,0.5", help="N,W,T,L")
    parser.add_argument("--top", type=int, default=40)
    parser.add_argument("--save", default="", help="also write the stats here (pstat format)")
    args = parser.parse_args()
    n, w, turns = (int(x) for x in args.case.split(",")[:3])
    latency = float(args.case.split(",")[3])
    folder = Path(tempfile.mkdtemp(prefix="ga-bench-profile-"))
    env = {**os.environ, "GA_HOME": str(folder / "home"), "PYTHONPATH": str(ROOT)}
    server = ModelServer(script(turns, latency), folder, env)
    try:
        spec = tasks_file(folder, server.base_url, n, w, turns)
        done = subprocess.run([sys.executable, "-c", RUN, str(ROOT), str(spec), str(folder / "runs"), args.save,
                               str(args.top)], env=env, cwd=ROOT, stdout=subprocess.DEVNULL)
        if done.returncode != 0:
            raise SystemExit(f"the profiled fan-out failed ({done.returncode})")
    finally:
        server.close()


if __name__ == "__main__":
    main()
