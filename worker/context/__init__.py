"""Context control: keeps a worker's request dense and under budget however long it runs.

Per turn, before asking the model (the history ends with the anchor user message of the last turn):

    request = maintain(messages, turn, ctx)   # compress if due, then trim to budget; send this
    ... messages = request + [reply, tool results, {"role": "user", "content": anchor.render(turn, key_info)}]

(`maintain(messages, turn, ctx, anchor)` under the watermark policy, so a break can restore
the full anchor.)

`manage_context` does the same and also reports what happened (compression point, evictions, sizes).

Levels (docs/design.md §1): cut.py caps one tool output, compress.py cuts old tags, budget.py enforces the
character budget, anchor.py renders the working-memory anchor.

Two policies (`context.policy`):
- "watermark" (default): nothing old is touched while the request fits the budget, so every request
  extends the previous one byte for byte and a provider's prompt cache serves all of it. When the
  budget is crossed, one large step (strict compression, then FIFO eviction down to `low_water` of
  the budget) makes room for many turns before the next break.
- "periodic": the reference's rhythm: old tags compressed every `compress_every` turns, and when over
  budget the same step down to `evict_to`. Each compression point breaks the cached prefix.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from configs.settings import ContextSettings
from worker.context.anchor import Anchor, anchor_message, render_anchor, summarize_call, turn_line
from worker.context.budget import (
    TrimReport,
    cut_to_fit,
    evict_fifo,
    repair_tool_pairs,
    serialized_size,
    split_units,
    trim_to_budget,
    trim_with_report,
)
from worker.context.compress import compress_message, compress_tags, compress_text, compression_due
from worker.context.cut import cut_arguments, cut_head_tail

__all__ = [
    "Anchor", "ContextStep", "TrimReport", "anchor_message", "compress_if_due", "compress_message",
    "compress_tags", "compress_text", "compression_due", "cut_arguments", "cut_head_tail", "cut_to_fit",
    "evict_fifo", "manage_context", "output_cap", "render_anchor", "repair_tool_pairs", "serialized_size",
    "maintain", "split_units", "summarize_call", "trim_to_budget", "trim_with_report", "turn_line",
]


@dataclass
class ContextStep:
    messages: list[dict[str, Any]]
    compressed: bool  # this turn was a compression point
    trim: TrimReport


def compress_if_due(messages: list[dict[str, Any]], turn: int, ctx: ContextSettings) -> list[dict[str, Any]]:
    """Tag-level compression on every `compress_every`-th turn; the same list otherwise."""
    if not compression_due(turn, ctx.compress_every):
        return messages
    return compress_tags(messages, ctx.keep_recent, ctx.tag_keep_chars)


def manage_context(messages: list[dict[str, Any]], turn: int, ctx: ContextSettings,
                   anchor: Optional[Anchor] = None) -> ContextStep:
    """Everything the loop calls once per turn, before sending: compress if due (periodic policy), then
    trim to budget. Given the task's anchor, a break writes it in full into the newest user message."""
    if ctx.policy == "watermark":
        size = serialized_size(messages)
        if anchor is not None and size > ctx.budget_chars:
            messages, size = anchor.with_full_anchor(messages), None
        trimmed, report = trim_with_report(messages, ctx, evict_to=ctx.low_water, size=size)
        return ContextStep(trimmed, report.strict, report)
    due = compression_due(turn, ctx.compress_every)
    compressed = compress_tags(messages, ctx.keep_recent, ctx.tag_keep_chars) if due else messages
    trimmed, report = trim_with_report(compressed, ctx)
    return ContextStep(trimmed, due, report)


def maintain(messages: list[dict[str, Any]], turn: int, ctx: ContextSettings,
             anchor: Optional[Anchor] = None) -> list[dict[str, Any]]:
    """The request to send this turn (see manage_context)."""
    return manage_context(messages, turn, ctx, anchor).messages


def output_cap(ctx: ContextSettings, kind: str, calls_in_turn: int = 1) -> int:
    """The head+tail cap for one tool output (kind: a field of ContextSettings.caps, e.g. "code_run").

    Like the reference, a turn with several calls shares the cap among them (never below 1/5 of it).
    """
    cap = getattr(ctx.caps, kind)
    return max(cap // max(calls_in_turn, 1), cap // 5)
