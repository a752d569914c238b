"""Tag-level compression of old messages (level 2 of context control).

Old <thinking>/<tool_use>/<tool_result> contents are cut head+tail, old <history>/<key_info>
anchors become placeholders, plain tool results and tool-call arguments are cut too.
Compression is idempotent and only rewrites messages outside the exempt newest window, so
between two compression points every request extends the previous one byte for byte.
"""
from __future__ import annotations

import re
from typing import Callable

from worker.context.cut import cut_arguments, cut_head_tail
from worker.model.messages import ChatMessage, Content, MessageToolCall

CUT_TAGS = ("thinking", "think", "tool_use", "tool_result")
ANCHOR_TAGS = ("history", "key_info", "earlier_context")
PLACEHOLDER = "[old]"

# group 1: the tag name, 2: its attributes (kept, e.g. <tool_result id="c1">), 3: the content
_CUT_RE = re.compile(r"<(" + "|".join(CUT_TAGS) + r")((?:\s[^>]*)?)>([\s\S]*?)</\1>")
_ANCHOR_RE = re.compile(r"<(" + "|".join(ANCHOR_TAGS) + r")((?:\s[^>]*)?)>([\s\S]*?)</\1>")
_OPENERS = tuple("<" + tag for tag in CUT_TAGS + ANCHOR_TAGS)


def compress_text(text: str, max_len: int, whole: bool = False) -> str:
    """Placeholders for anchor blocks, head+tail cuts inside the other tags (and of the whole text
    if `whole`). Returns a fixed point, so compressing twice changes nothing."""
    if not any(opener in text for opener in _OPENERS):  # the common case, and much cheaper than the regexes
        return cut_head_tail(text, max_len) if whole else text
    for _ in range(5):  # a cut can join two halves of quoted tags into a new pair: repeat until stable
        new = _ANCHOR_RE.sub(lambda m: f"<{m[1]}{m[2]}>{PLACEHOLDER}</{m[1]}>", text)
        new = _CUT_RE.sub(lambda m: f"<{m[1]}{m[2]}>{cut_head_tail(m[3], max_len)}</{m[1]}>", new)
        if whole:
            new = cut_head_tail(new, max_len)
        if new == text:
            break
        text = new
    return text


def compress_message(message: ChatMessage, max_len: int) -> ChatMessage:
    """The compressed form of one old message (the same object when nothing changes)."""
    content = message.get("content")
    whole = message.get("role") == "tool"
    new_content = _map_text(content, lambda t: compress_text(t, max_len, whole))
    calls = message.get("tool_calls")
    new_calls = [_cut_call(c, max_len) for c in calls] if calls else calls
    if new_content == content and new_calls == calls:
        return message
    out: ChatMessage = {**message, "content": new_content}
    if new_calls:
        out["tool_calls"] = new_calls
    return out


def compress_tags(messages: list[ChatMessage], keep_recent: int, max_len: int) -> list[ChatMessage]:
    """Compress every non-system message older than the exempt window; returns a new list.

    The exempt window is the `keep_recent` newest messages, widened to the whole latest turn
    (from the last assistant message on) so results the model has not seen yet stay intact.
    """
    stop = exempt_start(messages, keep_recent)
    return [m if i >= stop or m.get("role") == "system" else compress_message(m, max_len)
            for i, m in enumerate(messages)]


def exempt_start(messages: list[ChatMessage], keep_recent: int) -> int:
    stop = max(len(messages) - keep_recent, 0)
    last_assistant = max((i for i, m in enumerate(messages) if m.get("role") == "assistant"), default=len(messages))
    return min(stop, last_assistant)


def compression_due(turn: int, every: int) -> bool:
    return every > 0 and turn > 0 and turn % every == 0


def _cut_call(call: MessageToolCall, max_len: int) -> MessageToolCall:
    function = call["function"]
    arguments = function.get("arguments")
    if not isinstance(arguments, str):  # a history read back may hold anything
        return call
    cut = cut_arguments(arguments, max_len)
    return call if cut == arguments else {**call, "function": {**function, "arguments": cut}}


def _map_text(content: Content, fn: Callable[[str], str]) -> Content:
    """Apply fn to a string content or to the text parts of a multi-part content."""
    if isinstance(content, str):
        return fn(content)
    if isinstance(content, list):
        parts = [_map_part(p, fn) for p in content]
        return content if parts == content else parts
    return content


def _map_part(part: dict[str, object], fn: Callable[[str], str]) -> dict[str, object]:
    text = part.get("text") if isinstance(part, dict) else None
    return dict(part, text=fn(text)) if isinstance(text, str) else part
