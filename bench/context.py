"""Context control over a long session, through the real loop (worker.Worker) and real tools:
three policies side by side on the same sessions.

A deterministic in-process model (zero latency) drives a 300-turn task: file reads, writes,
patches, a code_run now and then, <thinking> text, several calls in some turns, a key_info
checkpoint every 23 turns. Two workloads: "typical" (reads of 20-200 lines of source-like files,
mostly one call per turn) and "heavy" (reads near the 20,000-char file_read cap, up to three
calls per turn). Policies: "periodic (before)" (the shipped policy until now: tags compressed
every 5 turns, eviction to 60 % over budget), "reference every-5" (GenericAgent's
trim_messages_history ported literally) and "watermark (now)" (nothing old touched until the
budget is crossed, then one step down to `context.low_water`). Printed for each:
- the share of consecutive requests whose messages extend the previous request unchanged;
- request size (serialized messages): mean and peak against the budget;
- the share of input chars a prefix cache could serve (the longest common prefix with the
  previous request), and the session's input cost with cached input at 10 % of the price;
- checks on every request: over budget, orphaned tool results / unanswered tool calls, key_info
  present in the newest anchor (all must be 0);
- context control's time per turn.

    python bench/context.py [--turns 300] [--context-tokens 24000] [--workload typical|heavy|both]
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Iterator

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import worker.context  # noqa: E402
from configs import load_settings  # noqa: E402
from configs.logs import setup_logging  # noqa: E402
from configs.settings import ContextSettings  # noqa: E402
from memory_shared import MemoryStore  # noqa: E402
from worker import Runtime, TaskSpec, Worker  # noqa: E402
from worker.model import Reply, ToolCall  # noqa: E402
from worker.usage import Usage  # noqa: E402

CACHED_PRICE = 0.10  # a provider's price for cached input, as a fraction of the uncached price
WORKLOADS = {
    # line widths of the data files, lines per file_read, calls per turn (drawn uniformly)
    "typical": {"widths": [20, 40, 60, 100], "counts": [20, 50, 100, 200], "calls": [1, 1, 1, 1, 1, 2]},
    "heavy": {"widths": [30, 80, 200, 600], "counts": [20, 80, 200, 400], "calls": [1, 1, 1, 1, 2, 3]},
}


class SessionModel:
    """Chooses each turn's tool calls from a seeded RNG; answers after `turns` turns. Records requests."""

    def __init__(self, turns: int, workload: dict[str, list[int]], seed: int = 11):
        self.turns, self.workload, self.rng = turns, workload, random.Random(seed)
        self.requests: list[str] = []
        self.last_messages: list[list[dict[str, Any]]] = []
        self.key_info = ""
        self.key_info_misses = 0
        self.protocol_errors = 0
        self.model_seconds = 0.0
        self.chat_returned = 0.0
        self.config = None  # no models.yaml entry: the loop keeps the configured context

    def chat(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Reply:
        started = time.perf_counter()
        turn = len(self.requests) + 1
        self.requests.append(json.dumps(messages, ensure_ascii=False))
        self.protocol_errors += len(protocol_problems(messages))
        if self.key_info and f"<key_info>\n{self.key_info}\n</key_info>" not in (messages[-1].get("content") or ""):
            self.key_info_misses += 1
        reply = self._reply(turn)
        self.model_seconds += time.perf_counter() - started
        self.chat_returned = time.perf_counter()
        return reply

    def _reply(self, turn: int) -> Reply:
        if turn > self.turns:
            return _reply("All steps done.", [])
        rng = self.rng
        calls: list[tuple[str, dict[str, Any]]] = []
        if turn % 23 == 0:
            self.key_info = f"checkpoint t{turn}: outputs in out_*.txt; data_{turn % 12}.txt is the biggest so far"
            calls.append(("update_working_checkpoint", {"key_info": self.key_info}))
        elif turn % 50 == 0:
            calls.append(("code_run", {"script": "print('row,' * 1500)", "type": "python"}))
        else:
            for _ in range(rng.choice(self.workload["calls"])):
                kind = rng.random()
                if kind < 0.55:
                    calls.append(("file_read", {"path": f"data_{rng.randrange(12)}.txt", "start": rng.randint(1, 50),
                                                "count": rng.choice(self.workload["counts"])}))
                elif kind < 0.85:
                    calls.append(("file_write", {"path": f"out_{turn}.txt", "content": _prose(rng, rng.randint(200, 3000))}))
                else:
                    calls.append(("file_patch", {"path": "notes.md", "old_content": "STATUS: open",
                                                 "new_content": "STATUS: open"}))
        thinking = f"<thinking>{_prose(rng, rng.randint(100, 1500))}</thinking>" if rng.random() < 0.7 else ""
        return _reply(thinking, [ToolCall(f"call_{turn}_{i}", name, json.dumps(args)) for i, (name, args) in enumerate(calls)])


def _reply(content: str, calls: list[ToolCall]) -> Reply:
    message: dict[str, Any] = {"role": "assistant", "content": content or None if calls else content}
    if calls:
        message["tool_calls"] = [{"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                                 for c in calls]
    return Reply(content, calls, Usage(prompt=1, completion=1), message)


WORDS = "the of service port config log error retry cache build test deploy user file value table row".split()


def _prose(rng: random.Random, chars: int) -> str:
    out: list[str] = []
    size = 0
    while size < chars:
        word = rng.choice(WORDS)
        out.append(word)
        size += len(word) + 1
    return " ".join(out)


def protocol_problems(messages: list[dict[str, Any]]) -> list[str]:
    problems, pending = [], set()
    for m in messages:
        if m["role"] == "tool":
            if m.get("tool_call_id") not in pending:
                problems.append("orphaned tool result")
            pending.discard(m.get("tool_call_id"))
            continue
        if pending:
            problems.append("tool_calls without results")
        pending = {c["id"] for c in m.get("tool_calls") or []}
    if pending:
        problems.append("tool_calls without results")
    if len(messages) > 1 and messages[1]["role"] != "user":
        problems.append("first message after system is not a user message")
    return problems


def common_prefix(a: str, b: str) -> int:
    lo, hi = 0, min(len(a), len(b))
    while lo < hi:  # binary search on slices: fast in C for long strings
        mid = (lo + hi + 1) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def make_workdir(workdir: Path, rng: random.Random, widths: list[int]) -> None:
    workdir.mkdir(parents=True)
    for k in range(12):
        lines = [f"{i:05d} " + _prose(rng, rng.choice(widths)) for i in range(400 + 200 * k)]
        (workdir / f"data_{k}.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (workdir / "notes.md").write_text("# Notes\nSTATUS: open\n", encoding="utf-8")


def reference_maintain(messages: list[dict[str, Any]], turn: int, ctx: ContextSettings, anchor: Any = None) -> list[dict[str, Any]]:
    """The GenericAgent reference's trim_messages_history, ported literally (its paper's pseudocode 3.7.2):
    tags compressed every 5 turns (10 newest exempt); over the cap, strict compression (4 exempt), then
    single messages popped from the front while more than 9 remain and the size is over 60 %."""
    if worker.context.compression_due(turn, 5):
        messages = worker.context.compress_tags(messages, 10, ctx.tag_keep_chars)
    if worker.context.serialized_size(messages) <= ctx.budget_chars:
        return messages
    system, history = messages[:1], worker.context.compress_tags(messages, 4, ctx.tag_keep_chars)[1:]
    target = int(ctx.budget_chars * 0.6)
    while len(history) > 9 and worker.context.serialized_size(system + history) > target:
        history.pop(0)
        while history and history[0]["role"] != "user":
            history.pop(0)
    return worker.context.repair_tool_pairs(system + history)


POLICIES = {  # name: (settings overrides, replacement for worker.context.maintain or None)
    "periodic (before)": ({"context.policy": "periodic"}, None),
    "reference every-5": ({"context.policy": "periodic"}, reference_maintain),
    "watermark (now)": ({"context.policy": "watermark"}, None),
}


def run_session(name: str, turns: int, context_tokens: Any, policy: str) -> dict[str, Any]:
    workload = WORKLOADS[name]
    policy_overrides, replacement = POLICIES[policy]
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        overrides: dict[str, Any] = {"worker.max_turns": turns + 1, "context.context_tokens": context_tokens,
                                     **policy_overrides}
        settings = load_settings(overrides, user_file=root / "none", project_file=root / "none")
        make_workdir(root / "work", random.Random(5), workload["widths"])
        model = SessionModel(turns, workload)
        tool_seconds = [0.0]

        def on_turn(event: dict) -> None:  # called right after each tool call
            now = time.perf_counter()
            tool_seconds[0] += now - model.chat_returned
            model.chat_returned = now

        with timed_context_control(replacement) as context_seconds:
            task = Worker(TaskSpec("Tidy the data files and report what changed.", task_id=f"bench-context-{name}",
                                   workdir=root / "work", settings=settings, history_path=root / "history.jsonl"),
                          Runtime(model=model, store=MemoryStore(root / "memory", create=True), on_turn=on_turn))
            started = time.perf_counter()
            result = task.run()
            wall = time.perf_counter() - started
    return session_figures(model, result, settings.context.budget_chars,
                           overhead=wall - model.model_seconds - tool_seconds[0], context_seconds=context_seconds[0])


@contextlib.contextmanager
def timed_context_control(replacement: Any) -> Iterator[list[float]]:
    """Time the context control where the loop calls it (the real one, or the reference's port for that
    column); yields the seconds spent, added up as the session runs."""
    maintain, context_seconds = worker.context.maintain, [0.0]
    policy_maintain = replacement or maintain

    def timed_maintain(*args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return policy_maintain(*args, **kwargs)
        finally:
            context_seconds[0] += time.perf_counter() - started

    worker.context.maintain = timed_maintain
    try:
        yield context_seconds
    finally:
        worker.context.maintain = maintain


def session_figures(model: SessionModel, result: Any, budget: int, *, overhead: float,
                    context_seconds: float) -> dict[str, Any]:
    """The table's figures for one session from the requests the model saw (`overhead`: seconds of the
    loop's own work, model and tools taken out)."""
    sizes = [len(r) for r in model.requests]
    pairs = list(zip(model.requests, model.requests[1:]))
    cached = [0] + [common_prefix(prev, cur) for prev, cur in pairs]
    count = len(model.requests)
    return {
        "status": f"{result.status}, {result.turns} turns",
        "budget": budget,
        "stable": sum(1 for prev, cur in pairs if cur.startswith(prev[:-1])) / len(pairs),
        "peak": max(sizes),
        "mean": sum(sizes) / count,
        "cacheable": sum(cached) / sum(sizes),
        # input cost in uncached-char units: the prefix shared with the previous request at the cached price
        "cost": sum(size - hit + CACHED_PRICE * hit for size, hit in zip(sizes, cached)),
        "over_budget": sum(1 for size in sizes if size > budget),
        "protocol": model.protocol_errors,
        "key_info_misses": model.key_info_misses,
        "overhead_ms": overhead / count * 1000,
        "context_ms": context_seconds / count * 1000,
    }


ROWS = [  # label, key, format
    ("status", "status", "{}"),
    ("requests with an unchanged prefix", "stable", "{:.1%}"),
    ("mean request (chars)", "mean", "{:,.0f}"),
    ("peak request (chars)", "peak", "{:,}"),
    ("prefix-cacheable share of input", "cacheable", "{:.1%}"),
    ("input cost (cached at 10 %), Mchar-units", "cost", "{:.2f}"),
    ("requests over budget (must be 0)", "over_budget", "{}"),
    ("protocol problems (must be 0)", "protocol", "{}"),
    ("key_info missing (must be 0)", "key_info_misses", "{}"),
    ("context control per turn (ms)", "context_ms", "{:.2f}"),
]


def print_table(name: str, results: dict[str, dict[str, Any]]) -> None:
    width = 24
    first = next(iter(results.values()))
    print(f"\n[{name}] budget {first['budget']:,} chars")
    print(f"  {'':42}" + "".join(f"{policy:>{width}}" for policy in results))
    for label, key, fmt in ROWS:
        values = [r[key] / 1e6 if key == "cost" else r[key] for r in results.values()]
        print(f"  {label:42}" + "".join(f"{fmt.format(v):>{width}}" for v in values))
    before = results["periodic (before)"]
    now = results["watermark (now)"]
    print(f"  watermark against before: input cost x{now['cost'] / before['cost']:.2f} "
          f"({1 - now['cost'] / before['cost']:.0%} lower), unchanged prefixes {now['stable']:.1%} "
          f"against {before['stable']:.1%}, mean request x{now['mean'] / before['mean']:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=300)
    parser.add_argument("--context-tokens", type=int, default=None, help="default: configs/default.yaml")
    parser.add_argument("--workload", choices=[*WORKLOADS, "both"], default="both")
    opts = parser.parse_args()
    setup_logging("warning")
    print(f"load average {os.getloadavg()[0]:.2f}; {opts.turns} turns per session; cached input priced at "
          f"{CACHED_PRICE:.0%} of uncached")
    for name in WORKLOADS if opts.workload == "both" else [opts.workload]:
        print_table(name, {policy: run_session(name, opts.turns, opts.context_tokens, policy) for policy in POLICIES})


if __name__ == "__main__":
    main()
