"""The chat messages ga sends a model and keeps in its histories (OpenAI's format), and the tool schemas it offers.

Both are ga's own: the loop builds every message (the assistant's from worker/model/replies.py's reading of a
reply) and every schema (worker/tools). A history read back from disk is JSON from outside until checked.
"""
from __future__ import annotations

from typing import Optional, TypedDict, Union

from typing_extensions import Required, TypeGuard  # typing's own from Python 3.11 (3.10)

# a JSON Schema (a tool's parameters): ga writes them; what reads one checks each value's type
JSONSchema = dict[str, object]


class FunctionCall(TypedDict):
    name: str
    arguments: str  # the JSON text of the arguments


class MessageToolCall(TypedDict):
    id: str
    type: str  # "function"
    function: FunctionCall


# a message's content: text, or a list of content parts (text, images), or None (an assistant's bare calls)
Content = Optional[Union[str, list[dict[str, object]]]]


class ChatMessage(TypedDict, total=False):
    role: Required[str]  # system, user, assistant or tool
    content: Content
    tool_calls: list[MessageToolCall]  # an assistant's native calls
    tool_call_id: str  # a tool message: the call it answers
    name: str


class ToolFunction(TypedDict, total=False):
    name: Required[str]
    description: str
    parameters: JSONSchema


class ToolSchema(TypedDict):
    type: str  # "function"
    function: ToolFunction


def is_messages(value: object) -> TypeGuard[list[ChatMessage]]:
    """Whether `value` (read back from a history file) is a list of chat messages: each an object with a text
    `role`, its `content` text, parts or null, its `tool_calls` a list of calls with a name and text arguments."""
    return isinstance(value, list) and all(_is_message(m) for m in value)


def _is_message(value: object) -> bool:
    if not isinstance(value, dict) or not isinstance(value.get("role"), str):
        return False
    if not isinstance(value.get("content"), (str, list, type(None))):
        return False
    calls = value.get("tool_calls", [])
    return isinstance(calls, list) and all(_is_call(c) for c in calls)


def _is_call(value: object) -> bool:
    if not isinstance(value, dict) or not isinstance(value.get("id"), str):
        return False
    function = value.get("function")
    return isinstance(function, dict) and isinstance(function.get("name"), str) and \
        isinstance(function.get("arguments"), str)
