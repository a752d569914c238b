"""`ga runs report` on large runs: build time, page size and load time in Chromium.

Writes synthetic run directories in the on-disk format a fan-out writes (ledger, results, one
history.jsonl per task with real-sized system prompts, tool calls and results; some tasks retried,
some failed), then builds the report and opens it in Chromium (file://, no network), timing until
the page has drawn its timeline and task table, and the opening of one conversation.

    python bench/run_report.py [--tasks 200 10000] [--slots 16]
"""
from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from orchestrator.ledger import spec_lines  # noqa: E402
from orchestrator.views.report import write_report  # noqa: E402
from orchestrator.views.runview import load_run_view  # noqa: E402
from worker.prompt import build_system_prompt  # noqa: E402

REASONS = ["model error: HTTP 500 from the endpoint after 5 retries", "timeout after 600s",
           "3 malformed tool calls in a row; last: arguments are not JSON"]


def synthetic_run(root: Path, tasks: int, slots: int, seed: int = 3) -> Path:
    rng = random.Random(seed)
    run = root / f"run-{tasks}"
    (run / "tasks").mkdir(parents=True)
    (run / "reduce").mkdir()
    spec = {"name": f"synthetic-{tasks}", "tasks": [{"id": f"t{i:05d}", "prompt": f"task {i}", "model": "gpt-4o-mini"}
                                                    for i in range(tasks)]}
    (run / "spec.jsonl").write_text(spec_lines(spec))
    system = build_system_prompt("")
    start = 1_800_000_000.0
    free = [start] * slots
    ledger = [{"time": start, "event": "run_started", "tasks": tasks}]
    results = []
    for i in range(tasks):
        task_id = f"t{i:05d}"
        attempts = 2 if rng.random() < 0.05 else 1
        failed = rng.random() < 0.04
        history = []
        previous_end = start
        for attempt in range(1, attempts + 1):
            slot = min(range(slots), key=free.__getitem__)
            begin = max(free[slot], previous_end) + rng.uniform(0.01, 0.2)  # a retry starts after its attempt ended
            turns = rng.randint(2, 6)
            now = begin
            for turn in range(1, turns + 1):
                now += rng.uniform(0.5, 3)
                history.append(_synthetic_turn(rng, system, i, turn, last=turn == turns, now=now))
            ledger.append({"time": begin, "event": "started", "task_id": task_id, "attempt": attempt, "worker": slot})
            free[slot] = previous_end = now
            if attempt < attempts:
                ledger.append({"time": now, "event": "retried", "task_id": task_id, "attempt": attempt,
                               "reason": "worker process died: ActorDiedError"})
        status = "failed" if failed else "succeeded"
        usage = {"prompt": 6000, "completion": 240, "cached": 4200, "cost": 0.0012, "total": 6240}
        results.append({"task_id": task_id, "status": status, "attempt": attempts, "answer": "" if failed else "42",
                        "reason": rng.choice(REASONS) if failed else "", "turns": turns, "usage": usage,
                        "seconds": round(now - begin, 3)})
        ledger.append({"time": now, "event": status, "task_id": task_id, "attempt": attempts})
        (run / "tasks" / task_id).mkdir()
        (run / "tasks" / task_id / "history.jsonl").write_text("".join(json.dumps(h) + "\n" for h in history))
    end = max(free)
    ledger.append({"time": end, "event": "run_finished", "status": "failed"})
    ledger.sort(key=lambda r: r["time"])
    (run / "ledger.jsonl").write_text("".join(json.dumps(r) + "\n" for r in ledger))
    (run / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in results))
    (run / "summary.json").write_text(json.dumps({"status": "failed", "started": start, "finished": end}))
    return run


def _synthetic_turn(rng: random.Random, system: str, task: int, turn: int, *, last: bool, now: float) -> dict:
    """One history line of task `task`: a code_run call per turn, an answer without one on the last."""
    call = {"id": f"c{turn}", "type": "function", "function": {"name": "code_run", "arguments": json.dumps(
        {"type": "python", "script": f"print(sum(range({rng.randint(1, 10**6)})))\n" * rng.randint(1, 8)})}}
    sent = ([{"role": "system", "content": system}, {"role": "user", "content": f"task {task}: count things"}]
            if turn == 1 else [{"role": "user", "content": f"<history>\n[turn {turn - 1}]\n</history>"}])
    return {"turn": turn, "time": now, "sent_from": 0 if turn == 1 else 2 * turn - 1, "sent": sent,
            "received": {"role": "assistant", "content": f"step {turn} " + "x" * rng.randint(20, 400),
                         **({} if last else {"tool_calls": [call]})},
            "usage": {"prompt": 1500 + 400 * turn, "completion": 60, "cached": 1400 * (turn > 1)},
            "latency": round(rng.uniform(0.3, 2.5), 3),
            "tool_results": [] if last else [{"id": f"c{turn}", "name": "code_run", "ok": True,
                                              "output": "exit code 0\n" + _digits(rng, rng.randint(5, 3000))}]}


def _digits(rng: random.Random, count: int) -> str:
    """Tool output that compresses like real output does (random digits in lines), not like one repeated byte."""
    return "\n".join(str(rng.getrandbits(200)) for _ in range(max(1, count // 61)))[:count]


def load_in_chromium(page_path: Path, task_id: str) -> tuple[float, float, list[str]]:
    from playwright.sync_api import sync_playwright

    from worker.web.chromium import CLOSED_NETWORK_FLAGS, find_chromium

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(find_chromium(None)), args=CLOSED_NETWORK_FLAGS)
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        started = time.perf_counter()
        page.goto(page_path.as_uri())
        page.wait_for_selector("body[data-ready='1']")
        loaded = time.perf_counter() - started
        started = time.perf_counter()
        page.evaluate(f"openTask({json.dumps(task_id)})")
        page.wait_for_selector("#conv .turn")
        opened = time.perf_counter() - started
        browser.close()
    return loaded, opened, errors


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, nargs="+", default=[200, 10_000])
    parser.add_argument("--slots", type=int, default=16)
    opts = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.2f}")
    print(f"{'tasks':>7} {'history MB':>11} {'build s':>8} {'page MB':>8} {'load s':>7} {'open conv s':>12}  errors")
    with tempfile.TemporaryDirectory() as tmp:
        for count in opts.tasks:
            run = synthetic_run(Path(tmp), count, opts.slots)
            history = sum(p.stat().st_size for p in run.glob("tasks/*/history.jsonl")) / 1e6
            started = time.perf_counter()
            page, _ = write_report(load_run_view(run.parent, run.name), run)
            build = time.perf_counter() - started
            loaded, opened, errors = load_in_chromium(page, f"t{count - 1:05d}")
            print(f"{count:>7} {history:>11.1f} {build:>8.2f} {page.stat().st_size / 1e6:>8.2f} {loaded:>7.2f} "
                  f"{opened:>12.3f}  {len(errors)}")


if __name__ == "__main__":
    main()
