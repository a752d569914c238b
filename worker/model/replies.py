"""How one assistant reply is read: its tool calls (native, or written in the text) and the message
that goes into the history, so the next request is an ordinary, well-formed exchange."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Optional

from worker.model.textproto import new_call_id
from worker.model.toolcalls import (
    Extracted,
    cut_invented_results,
    extract_calls,
    native_message,
)
from worker.types import ToolCall


@dataclass
class Interpreted:
    text: str  # the reply's text without call blocks: the answer when there are no calls
    calls: list[ToolCall]
    message: dict[str, Any]  # the assistant message for the history
    raw: Optional[str] = None  # the content as received, when `message` differs from it
    notes: list[str] = field(default_factory=list)


def interpret(content: str, native_calls: list[ToolCall], tool_mode: str, known: Iterable[str]) -> Interpreted:
    """`native_calls` win when present (native mode); otherwise calls are read from the text.
    Anything from the first tool-result tag the model wrote itself on is dropped."""
    notes: list[str] = []
    kept, cut = cut_invented_results(content or "")
    if cut:
        notes.append(f"cut {len(content) - len(kept)} chars from the first <tool_result> the model wrote itself")
    if tool_mode == "native" and native_calls:
        message: dict[str, Any] = {"role": "assistant", "content": kept or None, "tool_calls": [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}} for c in native_calls]}
        return Interpreted(kept, native_calls, message, content if cut else None, notes)
    known = list(known)
    found = extract_calls(kept, known) if known else Extracted(kept)  # no tools offered: nothing to call
    with_ids = [(new_call_id(), call) for call in found.calls]
    calls = [ToolCall(call_id, call.name, call.arguments, call.problem) for call_id, call in with_ids]
    if tool_mode == "native" and calls:
        notes.append(f"read {len(calls)} tool call(s) from the reply's text")
        unreadable = any(c.problem or c.arguments != m["function"]["arguments"]
                         for c, m in zip(calls, native_message(found.text, with_ids)["tool_calls"], strict=True))
        shown = kept if unreadable else found.text  # the model sees what it wrote wrong
        return Interpreted(found.text, calls, native_message(shown, with_ids), content, notes)
    message = {"role": "assistant", "content": kept}
    return Interpreted(found.text if calls else kept, calls, message, content if cut else None, notes)
