"""Head+tail cutting of text and of tool-call argument JSON, and the cap of one tool output (level 1 of context
control)."""
from __future__ import annotations

import json

from configs.settings import ContextSettings


def output_cap(ctx: ContextSettings, kind: str, calls_in_turn: int = 1) -> int:
    """The head+tail cap for one tool output (kind: a field of ContextSettings.caps, e.g. "code_run").

    Like the reference, a turn with several calls shares the cap among them (never below 1/5 of it).
    """
    cap = getattr(ctx.caps, kind)
    return max(cap // max(calls_in_turn, 1), cap // 5)


def cut_marker(cut: int, note: str = "") -> str:
    return f"\n[... {cut} chars cut{'; ' + note if note else ''} ...]\n"


def cut_head_tail(text: str, limit: int, note: str = "") -> str:
    """Keep the head and the tail of `text` with a marker saying how much was cut (and `note`, e.g. where
    the whole text is); len(result) <= limit.

    A text already within `limit` comes back unchanged, so cutting is idempotent.
    """
    if len(text) <= limit:
        return text
    if limit <= 0:
        return ""
    marker = _fitting_marker(len(text), limit, note)
    keep = limit - len(marker)
    if keep < 2:  # no room for a marker: a plain head is the best we can do
        return text[:limit]
    head = keep // 2
    return text[:head] + marker + text[len(text) - (keep - head):]


def _fitting_marker(total: int, limit: int, note: str) -> str:
    # The marker states the cut count, whose digit count changes the marker length: find the fixed point.
    cut = total - limit
    for _ in range(4):
        marker = cut_marker(cut, note)
        exact = total - (limit - len(marker))
        if exact == cut:
            break
        cut = exact
    return cut_marker(cut, note)


def cut_arguments(arguments: str, limit: int) -> str:
    """Shorten a tool call's JSON arguments to about `limit` chars while keeping them valid JSON.

    Long string values are cut head+tail; text that is not JSON is cut as plain text.
    Idempotent: a second pass returns its input.
    """
    if len(arguments) <= limit:
        return arguments
    try:
        value = json.loads(arguments)
    except ValueError:
        return cut_head_tail(arguments, limit)
    strings = _count_strings(value)
    if not strings:
        return arguments
    per_value = max(limit // strings, 16)
    return json.dumps(_cut_strings(value, per_value), ensure_ascii=False)


def _count_strings(value: object) -> int:
    if isinstance(value, str):
        return 1
    if isinstance(value, dict):
        return sum(_count_strings(v) for v in value.values())
    if isinstance(value, list):
        return sum(_count_strings(v) for v in value)
    return 0


def _cut_strings(value: object, limit: int) -> object:
    if isinstance(value, str):
        return cut_head_tail(value, limit)
    if isinstance(value, dict):
        return {k: _cut_strings(v, limit) for k, v in value.items()}
    if isinstance(value, list):
        return [_cut_strings(v, limit) for v in value]
    return value
