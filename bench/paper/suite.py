"""What the paper's runners share: the command line, the loop over tasks and agents, and the paper's table
(success rate, input/output/cached tokens, requests, tool calls, wall), ga and the reference side by side.

A runner defines its tasks (`Task`: an id, the prompt, how to fill the workspace, how to grade what the agent
left) and calls `main(...)`. Per-task lines go to OUT/results.jsonl as they finish.
"""
from __future__ import annotations

import argparse
import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Literal, Optional

from bench.paper.agents import Endpoint, Outcome, Prepare, env_note, run_ga, run_reference
from bench.paper.proxy import CountingProxy, Tally

Grade = Callable[[Outcome], tuple[bool, str]]  # (success, what the grader saw)


@dataclass
class Task:
    id: str
    prompt: str
    prepare: Prepare
    grade: Grade
    check: Optional[dict[str, Any]] = None  # a ga check (the held-out set only: the paper's suites are graded after)


@dataclass
class Row:
    agent: str
    tasks: int = 0
    passed: int = 0
    turns: int = 0
    tool_calls: int = 0
    wall: float = 0.0
    tally: Tally = field(default_factory=Tally)


def parser(description: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--base-url", default="http://127.0.0.1:8080/v1", help="any OpenAI-compatible endpoint")
    p.add_argument("--model", default="qwen2.5-coder-1.5b-instruct-q4_k_m")
    p.add_argument("--mode", choices=["native", "text"], default="native", help="tool mode, for both agents")
    p.add_argument("--agents", default="ga,reference", help="comma-separated: ga, reference")
    p.add_argument("--tasks", default="", help="task ids or 1-based ranges to run (default: all), e.g. 1-5,9")
    p.add_argument("--max-turns", type=int, default=12, help="per task, for both agents")
    p.add_argument("--task-timeout", type=float, default=600.0, help="seconds per task, for both agents")
    p.add_argument("--context-window", type=int, default=16384)
    p.add_argument("--max-tokens", type=int, default=1536, help="per reply, for both agents")
    p.add_argument("--reference", type=Path, default=Path("/tmp/ga-ref"),
                   help="what bench/paper/reference.py made (checkout/ and venv/)")
    p.add_argument("--out", type=Path, default=None, help="where workspaces and results go (default: a new /tmp dir)")
    return p


def chosen(tasks: list[Task], spec: str) -> list[Task]:
    if not spec:
        return tasks
    keep: list[Task] = []
    for part in spec.split(","):
        part = part.strip()
        if "-" in part and part.replace("-", "").isdigit():
            lo, hi = (int(x) for x in part.split("-"))
            keep += tasks[lo - 1:hi]
        elif part.isdigit():
            keep.append(tasks[int(part) - 1])
        else:
            keep += [t for t in tasks if t.id == part or t.id.startswith(part)]
    return keep


def endpoint_of(args: argparse.Namespace) -> Endpoint:
    mode: Literal["native", "text"] = "text" if args.mode == "text" else "native"
    return Endpoint(args.base_url, args.model, mode, args.context_window, args.max_tokens, args.task_timeout)


def run_one(agent: str, task: Task, args: argparse.Namespace, proxy: CountingProxy, out: Path,
            memory_root: Optional[Path] = None, checkout: Optional[Path] = None) -> Outcome:
    endpoint = endpoint_of(args)
    if agent == "ga":
        return run_ga(task.id, task.prompt, task.prepare, endpoint, proxy, out, max_turns=args.max_turns,
                      timeout=args.task_timeout, memory_root=memory_root, check=task.check)
    return run_reference(task.id, task.prompt, task.prepare, endpoint, proxy, out, max_turns=args.max_turns,
                         timeout=args.task_timeout + 60, reference=args.reference, checkout=checkout)


def record(out: Path, outcome: Outcome, passed: bool, seen: str, **extra: Any) -> None:
    line = {"agent": outcome.agent, "task": outcome.task_id, "passed": passed, "graded": seen[:300],
            "status": outcome.status, "note": outcome.note[:300], "turns": outcome.turns, "tool_calls": outcome.tool_calls,
            "wall": round(outcome.wall, 1), "requests": outcome.tally.requests, "input": outcome.tally.input,
            "output": outcome.tally.output, "cached": outcome.tally.cached, "answer": outcome.answer[-400:], **extra}
    with open(out / "results.jsonl", "a", encoding="utf-8") as f:
        f.write(json.dumps(line, ensure_ascii=False) + "\n")
    print(f"  {outcome.agent:9s} {outcome.task_id:28s} {'PASS' if passed else 'fail'}  {outcome.status[:24]:24s} "
          f"{outcome.tally.input + outcome.tally.output:>8,} tok {outcome.tally.requests:>3} req "
          f"{outcome.tool_calls:>3} calls {outcome.wall:>6.0f}s  {seen[:60]}", flush=True)


def main(title: str, tasks: list[Task], args: argparse.Namespace) -> list[Row]:
    out = args.out or Path(f"/tmp/paper-{time.strftime('%Y%m%d-%H%M%S')}")
    out.mkdir(parents=True, exist_ok=True)
    agents = [a.strip() for a in args.agents.split(",") if a.strip()]
    todo = chosen(tasks, args.tasks)
    rows = {agent: Row(agent) for agent in agents}
    print(f"{title} · {len(todo)} task(s) · model {args.model} at {args.base_url} · tool mode {args.mode} · "
          f"max {args.max_turns} turns, {args.task_timeout:g}s per task · out {out}", flush=True)
    with CountingProxy(args.base_url) as proxy:
        for task in todo:
            for agent in agents:
                outcome = run_one(agent, task, args, proxy, out)
                passed, seen = task.grade(outcome)
                record(out, outcome, passed, seen)
                add(rows[agent], outcome, passed)
    print_table(title, list(rows.values()))
    print(env_note())
    return list(rows.values())


def add(row: Row, outcome: Outcome, passed: bool) -> None:
    row.tasks += 1
    row.passed += passed
    row.turns += outcome.turns
    row.tool_calls += outcome.tool_calls
    row.wall += outcome.wall
    row.tally.add(outcome.tally)


def print_table(title: str, rows: list[Row]) -> None:
    print(f"\n{title}")
    print(f"{'agent':10s} {'success':>9s} {'rate':>6s} {'input tok':>11s} {'output tok':>11s} {'cached tok':>11s} "
          f"{'requests':>9s} {'tool calls':>11s} {'wall s':>8s}")
    for r in rows:
        rate = r.passed / r.tasks if r.tasks else 0.0
        print(f"{r.agent:10s} {f'{r.passed}/{r.tasks}':>9s} {rate:>6.0%} {r.tally.input:>11,} {r.tally.output:>11,} "
              f"{r.tally.cached:>11,} {r.tally.requests:>9,} {r.tool_calls:>11,} {r.wall:>8.0f}")
    if len(rows) == 2 and all(r.tasks for r in rows):
        a, b = rows
        total = [r.tally.input + r.tally.output for r in rows]
        print(f"{a.agent}/{b.agent}: tokens {total[0] / max(1, total[1]):.2f}x, requests "
              f"{a.tally.requests / max(1, b.tally.requests):.2f}x, wall {a.wall / max(1e-9, b.wall):.2f}x, success "
              f"{a.passed}/{a.tasks} vs {b.passed}/{b.tasks}")
