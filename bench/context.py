"""Context control over a long session, through the real loop (worker.Worker) and real tools.

A deterministic in-process model (zero latency) drives a 300-turn task: file reads, writes,
patches, a code_run now and then, <thinking> text, several calls in some turns, a key_info
checkpoint every 23 turns. Two workloads run side by side: "typical" (reads of 20-200 lines of
source-like files, mostly one call per turn) and "heavy" (reads near the 20,000-char file_read cap,
up to three calls per turn). Printed for each:
- request size (serialized messages) against the budget: peak and mean;
- prompt-cache friendliness: the fraction of consecutive requests whose messages extend the
  previous request unchanged (the reference claims about 80 %), and the share of all request
  chars that a prefix cache could serve (the longest common prefix with the previous request);
- protocol and memory checks on every request: orphaned tool results / unanswered tool calls
  (must be 0), key_info present in the newest anchor (must be always);
- the loop's own overhead per turn (wall time minus model time minus tool time), and the part
  of it spent in context control.

    python bench/context.py [--turns 300] [--context-tokens 24000] [--workload typical|heavy|both]
"""
from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import worker.context  # noqa: E402
from configs import load_settings  # noqa: E402
from configs.logs import setup_logging  # noqa: E402
from memory_shared import MemoryStore  # noqa: E402
from worker import Worker  # noqa: E402
from worker.types import Reply, ToolCall, Usage  # noqa: E402

REFERENCE_STABLE = 0.80
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


def run_session(name: str, turns: int, context_tokens: Any) -> None:
    workload = WORKLOADS[name]
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        overrides: dict[str, Any] = {"worker.max_turns": turns + 1, "context.context_tokens": context_tokens}
        settings = load_settings(overrides, user_file=root / "none", project_file=root / "none")
        ctx = settings.context
        make_workdir(root / "work", random.Random(5), workload["widths"])
        model = SessionModel(turns, workload)
        tool_seconds = [0.0]

        def on_turn(event: dict) -> None:  # called right after each tool call
            now = time.perf_counter()
            tool_seconds[0] += now - model.chat_returned
            model.chat_returned = now

        # Instrumentation, not a replacement: time the real context control where the loop calls it.
        maintain, context_seconds = worker.context.maintain, [0.0]

        def timed_maintain(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return maintain(*args, **kwargs)
            finally:
                context_seconds[0] += time.perf_counter() - started

        worker.context.maintain = timed_maintain
        try:
            task = Worker("Tidy the data files and report what changed.", task_id=f"bench-context-{name}",
                          workdir=root / "work", settings=settings, history_path=root / "history.jsonl",
                          model=model, store=MemoryStore(root / "memory", create=True), on_turn=on_turn)
            started = time.perf_counter()
            result = task.run()
            wall = time.perf_counter() - started
        finally:
            worker.context.maintain = maintain

    sizes = [len(r) for r in model.requests]
    pairs = list(zip(model.requests, model.requests[1:]))
    stable = sum(1 for prev, cur in pairs if cur.startswith(prev[:-1]))
    cacheable = sum(common_prefix(prev, cur) for prev, cur in pairs)
    breaks_at_compression = sum(1 for t, (prev, cur) in enumerate(pairs, start=2)
                                if not cur.startswith(prev[:-1]) and t % ctx.compress_every == 0)
    count = len(model.requests)
    overhead = (wall - model.model_seconds - tool_seconds[0]) / count

    print(f"[{name}] {result.turns} turns, status {result.status}, {count} requests; budget {ctx.budget_chars} chars "
          f"({ctx.context_tokens} tokens x {ctx.chars_per_token}); compress every {ctx.compress_every} turns, "
          f"evict to {ctx.evict_to:.0%}")
    print(f"  request size: peak {max(sizes)} chars ({max(sizes) / ctx.budget_chars:.2f} of budget), "
          f"mean {sum(sizes) / count:.0f} ({sum(sizes) / count / ctx.budget_chars:.2f} of budget)")
    print(f"  prefix unchanged between consecutive requests: {stable}/{len(pairs)} = {stable / len(pairs):.1%} "
          f"(reference ~{REFERENCE_STABLE:.0%}: ratio {stable / len(pairs) / REFERENCE_STABLE:.2f}); breaks: "
          f"{breaks_at_compression} at compression points, {len(pairs) - stable - breaks_at_compression} over budget")
    print(f"  prefix-cacheable share of request chars: {cacheable / sum(sizes[1:]):.1%}")
    print(f"  checks: protocol problems {model.protocol_errors} (must be 0); requests missing the current key_info "
          f"{model.key_info_misses} (must be 0); over budget {sum(1 for s in sizes if s > ctx.budget_chars)} (must be 0)")
    print(f"  loop overhead per turn (zero-latency model, tool time excluded): {overhead * 1000:.2f} ms, of which "
          f"context control {context_seconds[0] / count * 1000:.2f} ms; tools {tool_seconds[0] / count * 1000:.2f} ms/turn")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=300)
    parser.add_argument("--context-tokens", type=int, default=None, help="default: configs/default.yaml")
    parser.add_argument("--workload", choices=[*WORKLOADS, "both"], default="both")
    opts = parser.parse_args()
    setup_logging("warning")
    for name in WORKLOADS if opts.workload == "both" else [opts.workload]:
        run_session(name, opts.turns, opts.context_tokens)


if __name__ == "__main__":
    main()
