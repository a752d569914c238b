"""The text tool protocol for endpoints without function calling.

The model writes `<tool_use>{"name": ..., "arguments": {...}}</tool_use>` blocks in its reply; results
go back as `<tool_result id="...">...</tool_result>` in a user message. Shared by the client
(worker/model/client.py) and the scripted server, so both speak exactly the same format.
"""
from __future__ import annotations

import json
import re

from worker.model.messages import ChatMessage, ToolSchema

TOOL_USE = re.compile(r"<tool_use>(.*?)(?:</tool_use>|\Z)", re.S)
ARGUMENTS_KEY = re.compile(r'"arguments"\s*:\s*')
NAME_KEY = re.compile(r'"name"\s*:\s*"([^"]*)"')


def format_tool_use(name: str, arguments: str) -> str:
    """One block; `arguments` is JSON text spliced in as-is (so malformed text stays malformed)."""
    return f'<tool_use>{{"name": {json.dumps(name)}, "arguments": {arguments or "{}"}}}</tool_use>'


def parse_tool_uses(content: str) -> tuple[str, list[tuple[str, str]]]:
    """(content without the blocks, [(name, arguments JSON text)]). Arguments pass through untouched
    when the block is not valid JSON: reporting a malformed call is the loop's job, not ours."""
    calls = [parse_block(match.group(1).strip()) for match in TOOL_USE.finditer(content)]
    return TOOL_USE.sub("", content).strip(), calls


def parse_block(inner: str) -> tuple[str, str]:
    try:
        data = json.loads(inner)
    except json.JSONDecodeError:
        data = None
    if isinstance(data, dict) and isinstance(data.get("name"), str):
        args = data.get("arguments", {})
        return data["name"], args if isinstance(args, str) else json.dumps(args, ensure_ascii=False)
    name = NAME_KEY.search(inner)
    key = ARGUMENTS_KEY.search(inner)
    raw = inner[key.end():].rstrip() if key else inner
    if key and raw.endswith("}"):
        raw = raw[:-1].rstrip()  # the closing brace of the outer {"name":..., "arguments":...}
    return (name.group(1) if name else ""), raw


def protocol_block(tools: list[ToolSchema]) -> str:
    """How to call tools, then one compact signature line per tool."""
    lines = [
        "## Tools",
        "To call a tool, write one block per call (several allowed, run in order):",
        '<tool_use>{"name": "TOOL", "arguments": {...}}</tool_use>',
        "Results come back in <tool_result> blocks. Answer without any block when you are done.",
    ]
    for spec in tools:
        func = spec["function"]
        params = func.get("parameters") or {}
        required = params.get("required")
        needed = set(required) if isinstance(required, list) else set()
        properties = params.get("properties")
        found = properties.items() if isinstance(properties, dict) else []
        args = [_signature_arg(str(name), prop, name in needed) for name, prop in found]
        lines.append(f"- {func['name']}({', '.join(args)}): {func.get('description', '').strip()}")
    return "\n".join(lines)


def _signature_arg(name: str, prop: object, required: bool) -> str:
    text = f"{name}: {_type_of(prop)}"
    if isinstance(prop, dict) and "default" in prop:
        text += f" = {json.dumps(prop['default'])}"
    elif not required:
        text += "?"
    return text


def _type_of(prop: object) -> str:
    if not isinstance(prop, dict):
        return "any"
    if "enum" in prop:
        return "|".join(json.dumps(v) for v in prop["enum"])
    if "anyOf" in prop:
        kinds = [_type_of(p) for p in prop["anyOf"] if not (isinstance(p, dict) and p.get("type") == "null")]
        return "|".join(kinds) or "any"
    kind = prop.get("type", "any")
    if kind == "array":
        return f"array[{_type_of(prop.get('items', {}))}]"
    return kind if isinstance(kind, str) else "|".join(kind)


def to_text_messages(messages: list[ChatMessage]) -> list[ChatMessage]:
    """Rewrite native-format history for a text-protocol endpoint: tool calls become blocks in the
    assistant text, tool results become user messages, consecutive user messages are merged (many
    chat templates require alternating roles). Deterministic, so successive prefixes stay equal."""
    out: list[ChatMessage] = []
    for msg in messages:
        role = msg["role"]
        sent: ChatMessage
        if role == "assistant":
            content = msg.get("content")
            text = content if isinstance(content, str) else ""
            blocks = [format_tool_use(c["function"]["name"], c["function"].get("arguments", "")) for c in msg.get("tool_calls") or []]
            missing = [b for b in blocks if b not in text]
            sent = {"role": "assistant", "content": "\n".join(filter(None, [text, *missing]))}
        elif role == "tool":
            name = f' name="{msg.get("name")}"' if msg.get("name") else ""
            sent = {"role": "user", "content": f'<tool_result id="{msg.get("tool_call_id", "")}"{name}>\n{msg.get("content", "")}\n</tool_result>'}
        else:
            sent = msg.copy()
        if out and role in ("user", "tool") and out[-1]["role"] == "user" and _is_text(out[-1]) and _is_text(sent):
            out[-1] = {"role": "user", "content": f"{out[-1].get('content')}\n\n{sent.get('content')}"}
        else:
            out.append(sent)
    return out


def _is_text(msg: ChatMessage) -> bool:
    return isinstance(msg.get("content"), str)
