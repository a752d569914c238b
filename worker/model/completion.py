"""Is a 200's body a chat completion? `parse_completion` says what it is instead, in a few words.

The check is about the envelope only (JSON, `choices[0].message`, the types of the fields the client
reads), lenient about everything else: local servers omit `id`, `created` or `usage` and add fields.
The checked reply is what the client reads (attributes as in the openai SDK's ChatCompletion, extra
fields such as `finish_reason` included): the SDK's types are not imported (~0.3 s in every worker).
"""
from __future__ import annotations

import json
from typing import Any, Optional, Union

from pydantic import BaseModel, ConfigDict, Field, StrictInt, StrictStr, ValidationError

from configs.usererrors import validation_line


class NotACompletion(ValueError):
    """The body is not a chat completion; str() says what it is (a few words, no body text)."""


class _Loose(BaseModel):
    model_config = ConfigDict(extra="allow")


class _Function(_Loose):
    name: Optional[StrictStr] = None
    arguments: Union[StrictStr, dict[str, Any], None] = None


class _ToolCall(_Loose):
    id: Optional[StrictStr] = None
    function: Optional[_Function] = None


class _Message(_Loose):
    content: Optional[StrictStr] = None
    tool_calls: Optional[list[_ToolCall]] = None


class _Choice(_Loose):
    message: _Message


class _Details(_Loose):
    cached_tokens: Optional[StrictInt] = None


class _Usage(_Loose):
    prompt_tokens: Optional[StrictInt] = None
    completion_tokens: Optional[StrictInt] = None
    prompt_tokens_details: Optional[_Details] = None
    prompt_cache_hit_tokens: Optional[StrictInt] = None


class Completion(_Loose):
    choices: list[_Choice] = Field(min_length=1)
    usage: Optional[_Usage] = None


def parse_completion(body: bytes, content_type: str = "") -> Completion:
    """The body as a checked Completion, or NotACompletion."""
    try:
        text = body.decode("utf-8-sig").strip()
    except UnicodeDecodeError:
        raise NotACompletion("bytes that are not UTF-8 text") from None
    if not text:
        raise NotACompletion("an empty body")
    if "html" in content_type.lower() or text[:1] == "<":
        raise NotACompletion(f"an HTML page ({len(body):,} bytes)")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise NotACompletion(f"invalid JSON: {exc.msg.removesuffix(' at')} at character {exc.pos}") from None
    except RecursionError:
        raise NotACompletion("JSON nested too deeply") from None
    if not isinstance(data, dict):
        raise NotACompletion(f"JSON {type(data).__name__}, not an object")
    try:
        return Completion.model_validate(data)
    except ValidationError as exc:
        raise NotACompletion(f"JSON of the wrong shape ({validation_line(exc)})") from None
