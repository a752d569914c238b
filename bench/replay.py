"""`ga replay` on a 64-task run, and a fork against a full retry of a failed task.

1. Records a fan-out of N tasks (three turns each: two sandboxed code_run calls, then the answer) on
   the scripted server, then replays it with the server still running: prints the recording's and the
   replay's wall time and the requests the server received during the replay (it must be 0).
2. A task that fails late (five good tool runs, then a failing one, then an answer: unverified):
   forked from the turn after its last good tool run (what `--from-last-good` picks) against running the
   whole task again; prints the live tokens of each.

    python bench/replay.py [--tasks 64] [--workers 8]
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from configs import load_settings  # noqa: E402
from orchestrator import fanout  # noqa: E402
from orchestrator.replay import last_good_turn, replay  # noqa: E402
from worker.scripted import ScriptedServer  # noqa: E402


def code(script: str) -> dict:
    return {"name": "code_run", "arguments": {"type": "python", "script": script}}


SUMS = {"match": "^Add", "turns": [
    {"content": "Writing the numbers.", "tool_calls": [code("open('n.txt', 'w').write('3 4 5')\nprint('written')")]},
    {"content": "Adding them.", "tool_calls": [code("print(sum(map(int, open('n.txt').read().split())))")]},
    {"content": "The sum is:", "echo_last_tool_result": True}]}
LATE_FAILURE = {"match": "^Survey", "turns": [
    *({"content": f"Step {i}.", "tool_calls": [code(f"print('step {i}: ' + 'x' * 400)")]} for i in range(1, 6)),
    {"content": "Last step.", "tool_calls": [code("print(undefined_name)")]},
    {"content": "Done:", "echo_last_tool_result": True}]}


def requests(server: ScriptedServer) -> int:
    return sum(1 for _ in open(server.log_path, encoding="utf-8")) if server.log_path else 0


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tasks", type=int, default=64)
    parser.add_argument("--workers", type=int, default=8)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        settings = load_settings({"home": str(root / "home"), "worker.second_chance": 0},
                                 user_file=root / "none", project_file=root / "none")
        with ScriptedServer({"tasks": [SUMS, LATE_FAILURE]}, log_path=root / "requests.jsonl") as server:
            model = f"scripted@{server.base_url}"
            spec = {"name": "bench", "concurrency": args.workers, "defaults": {"model": model},
                    "tasks": [{"id": f"t{i:03d}", "prompt": f"Add 3, 4 and 5 ({i})."} for i in range(args.tasks)]}
            started = time.perf_counter()
            run = fanout(spec, settings=settings, out=root / "runs", display="quiet", preflight=False)
            recorded = time.perf_counter() - started
            before = requests(server)
            started = time.perf_counter()
            again = replay(str(run.run_dir), settings=settings, runs_dir=root / "runs", workers=args.workers)
            replayed = time.perf_counter() - started
            during = requests(server) - before
            print(f"{args.tasks} tasks, {args.workers} at once: recorded in {recorded:.2f}s ({before} requests), "
                  f"replayed in {replayed:.2f}s ({replayed / recorded:.2f}x) with {during} requests to the server; "
                  f"identical: {again.identical}")

            late = fanout({"name": "late", "defaults": {"model": model},
                           "tasks": [{"id": "survey", "prompt": "Survey the machine in six steps."}]},
                          settings=settings, out=root / "runs", display="quiet", preflight=False)
            [failed] = late.results
            turn = last_good_turn(late.run_dir / "tasks" / "survey" / "history.jsonl")
            fork = replay(str(late.run_dir), ["survey"], settings=settings, runs_dir=root / "runs", from_turn=turn)
            retry = fanout({"name": "retry", "defaults": {"model": model},
                            "tasks": [{"id": "survey", "prompt": "Survey the machine in six steps."}]},
                           settings=settings, out=root / "runs", display="quiet", preflight=False)
            full = retry.results[0].usage.total
            live = fork.tasks[0].live_usage.total
            print(f"a task {failed.status} after {failed.turns} turns: a full retry costs {full:,} tokens, a fork from "
                  f"turn {turn} (after its last good tool run) {live:,} tokens ({live / full:.2f}x)")


if __name__ == "__main__":
    main()
