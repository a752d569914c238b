"""Context control: keeps a worker's request dense and under budget however long it runs.

Per turn, before asking the model (the history ends with the anchor user message of the last turn):

    request = maintain(messages, turn, ctx)   # compress if due, then trim to budget; send this
    ... messages = request + [reply, tool results, {"role": "user", "content": anchor.render(turn, key_info)}]

(`maintain(messages, turn, ctx, anchor)` under the watermark policy, so a break can restore
the full anchor.)

`manage_context` does the same and also reports what happened (compression point, evictions, sizes).

Levels (docs/design.md §1): cut.py caps one tool output, compress.py cuts old tags, budget.py enforces the
character budget (and holds the per-turn step, maintain), anchor.py renders the working-memory anchor.

Two policies (`context.policy`):
- "watermark" (default): nothing old is touched while the request fits the budget, so every request
  extends the previous one byte for byte and a provider's prompt cache serves all of it. When the
  budget is crossed, one large step (strict compression, then FIFO eviction down to `low_water` of
  the budget) makes room for many turns before the next break.
- "periodic": the reference's rhythm: old tags compressed every `compress_every` turns, and when over
  budget the same step down to `evict_to`. Each compression point breaks the cached prefix.
"""
from __future__ import annotations

from worker.context.anchor import Anchor, anchor_message, render_anchor, summarize_call, turn_line
from worker.context.budget import (
    ContextStep,
    TrimReport,
    compress_if_due,
    cut_to_fit,
    evict_fifo,
    maintain,
    manage_context,
    repair_tool_pairs,
    serialized_size,
    split_units,
    trim_to_budget,
    trim_with_report,
)
from worker.context.compress import compress_message, compress_tags, compress_text, compression_due
from worker.context.cut import cut_arguments, cut_head_tail, output_cap

__all__ = [
    "Anchor", "ContextStep", "TrimReport", "anchor_message", "compress_if_due", "compress_message",
    "compress_tags", "compress_text", "compression_due", "cut_arguments", "cut_head_tail", "cut_to_fit",
    "evict_fifo", "manage_context", "output_cap", "render_anchor", "repair_tool_pairs", "serialized_size",
    "maintain", "split_units", "summarize_call", "trim_to_budget", "trim_with_report", "turn_line",
]

