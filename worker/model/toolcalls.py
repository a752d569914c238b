"""Tool calls however a model writes them in its text, and the results it must not write itself.

Small models behind servers that do not turn their output into `tool_calls` write the call in the
content instead. Recognised forms (in either tool mode):

- `<tool_use>{"name": ..., "arguments": {...}}</tool_use>` (ga's text protocol, worker/model/textproto.py);
- `<tool_call>{"name": ..., "arguments": {...}}</tool_call>` (Qwen/Hermes chat templates);
- a fenced block (```json, ```tool_call or bare ```) holding {"name": KNOWN_TOOL, "arguments": {...}}
  (or "parameters", or a list of such objects), or a whole reply that is such an object.

Tags are explicit, so a tag block is always a call (an unknown name gets the loop's "unknown tool"
error). A fenced or bare object is a call only when it names a known tool, so an answer that shows
JSON stays an answer. Something that looks like a call but does not parse becomes a call carrying a
`problem`, which the loop answers with a short error like any malformed call.

A model that writes `<tool_result>` (or Qwen's `<tool_response>`) itself is inventing output: the
reply is cut at the first such tag (`cut_invented_results`), whatever the mode.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Iterable

from worker.model.textproto import parse_block

INVENTED_RESULT = re.compile(r"<\s*tool_(?:result|response)\b", re.I)
TAG_BLOCK = re.compile(r"<(tool_use|tool_call)>(.*?)(?:</\1>|\Z)", re.S)
FENCE = re.compile(r"```[ \t]*([A-Za-z_]*)[ \t]*\n(.*?)(?:\n[ \t]*```|\Z)", re.S)
NAME_FIELD = re.compile(r'"name"\s*:\s*"([^"]*)"')
ARGS_FIELD = re.compile(r'"(?:arguments|parameters)"\s*:')
FENCE_LANGS = {"", "json", "tool_call", "tool_use", "javascript", "js"}
INVALID_NAME = "invalid_tool_call"  # the name recorded for a call whose name could not be read


@dataclass
class ContentCall:
    name: str
    arguments: str  # JSON text of the arguments object
    problem: str = ""  # set when the block looked like a call but could not be read


@dataclass
class Extracted:
    text: str  # the content without the call blocks
    calls: list[ContentCall] = field(default_factory=list)


def cut_invented_results(content: str) -> tuple[str, bool]:
    """(content up to the first tool-result tag the model wrote itself, whether anything was cut)."""
    found = INVENTED_RESULT.search(content or "")
    if not found:
        return content, False
    return content[:found.start()].rstrip(), True


def extract_calls(content: str, known: Iterable[str]) -> Extracted:
    """Tool calls written in `content`, in order, and the text that remains around them."""
    known = set(known)
    spans: list[tuple[int, int, list[ContentCall]]] = []
    for match in TAG_BLOCK.finditer(content):
        spans.append((match.start(), match.end(), [_from_tag(match.group(2).strip())]))
    for match in FENCE.finditer(content):
        if any(s <= match.start() < e for s, e, _ in spans):
            continue
        if match.group(1).lower() not in FENCE_LANGS:
            continue
        calls = _from_json_text(match.group(2).strip(), known)
        if calls:
            spans.append((match.start(), match.end(), calls))
    if not spans:
        stripped = content.strip()
        if stripped.startswith(("{", "[")):
            calls = _from_json_text(stripped, known)
            if calls:
                return Extracted("", calls)
        return Extracted(content)
    spans.sort(key=lambda span: span[0])
    text, calls, position = [], [], 0
    for start, end, found in spans:
        text.append(content[position:start])
        calls.extend(found)
        position = end
    text.append(content[position:])
    return Extracted(re.sub(r"\n{3,}", "\n\n", "".join(text)).strip(), calls)


def native_message(text: str, calls: list[tuple[str, ContentCall]]) -> dict[str, Any]:
    """The assistant message a content call is recorded as in native mode: a real `tool_calls`
    entry, so the next request is an ordinary call/result exchange (an unreadable call gets empty
    arguments: servers parse the arguments of past calls to render their chat template)."""
    return {"role": "assistant", "content": text or None, "tool_calls": [
        {"id": call_id, "type": "function",
         "function": {"name": call.name or INVALID_NAME, "arguments": call.arguments if _is_object(call) else "{}"}}
        for call_id, call in calls]}


def _is_object(call: ContentCall) -> bool:
    return not call.problem and isinstance(_loads(call.arguments)[0], dict)


# ---- one block ------------------------------------------------------------------------------


def _from_tag(inner: str) -> ContentCall:
    data, error = _loads(inner)
    if isinstance(data, dict):
        call = _from_object(data)
        if call is not None:
            return call
        return ContentCall(_name_in(inner), "{}", 'a tool call needs {"name": TOOL, "arguments": {...}}')
    name, raw = parse_block(inner)
    if name:  # the arguments pass through as written: the loop reports their JSON error
        return ContentCall(name, raw)
    return ContentCall("", "{}", f"the tool call is not valid JSON ({error}); "
                       'write {"name": TOOL, "arguments": {...}} with the arguments as a JSON object')


def _from_json_text(text: str, known: set[str]) -> list[ContentCall]:
    """Calls in a fenced block or a bare reply; [] when it is not a call to a known tool."""
    data, error = _loads(text)
    if data is None:
        name = _name_in(text)
        if name in known and ARGS_FIELD.search(text):
            return [ContentCall(name, "{}", f"the {name} call in your reply is not valid JSON ({error}); "
                                "write it again as one JSON object, or call the tool natively")]
        return []
    items = data if isinstance(data, list) else [data]
    calls = [_from_object(item) if isinstance(item, dict) else None for item in items]
    if not calls or any(c is None or c.name not in known for c in calls):
        return []
    return [c for c in calls if c is not None]


def _from_object(data: dict[str, Any]) -> ContentCall | None:
    if isinstance(data.get("function"), dict):  # {"type": "function", "function": {...}}
        data = data["function"]
    name = data.get("name")
    if not isinstance(name, str) or not ("arguments" in data or "parameters" in data or len(data) == 1):
        return None
    args = data.get("arguments", data.get("parameters", {}))
    if isinstance(args, str):
        parsed, error = _loads(args or "{}")
        if not isinstance(parsed, dict):
            return ContentCall(name, "{}", f"arguments of {name} are not a JSON object ({error or 'not an object'})")
        return ContentCall(name, args)
    if not isinstance(args, dict):
        return ContentCall(name, "{}", f"arguments of {name} must be a JSON object")
    return ContentCall(name, json.dumps(args, ensure_ascii=False))


def _loads(text: str) -> tuple[Any, str]:
    """JSON allowing raw newlines inside strings (small models write multi-line scripts that way)."""
    try:
        return json.loads(text, strict=False), ""
    except json.JSONDecodeError as exc:
        return None, f"{exc.msg} at char {exc.pos}"


def _name_in(text: str) -> str:
    found = NAME_FIELD.search(text)
    return found.group(1) if found else ""
