"""How one reply is read: is the body a chat completion, which tool calls it carries (native, or
written in its text), and what the loop must not take at face value.

The envelope. `parse_completion` checks a 200's body (JSON, `choices[0].message`, the types of the
fields the client reads), lenient about everything else: local servers omit `id`, `created` or
`usage` and add fields. What it returns reads like the openai SDK's ChatCompletion (extra fields
such as `finish_reason` included); the SDK's types are not imported (~0.3 s in every worker).

Tool calls in the text. Small models behind servers that do not turn their output into `tool_calls`
write the call in the content instead. Recognised forms (in either tool mode):

- `<tool_use>{"name": ..., "arguments": {...}}</tool_use>` (ga's text protocol, worker/model/textproto.py);
- `<tool_call>{"name": ..., "arguments": {...}}</tool_call>` (Qwen/Hermes chat templates);
- a fenced block (```json, ```tool_call or bare ```) holding {"name": KNOWN_TOOL, "arguments": {...}}
  (or "parameters", or a list of such objects), or a whole reply that is such an object.

Tags are explicit, so a tag block is always a call (an unknown name gets the loop's "unknown tool"
error). A fenced or bare object is a call only when it names a known tool, so an answer that shows
JSON stays an answer. Something that looks like a call but does not parse becomes a call carrying a
`problem`, which the loop answers with a short error like any malformed call. A model that writes
`<tool_result>` (or Qwen's `<tool_response>`) itself is inventing output: the reply is cut at the
first such tag, whatever the mode. `interpret` gives the calls and the message that goes into the
history, so the next request is an ordinary, well-formed exchange.

Guards. Replies the loop must not take at face value (`repetition`: a model stuck repeating itself)
and a server saying the request does not fit its context window (`is_context_overflow`).
"""
from __future__ import annotations

import ast
import json
import re
import uuid
import zlib
from dataclasses import dataclass, field
from typing import Iterable, Optional, Union

from pydantic import BaseModel, ConfigDict, Field, StrictInt, StrictStr, ValidationError

from memory_shared.jsontypes import JSONObject
from memory_shared.usererrors import validation_line
from worker.model.callshape import is_script_tool
from worker.model.codeblocks import needs_script, recovered_script, with_script
from worker.model.lenient import MAX_LENIENT_CHARS, read_value
from worker.model.messages import ChatMessage, ToolSchema
from worker.model.textproto import format_tool_use
from worker.usage import Usage


@dataclass
class ToolCall:
    id: str
    name: str
    arguments: str  # the JSON text of the arguments: as the model sent it, or as ga read it (worker/model/lenient.py)
    problem: str = ""  # the call could not be read: why, for the error the loop sends back
    script_hint: str = ""  # an unreadable call to a script tool: its script as far as it could be read
    kind: str = ""  # that script's type (python, bash, javascript) when known


@dataclass
class Reply:
    content: str
    tool_calls: list[ToolCall]
    usage: Usage
    message: ChatMessage  # the assistant message, OpenAI format, as it goes into the history
    latency: float = 0.0
    finish_reason: str = ""  # "length": cut at max_tokens
    raw: Optional[str] = None  # the content as received, when the message above was reinterpreted from it
    notes: list[str] = field(default_factory=list)  # what the interpretation did (e.g. cut an invented result)

    def problem(self) -> str:
        """Why the loop cannot take this reply (runaway repetition, an answer cut at max_tokens), or ""."""
        for text in [self.raw if self.raw is not None else self.content, *(c.arguments for c in self.tool_calls)]:
            found = repetition(text or "")
            if found:
                return f"your reply was discarded: {found}; write it once, then continue"
        if self.finish_reason == "length" and not self.tool_calls:
            return ("your reply was cut at the max_tokens limit; answer shorter, or write long output to a file "
                    "with file_write in several calls")
        return ""


def tool_parameters(tools: list[ToolSchema]) -> dict[str, list[str]]:
    """Each offered tool's parameter names, required ones first (the order a model writes them in a call)."""
    found = {}
    for schema in tools:
        func = schema["function"]
        params = func.get("parameters") or {}
        properties, listed = params.get("properties"), params.get("required")
        names = [str(name) for name in properties] if isinstance(properties, dict) else []
        required = [n for n in listed if n in names] if isinstance(listed, list) else []
        found[func["name"]] = required + [n for n in names if n not in required]
    return found


def new_call_id() -> str:
    return f"call_{uuid.uuid4().hex[:12]}"


# ---- the envelope ---------------------------------------------------------------------------


