"""The character budget (level 3 of context control): stricter compression, FIFO eviction in
whole units, tool-call pairing repair, and a last-resort cut when even the newest turn is too big.
`maintain` / `manage_context` are the loop's one call per turn: compress if due, then trim to budget."""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Optional

from configs.settings import ContextSettings
from worker.context.compress import compress_tags, compress_text, compression_due
from worker.context.cut import cut_arguments
from worker.model.messages import ChatMessage

if TYPE_CHECKING:
    from worker.context.anchor import Anchor


_ANCHOR_START = re.compile(r"<(history|key_info)>")


@dataclass
class TrimReport:
    before: int  # serialized chars in
    after: int  # serialized chars out
    strict: bool = False  # the stricter compression ran
    evicted: int = 0  # messages dropped
    hard_cut: bool = False  # the newest messages had to be cut below tag level


@dataclass
class ContextStep:
    messages: list[ChatMessage]
    compressed: bool  # this turn was a compression point
    trim: TrimReport


def compress_if_due(messages: list[ChatMessage], turn: int, ctx: ContextSettings) -> list[ChatMessage]:
    """Tag-level compression on every `compress_every`-th turn; the same list otherwise."""
    if not compression_due(turn, ctx.compress_every):
        return messages
    return compress_tags(messages, ctx.keep_recent, ctx.tag_keep_chars)


