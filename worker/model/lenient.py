"""Reading the arguments of a tool call the way small models write them.

Strict JSON first (raw newlines inside strings allowed). Then Python-literal syntax, which small models
reach for when a script is long: a triple-quoted `"script"` value, single-quoted strings,
`True`/`False`/`None`, mixed with JSON's `true`/`false`/`null`. Then json-repair (a missing closing brace,
a trailing comma, an unquoted key). Each step only reads: `ast.literal_eval` evaluates no code.
"""
from __future__ import annotations

import ast
import io
import json
import tokenize
from dataclasses import dataclass

import json_repair

MAX_LENIENT_CHARS = 200_000  # past this a reply is not a call a model meant: only strict JSON reads it
JSON_NAMES = {"true": "True", "false": "False", "null": "None"}


@dataclass
class Read:
    value: object  # what the text holds, unchecked (JSON or a Python literal); None when nothing could be read
    how: str = "json"  # "json", "python" (a Python literal) or "repaired" (json-repair); "" when unread
    error: str = ""  # strict JSON's complaint, for the model, when it had to be read another way or not at all

    @property
    def lenient(self) -> bool:
        return self.how not in ("", "json")


def read_value(text: str, repair: bool = True) -> Read:
    """`text` read as JSON, else as a Python literal, else (with `repair`) by json-repair."""
    try:
        return Read(json.loads(text, strict=False))
    except json.JSONDecodeError as exc:
        error = f"{exc.msg.removesuffix(' at')} at char {exc.pos}"
    except RecursionError:
        return Read(None, "", "nested too deeply")
    if len(text) > MAX_LENIENT_CHARS:
        return Read(None, "", error)
    literal = python_literal(text)
    if literal is not None:
        return Read(literal, "python", error)
    if repair:
        fixed = repaired(text)
        if fixed is not None:
            return Read(fixed, "repaired", error)
    return Read(None, "", error)


def python_literal(text: str) -> object:
    """`text` as a Python literal (dict, list, str...) with JSON's true/false/null taken as Python's; None if it
    is not one. Tokenizing first keeps those three words inside strings untouched."""
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
        tokens = [tok._replace(string=JSON_NAMES[tok.string]) if tok.type == tokenize.NAME and tok.string in JSON_NAMES
                  else tok for tok in tokens]
        return ast.literal_eval(tokenize.untokenize(tokens).strip())
    except (tokenize.TokenError, SyntaxError, ValueError, TypeError, MemoryError, RecursionError, IndentationError):
        return None


def repaired(text: str) -> object:
    """What json-repair makes of `text`: an object or a list, else None (a bare string or number is not a call).
    A string json-repair had to close itself was cut off (at max_tokens, say), and a repair with fewer letters
    than the text dropped part of it: a script cut short must not run (`rm -rf /tmp/x` cut to `rm -rf /`), so
    either makes the whole text unread."""
    try:
        value = json_repair.repair_json(text, return_objects=True)
    except (ValueError, TypeError, RecursionError, IndexError, KeyError):
        return None
    if not isinstance(value, (dict, list)) or not value:
        return None
    whole = all(_closed_in(text, string, key) for string, key in _strings(value))
    kept = _letters(json.dumps(value, ensure_ascii=False)) >= _letters(text)
    return value if whole and kept else None


def _letters(text: str) -> int:
    """Letters and digits: a repair adds quotes and braces, never words, so fewer of them means it dropped some
    of the text (a script in backquotes comes back cut at its first inner quote)."""
    return sum(ch.isalnum() for ch in text)


def _strings(value: object) -> list[tuple[str, bool]]:
    """Every string in `value`, and whether it is a key."""
    if isinstance(value, str):
        return [(value, False)]
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in [(str(k), True), *_strings(v)]]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


def _closed_in(text: str, string: str, key: bool) -> bool:
    """Whether `string` is written whole in `text`: followed by its closing quote (a key may also go unquoted,
    followed by its colon)."""
    if not string:
        return True
    for form in {json.dumps(string, ensure_ascii=False)[1:-1], string}:
        at = text.find(form)
        while at >= 0:
            after = text[at + len(form):].lstrip(" \t") if key else text[at + len(form):]
            if after[:1] in ('"', "'") or (key and after[:1] == ":"):
                return True
            at = text.find(form, at + 1)
    return False