class NotACompletion(ValueError):
    """The body is not a chat completion; str() says what it is (a few words, no body text)."""


class _Loose(BaseModel):
    model_config = ConfigDict(extra="allow")


class _Function(_Loose):
    name: Optional[StrictStr] = None
    arguments: Union[StrictStr, JSONObject, None] = None


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


# ---- tool calls -----------------------------------------------------------------------------


@dataclass
class Interpreted:
    text: str  # the reply's text without call blocks: the answer when there are no calls
    calls: list[ToolCall]
    message: ChatMessage  # the assistant message for the history
    raw: Optional[str] = None  # the content as received, when `message` differs from it
    notes: list[str] = field(default_factory=list)


def interpret(content: str, native_calls: list[ToolCall], tool_mode: str, known: Iterable[str]) -> Interpreted:
    """`native_calls` win when present (native mode); otherwise calls are read from the text. Either way a
    call's arguments are read leniently and a script tool's missing script comes from the reply's code block.
    Anything from the first tool-result tag the model wrote itself on is dropped."""
    notes: list[str] = []
    kept, cut = cut_invented_results(content or "")
    if cut:
        notes.append(f"cut {len(content) - len(kept)} chars from the first <tool_result> the model wrote itself")
    if tool_mode == "native" and native_calls:
        mended = [_mend_native(call, kept, notes) for call in native_calls]
        message: ChatMessage = {"role": "assistant", "content": kept or None, "tool_calls": [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": shown}} for c, shown in mended]}
        return Interpreted(kept, [c for c, _ in mended], message, content if cut else None, notes)
    found = extract_calls(kept, known) if known else Extracted(kept)  # no tools offered: nothing to call
    for span in found.spans:
        span.calls = [_filled(call, found.text, notes) for call in span.calls]
    found.calls = [call for span in found.spans for call in span.calls]
    if not found.calls:
        return Interpreted(kept, [], {"role": "assistant", "content": kept}, content if cut else None, notes)
    calls: list[ToolCall] = []
    shown_calls: list[tuple[str, ContentCall]] = []
    for call in found.calls:
        call_id = new_call_id()
        calls.append(ToolCall(call_id, call.name, call.arguments, call.problem, call.script_hint, call.kind))
        shown_calls.append((call_id, call))
        if call.how in ("python", "repaired"):
            notes.append(f"read the {call.name} call leniently ({'a Python literal' if call.how == 'python' else 'json-repair'})")
    if tool_mode == "native":
        notes.append(f"read {len(calls)} tool call(s) from the reply's text")
        return Interpreted(found.text, calls, native_message(found.history_text("native"), shown_calls), content, notes)
    text = found.history_text("text")
    message = {"role": "assistant", "content": text}
    return Interpreted(found.text, calls, message, content if cut or text != kept else None, notes)


UNREADABLE_MARK = "[an unreadable {name} call was here: see the error in its result]"  # in the history

INVENTED_RESULT = re.compile(r"<\s*tool_(?:result|response)\b", re.I)
TAG_BLOCK = re.compile(r"<(tool_use|tool_call)>(.*?)(?:</\1>|\Z)", re.S)
FENCE = re.compile(r"```[ \t]*([A-Za-z_]*)[ \t]*\n(.*?)(?:\n[ \t]*```|\Z)", re.S)
NAME_FIELD = re.compile(r"""["']name["']\s*:\s*["']([^"']*)["']""")
ARGS_FIELD = re.compile(r"""["'](?:arguments|parameters|script)["']\s*:""")
FENCE_LANGS = {"", "json", "tool_call", "tool_use", "javascript", "js"}
CALL_FENCE_LANGS = {"", "python", "py", "python3"}  # a block that is one call in function syntax, file_read(path=...)
CALL_KEYS = {"name", "arguments", "parameters", "type", "id"}  # the keys of an object that is a call and no more
INVALID_NAME = "invalid_tool_call"  # the name recorded for a call whose name could not be read


@dataclass
class ContentCall:
    name: str
    arguments: str  # JSON text of the arguments object that runs
    problem: str = ""  # set when the block looked like a call but could not be read
    how: str = "json"  # how it was read: json, python, repaired, block (script from a code block)
    script_hint: str = ""  # an unreadable call: its script as far as it could be dug out (for the error's shape)
    kind: str = ""  # the script's type when known
    written: Optional[str] = None  # the arguments the history shows, when they differ from `arguments`
    as_written: bool = True  # read as the model wrote it (strict JSON); False: read leniently, or not at all

    @property
    def shown(self) -> str:
        return self.written if self.written is not None else self.arguments


@dataclass
class Span:
    start: int
    end: int
    calls: list[ContentCall]


@dataclass
class Extracted:
    text: str  # the content without the call blocks
    calls: list[ContentCall] = field(default_factory=list)
    content: str = ""
    spans: list[Span] = field(default_factory=list)

    def history_text(self, mode: str) -> str:
        """The reply as it goes into the history. A call block read as written stays as written in text mode (in
        native mode its call is a tool_calls entry); one read leniently is written out as ga read it, so the
        model sees the right form; an unreadable one is replaced by a marker, so it is not copied."""
        parts, position = [], 0
        for span in self.spans:
            parts.append(self.content[position:span.start])
            position = span.end
            if mode == "text" and all(c.as_written for c in span.calls):
                parts.append(self.content[span.start:span.end])
                continue
            lines = []
            for call in span.calls:
                if call.problem:
                    lines.append(UNREADABLE_MARK.format(name=call.name or "tool"))
                elif mode == "text":
                    lines.append(format_tool_use(call.name, call.shown))
            parts.append("\n".join(lines))
        parts.append(self.content[position:])
        return re.sub(r"\n{3,}", "\n\n", "".join(parts)).strip()


def cut_invented_results(content: str) -> tuple[str, bool]:
    """(content up to the first tool-result tag the model wrote itself, whether anything was cut)."""
    found = INVENTED_RESULT.search(content or "")
    if not found:
        return content, False
    return content[:found.start()].rstrip(), True


def invented_call(content: str) -> str:
    """The tool a reply made of nothing but one call-shaped object calls (`{"name": ..., "arguments": {...}}`, bare
    or as its one fenced block), or "". extract_calls takes the calls to known tools, so such a reply names a tool
    that does not exist (the live 0.5B answered `{"name": "sum_of_ids", "arguments": {"status": "ok"}}`)."""
    body = content.strip()
    fenced = FENCE.fullmatch(body)
    if fenced and fenced.group(1).lower() in FENCE_LANGS:
        body = fenced.group(2).strip()
    value = read_value(body, repair=False).value if body.startswith("{") else None
    if not isinstance(value, dict) or not isinstance(value.get("name"), str) or not CALL_KEYS.issuperset(value) \
            or not {"arguments", "parameters"} & value.keys():
        return ""
    return value["name"]


def extract_calls(content: str, known: Iterable[str]) -> Extracted:
    """Tool calls written in `content`, in order, and the text that remains around them. `known`: the tool names,
    or a mapping of each name to its parameter names in order (to read `ask_user("...")`, written as a call)."""
    params: dict[str, list[str]] = {k: list(v) for k, v in known.items()} if isinstance(known, dict) else {}
    known = set(known)
    spans: list[Span] = []
    for match in TAG_BLOCK.finditer(content):
        spans.append(Span(match.start(), match.end(), [_from_tag(match.group(2).strip(), known)]))
    for match in FENCE.finditer(content):
        if any(s.start <= match.start() < s.end for s in spans):
            continue
        lang, block = match.group(1).lower(), match.group(2).strip()
        calls = _from_json_text(block, known) if lang in FENCE_LANGS else []
        if not calls and lang in CALL_FENCE_LANGS:
            calls = _from_call_syntax(block, params)
        if calls:
            spans.append(Span(match.start(), match.end(), calls))
    if not spans:
        stripped = content.strip()
        calls = _from_json_text(stripped, known) if stripped.startswith(("{", "[")) else _from_call_syntax(stripped, params)
        if calls:
            return Extracted("", calls, content, [Span(0, len(content), calls)])
        return Extracted(content, content=content)
    spans.sort(key=lambda span: span.start)
    text, calls, position = [], [], 0
    for span in spans:
        text.append(content[position:span.start])
        calls.extend(span.calls)
        position = span.end
    text.append(content[position:])
    return Extracted(re.sub(r"\n{3,}", "\n\n", "".join(text)).strip(), calls, content, spans)


def native_message(text: str, calls: list[tuple[str, ContentCall]]) -> ChatMessage:
    """The assistant message a content call is recorded as in native mode: a real `tool_calls` entry, so the
    next request is an ordinary call/result exchange. Its arguments are the model's own when they were read as
    written or completed from a code block (the block stays in the text), else as ga read them; an unreadable
    call gets empty arguments (servers parse the arguments of past calls to render their chat template)."""
    return {"role": "assistant", "content": text or None, "tool_calls": [
        {"id": call_id, "type": "function",
         "function": {"name": call.name or INVALID_NAME, "arguments": "{}" if call.problem else call.shown}}
        for call_id, call in calls]}


# ---- one block ------------------------------------------------------------------------------


def _from_tag(inner: str, known: set[str]) -> ContentCall:
    read = read_value(inner)
    if isinstance(read.value, dict):
        call = _from_object(read.value, read.how)
        if call is not None:
            return call
        return ContentCall(_name_in(inner), "{}", 'a tool call needs {"name": TOOL, "arguments": {...}}', as_written=False)
    name = _name_in(inner)
    what = f"the {name} call" if name else "the tool call"
    return ContentCall(name, "{}", f"{what} is not valid JSON ({read.error})", script_hint=recovered_script(inner),
                       as_written=False)


def _from_json_text(text: str, known: set[str]) -> list[ContentCall]:
    """Calls in a fenced block or a bare reply; [] when it is not a call to a known tool."""
    name = _name_in(text)
    looks_like_call = name in known and bool(ARGS_FIELD.search(text))
    read = read_value(text, repair=looks_like_call)
    if read.value is None:
        if looks_like_call:
            return [ContentCall(name, "{}", f"the {name} call in your reply is not valid JSON ({read.error})",
                                script_hint=recovered_script(text), as_written=False)]
        return []
    items = read.value if isinstance(read.value, list) else [read.value]
    calls = [_from_object(item, read.how) if isinstance(item, dict) else None for item in items]
    if not calls or any(c is None or c.name not in known for c in calls):
        return []
    return [c for c in calls if c is not None]


CALL_SYNTAX = re.compile(r"([A-Za-z_]\w*)\s*\(.*\)", re.S)


def _from_call_syntax(text: str, params: dict[str, list[str]]) -> list[ContentCall]:
    """A whole reply written as a function call to a known tool, `ask_user("Which file?")` or
    `code_run(script="print(1)")`: its literal arguments, positional ones named in the tool's order; [] otherwise."""
    found = CALL_SYNTAX.fullmatch(text)
    if not found or found.group(1) not in params or len(text) > MAX_LENIENT_CHARS:
        return []
    try:
        call = ast.parse(text, mode="eval").body
        if not isinstance(call, ast.Call) or not isinstance(call.func, ast.Name):
            return []
        names = params[found.group(1)]
        if len(call.args) > len(names) or any(k.arg is None for k in call.keywords):
            return []
        args = {names[i]: ast.literal_eval(node) for i, node in enumerate(call.args)}
        args.update({str(k.arg): ast.literal_eval(k.value) for k in call.keywords})
    except (SyntaxError, ValueError, TypeError, RecursionError, MemoryError):
        return []
    return [ContentCall(found.group(1), json.dumps(args, ensure_ascii=False), how="python", as_written=False)]


def _from_object(data: JSONObject, how: str = "json") -> ContentCall | None:
    """The call an object a model wrote names, if it names one (its fields checked here)."""
    if isinstance(data.get("function"), dict):  # {"type": "function", "function": {...}}
        data = data["function"]
    name = data.get("name")
    if not isinstance(name, str):
        return None
    if "arguments" in data or "parameters" in data:
        args = data.get("arguments", data.get("parameters", {}))
    else:  # {"name": "code_run", "script": "..."}: the arguments written beside the name
        args = {k: v for k, v in data.items() if k not in ("name", "type", "id")}
    if isinstance(args, str):
        read = read_value(args or "{}")
        if not isinstance(read.value, dict):
            return ContentCall(name, "{}", f"arguments of {name} are not a JSON object ({read.error or 'not an object'})",
                               script_hint=recovered_script(args), as_written=False)
        if not read.lenient and how == "json":
            return ContentCall(name, args)
        return ContentCall(name, json.dumps(read.value, ensure_ascii=False), how=read.how if read.lenient else how,
                           as_written=False)
    if args is None:
        args = {}
    if not isinstance(args, dict):
        return ContentCall(name, "{}", f"arguments of {name} must be a JSON object", as_written=False)
    return ContentCall(name, json.dumps(args, ensure_ascii=False), how=how, as_written=how == "json")


def _filled(call: ContentCall, text: str, notes: list[str]) -> ContentCall:
    """A script tool's call completed from the reply's fenced code block when its script is missing, empty or
    unreadable; otherwise the call as it is."""
    if not is_script_tool(call.name):
        return call
    args = None if call.problem else _loads_object(call.arguments)
    if not call.problem and not needs_script(call.name, args):
        return call
    filled = with_script(call.name, args, text)
    if filled is None:
        return call
    notes.append(f"took the {call.name} script from the reply's {filled.get('type', 'javascript')} code block")
    written = call.arguments if not call.problem else json.dumps(
        {"type": filled["type"]} if "type" in filled else {}, ensure_ascii=False)
    return ContentCall(call.name, json.dumps(filled, ensure_ascii=False), how="block", kind=str(filled.get("type", "")),
                       written=written, as_written=call.as_written)


def _mend_native(call: ToolCall, text: str, notes: list[str]) -> tuple[ToolCall, str]:
    """A native call with its arguments read leniently and its script completed from a code block in the text;
    and the arguments its history entry shows."""
    read = read_value(call.arguments or "{}")
    if not isinstance(read.value, dict):
        mended = ContentCall(call.name, "{}", f"arguments of {call.name} are not valid JSON "
                             f"({read.error or 'not an object'})", script_hint=recovered_script(call.arguments))
    elif read.lenient:
        notes.append(f"read the {call.name} arguments leniently ({read.how})")
        mended = ContentCall(call.name, json.dumps(read.value, ensure_ascii=False), how=read.how)
    else:
        mended = ContentCall(call.name, call.arguments)
    mended = _filled(mended, text, notes)
    shown = "{}" if mended.problem else mended.shown
    return ToolCall(call.id, call.name, mended.arguments, mended.problem, mended.script_hint, mended.kind), shown


def _loads_object(text: str) -> Optional[dict[str, object]]:
    try:
        value = json.loads(text or "{}", strict=False)
    except json.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None


def _name_in(text: str) -> str:
    found = NAME_FIELD.search(text)
    return found.group(1) if found else ""


# ---- guards ---------------------------------------------------------------------------------


REPEATED_LINE = 10  # the same non-blank line this many times in a row
REPEATED_BLOCK = 5  # the same block of 2..MAX_BLOCK_LINES lines this many times in a row
MAX_BLOCK_LINES = 20
MIN_REPEATED_CHARS = 200  # shorter repetitions (a rule of dashes, a small table) are left alone
REPEATED_RUN = re.compile(r"(.{4,80}?)\1{9,}", re.S)  # a short unit 10+ times without line breaks

BAD_REQUEST = re.compile(r"\b(?:HTTP )?(?:400|413)\b")
CONTEXT_OVERFLOW = re.compile(
    r"context[ _](?:length|size|window)|maximum context|exceeds? (?:the )?(?:available )?context|too many tokens"
    r"|prompt is too long|input is too long|reduce the length of the (?:messages|prompt)", re.I)


def repetition(text: str) -> Optional[str]:
    """A short description of a runaway repetition in `text`, or None."""
    if len(text) < MIN_REPEATED_CHARS:
        return None
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    run = 1
    for previous, line in zip(lines, lines[1:], strict=False):
        run = run + 1 if line == previous else 1
        if run >= REPEATED_LINE and run * len(line) >= MIN_REPEATED_CHARS // 2:
            return f"the line {_quote(line)} repeated {run}+ times"
    for size in range(2, MAX_BLOCK_LINES + 1):
        for start in range(0, max(0, len(lines) - size * REPEATED_BLOCK) + 1):
            block = lines[start:start + size]
            if len(set(block)) == 1:
                continue  # a repeated line, handled above
            times = 1
            while lines[start + times * size:start + (times + 1) * size] == block:
                times += 1
            if times >= REPEATED_BLOCK and times * sum(map(len, block)) >= MIN_REPEATED_CHARS:
                return f"a block of {size} lines starting {_quote(block[0])} repeated {times} times"
    for line in text.splitlines():
        # the regex is slow on long text; a line zlib cannot shrink to a third holds no long run
        if len(line) < MIN_REPEATED_CHARS or len(zlib.compress(line.encode(), 1)) > len(line) // 3:
            continue
        for match in REPEATED_RUN.finditer(line):
            # a run of one or two characters (a rule, padding, "xxxx") is output, not a model stuck in a loop
            if len(match.group(0)) >= MIN_REPEATED_CHARS and len(set(match.group(1).strip())) >= 3:
                return f"{_quote(match.group(1))} repeated {len(match.group(0)) // len(match.group(1))} times"
    return None


def is_context_overflow(message: str) -> bool:
    """Whether an endpoint's error (a 400 or 413, not a rate limit) says the request is larger than the
    model's context window."""
    return bool(BAD_REQUEST.search(message or "") and CONTEXT_OVERFLOW.search(message or ""))


def _quote(text: str, limit: int = 40) -> str:
    text = " ".join(text.split())
    return repr(text if len(text) <= limit else text[:limit] + "…")