def manage_context(messages: list[ChatMessage], turn: int, ctx: ContextSettings,
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


def maintain(messages: list[ChatMessage], turn: int, ctx: ContextSettings,
             anchor: Optional[Anchor] = None) -> list[ChatMessage]:
    """The request to send this turn (see manage_context)."""
    return manage_context(messages, turn, ctx, anchor).messages


def serialized_size(messages: list[ChatMessage]) -> int:
    """What the budget measures: len(json.dumps(messages, ensure_ascii=False))."""
    return len(json.dumps(messages, ensure_ascii=False))


def trim_to_budget(messages: list[ChatMessage], ctx: ContextSettings) -> list[ChatMessage]:
    """Messages within the budget_chars of `ctx` (unchanged if they already are)."""
    return trim_with_report(messages, ctx)[0]


def trim_with_report(messages: list[ChatMessage], ctx: ContextSettings, evict_to: Optional[float] = None,
                     size: Optional[int] = None) -> tuple[list[ChatMessage], TrimReport]:
    """Over budget: strict compression, then FIFO eviction to `evict_to` of the budget (default the
    setting's), then a cut of every message as a last resort. `size`: serialized_size(messages), when the
    caller has it already (the whole history is encoded to measure it)."""
    budget = ctx.budget_chars
    size = serialized_size(messages) if size is None else size
    report = TrimReport(before=size, after=size)
    if size <= budget:
        return messages, report
    target = int(budget * (ctx.evict_to if evict_to is None else evict_to))
    out = compress_tags(messages, ctx.strict_keep_recent, ctx.tag_keep_chars)
    report.strict = True
    if serialized_size(out) > target:
        out = evict_fifo(out, target)
        report.evicted = len(messages) - len(out)
    if serialized_size(out) > target:
        out = cut_to_fit(out, target, budget)
        report.hard_cut = True
    report.after = serialized_size(out)
    return out, report


def split_units(messages: list[ChatMessage]) -> list[list[ChatMessage]]:
    """Eviction units: an assistant message with tool_calls plus the tool results that follow it; any
    other message alone."""
    units: list[list[ChatMessage]] = []
    i = 0
    while i < len(messages):
        unit = [messages[i]]
        ids = _call_ids(messages[i])
        i += 1
        while ids and i < len(messages) and messages[i].get("role") == "tool" and messages[i].get("tool_call_id") in ids:
            unit.append(messages[i])
            i += 1
        units.append(unit)
    return units


def evict_fifo(messages: list[ChatMessage], target: int) -> list[ChatMessage]:
    """Drop the oldest units until the size is <= target, starting the kept part on a user message.

    The system message, the last user message and the latest exchange before it (the previous user
    message, the assistant's tool calls and their results) are never dropped.
    """
    head = messages[:1] if messages and messages[0].get("role") == "system" else []
    units = split_units(messages[len(head):])
    starts = [k for k, unit in enumerate(units) if unit[0].get("role") == "user"]
    if not starts:
        return repair_tool_pairs(messages)
    latest = _latest_start(units, starts)
    unit_sizes = [sum(_size(m) + 2 for m in unit) for unit in units]
    suffix = [0] * (len(units) + 1)
    for k in range(len(units) - 1, -1, -1):
        suffix[k] = suffix[k + 1] + unit_sizes[k]
    base = 2 + sum(_size(m) + 2 for m in head) - 2  # brackets, minus the separator the last message lacks
    chosen = next((s for s in starts if s <= latest and base + suffix[s] <= target), latest)
    return repair_tool_pairs(head + [m for unit in units[chosen:] for m in unit])


def repair_tool_pairs(messages: list[ChatMessage]) -> list[ChatMessage]:
    """Drop tool results without a directly preceding assistant tool_call, tool_calls without results,
    and any non-user message between the system message and the first user message."""
    out: list[ChatMessage] = []
    i = 0
    while i < len(messages):
        message = messages[i]
        i += 1
        if message.get("role") == "tool":
            continue  # reached only when orphaned: answered ones are consumed below
        ids = _call_ids(message)
        if not ids:
            out.append(message)
            continue
        results: list[ChatMessage] = []
        while i < len(messages) and messages[i].get("role") == "tool":
            if messages[i].get("tool_call_id") in ids and messages[i].get("tool_call_id") not in {r.get("tool_call_id") for r in results}:
                results.append(messages[i])
            i += 1
        answered = {r.get("tool_call_id") for r in results}
        offered = message.get("tool_calls") or []
        calls = [c for c in offered if c.get("id") in answered]
        if len(calls) == len(offered):
            out.append(message)
        elif calls:
            out.append({**message, "tool_calls": calls})
        elif message.get("content"):
            bare = message.copy()
            del bare["tool_calls"]
            out.append(bare)
        out.extend(results if calls else [])
    return _drop_leading_non_user(out)


def cut_to_fit(messages: list[ChatMessage], target: int, budget: Optional[int] = None) -> list[ChatMessage]:
    """Cut every message's contents to one common length limit, the largest that fits `target` (else
    `budget`). The system message and the anchor of the last user message are kept whole."""
    for goal in (target, budget if budget is not None else target):
        limit = _largest_fitting_limit(messages, goal)
        if limit is not None:
            return _cut_all(messages, limit)
    return _cut_all(messages, 0)


def _largest_fitting_limit(messages: list[ChatMessage], goal: int) -> Optional[int]:
    if serialized_size(_cut_all(messages, 0)) > goal:
        return None
    lo, hi = 0, max((_longest_text(m) for m in messages), default=0)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if serialized_size(_cut_all(messages, mid)) <= goal:
            lo = mid
        else:
            hi = mid - 1
    return lo


def _cut_all(messages: list[ChatMessage], limit: int) -> list[ChatMessage]:
    last_user = max((i for i, m in enumerate(messages) if m.get("role") == "user"), default=-1)
    return [m if m.get("role") == "system" else _cut_message(m, limit, keep_anchor=(i == last_user))
            for i, m in enumerate(messages)]


def _cut_message(message: ChatMessage, limit: int, keep_anchor: bool) -> ChatMessage:
    out = message.copy()
    content = message.get("content")
    if isinstance(content, str):
        anchor = _ANCHOR_START.search(content) if keep_anchor else None
        if anchor:
            out["content"] = compress_text(content[:anchor.start()], limit, whole=True) + content[anchor.start():]
        else:
            out["content"] = compress_text(content, limit, whole=True)
    calls = message.get("tool_calls")
    if calls:
        out["tool_calls"] = [{**c, "function": {**c["function"], "arguments": cut_arguments(c["function"]["arguments"], limit)}}
                             if isinstance((c.get("function") or {}).get("arguments"), str) else c
                             for c in calls]
    return out


def _longest_text(message: ChatMessage) -> int:
    content = message.get("content")
    lengths = [len(content)] if isinstance(content, str) else []
    lengths += [len((c.get("function") or {}).get("arguments") or "") for c in message.get("tool_calls") or []]
    return max(lengths, default=0)


def _latest_start(units: list[list[ChatMessage]], starts: list[int]) -> int:
    """The last user unit that still keeps the latest exchange (the user message before the last
    non-user unit that precedes the final user message)."""
    last = starts[-1]
    exchange = max((k for k in range(last) if units[k][0].get("role") != "user"), default=None)
    if exchange is None:
        return last
    return max((s for s in starts if s < exchange), default=last)


def _drop_leading_non_user(messages: list[ChatMessage]) -> list[ChatMessage]:
    head = 1 if messages and messages[0].get("role") == "system" else 0
    first_user = next((i for i in range(head, len(messages)) if messages[i].get("role") == "user"), len(messages))
    return messages[:head] + messages[first_user:]


def _call_ids(message: ChatMessage) -> set[str]:
    if message.get("role") != "assistant":
        return set()
    return {c.get("id") for c in message.get("tool_calls") or []}


def _size(message: ChatMessage) -> int:
    return len(json.dumps(message, ensure_ascii=False))
