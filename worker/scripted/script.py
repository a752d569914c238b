"""The scripted model's script: a YAML file (or dict) validated here, errors as one line with file:line.

```yaml
seed: 7                      # optional: makes `rate` faults and random latency reproducible
latency: 0.0                 # seconds per request, or [min, max] drawn per request
context_window: 4096         # optional: a request whose prompt tokens exceed it gets a 400 "exceeds the
                             # available context size" (prompt tokens counted as in the usage, below)
stop_supported: true         # false: a request with `stop` gets a 400 "Unsupported parameter: 'stop'"
completion_limits: false     # true: as a real endpoint, a request's max_tokens cuts the reply (4 chars a
                             # token, finish_reason length) and its `n` gives n choices, all counted
model: {tool_mode: native}   # optional ModelConfig overrides used by the `scripted:FILE` model name
faults: []                   # optional faults applying to every task (e.g. a 429 storm)
tasks:
  - match: "weather"         # regex (or plain substring) searched in the first user message,
                             # then in any user message; the first task that matches wins
    when: "forecast\\.md"     # optional: a regex the system prompt must hold too (what memory showed
                             # the worker), so a script can answer a task one way with memory, another without
    turns:                   # assistant turns in order; turn = assistant messages already sent
      - tool_calls: [{name: code_run, arguments: {script: "print(6*7)", type: python}}]
      - {echo_last_tool_result: true}   # answer with the last tool result (proves the tool ran)
      - content: "The answer is 42."
    faults:
      - {turn: 1, kind: rate_limit, retry_after: 1, times: 1}
      - {rate: 0.1, kind: server_error}
```
Fault kinds: rate_limit (429 + Retry-After), server_error (`status`, default 500), unauthorized (401),
hang (`seconds`, then a normal reply), empty_choices, malformed_tool_call (the turn's first tool
call, or a code_run call, with its JSON arguments cut short), and the hostile endpoint's
(worker/scripted/hostile.py): garbage_json, html, empty_body, wrong_shape (a 200 that is not a chat
completion), giant_reply (`size` bytes, default 200 MB, streamed; `announce_length: true` sends a
Content-Length), slow_loris (one byte every `interval` seconds, default 1; `dribble: body` sends the
headers at once), echo_key (a 401 echoing the bearer key, padded by `pad` characters, default: so
that a cut near 300 characters splits one of its four copies). A fault fires when its `turn` (if
given) equals the request's turn, its `rate` draw (if given) succeeds, the request is its
`every_nth` (if given), and it has fired fewer than `times` for that (task, turn) — `times`
defaults to 1 for a fault pinned to a turn, else unlimited. Tool-call `arguments` may be a mapping
(sent as JSON) or a string (sent as-is, e.g. broken JSON). Past the last turn the last turn's
content (or "done") is returned. A turn's `finish_reason: length` reports the reply as cut at
max_tokens. A request's `stop` strings cut the content as a real server does (text mode: ga sends
`<tool_result`), so a turn may hold a whole recorded reply, invented results included.
"""
from __future__ import annotations

from pathlib import Path
from typing import Literal, Optional, Union

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from memory_shared.jsontypes import JSONObject
from memory_shared.usererrors import field_errors
from memory_shared.yamlsource import YamlError, line_of, load_mapping

EXAMPLE = "configs/examples/scripts/hello.yaml"


class ScriptError(ValueError):
    """A bad script; str() is one line naming the file, the line and the fix."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ToolCallSpec(_Strict):
    name: str
    arguments: Union[dict[str, object], str] = {}
    id: Optional[str] = None


class Turn(_Strict):
    content: Optional[str] = None
    tool_calls: list[ToolCallSpec] = []
    echo_last_tool_result: bool = False
    finish_reason: Optional[Literal["stop", "length"]] = None  # "length": as if cut at max_tokens


FaultKind = Literal["rate_limit", "server_error", "unauthorized", "hang", "empty_choices", "malformed_tool_call",
                    "garbage_json", "html", "empty_body", "wrong_shape", "giant_reply", "slow_loris", "echo_key"]


class Fault(_Strict):
    kind: FaultKind
    turn: Optional[int] = Field(None, ge=0)
    rate: Optional[float] = Field(None, ge=0, le=1)
    every_nth: Optional[int] = Field(None, ge=1)
    times: Optional[int] = Field(None, ge=1)
    retry_after: float = Field(1.0, ge=0)
    seconds: float = Field(30.0, ge=0)
    status: int = Field(500, ge=400, le=599)
    size: int = Field(200_000_000, ge=1024)  # giant_reply
    announce_length: bool = False  # giant_reply
    interval: float = Field(1.0, gt=0)  # slow_loris
    dribble: Literal["all", "body"] = "all"  # slow_loris
    pad: Optional[int] = Field(None, ge=0)  # echo_key

    @model_validator(mode="after")
    def _default_times(self) -> "Fault":
        if self.times is None and self.turn is not None and self.rate is None and self.every_nth is None:
            self.times = 1
        return self


class Task(_Strict):
    match: str
    when: Optional[str] = None  # a regex the system prompt must hold too
    turns: list[Turn] = []
    faults: list[Fault] = []


class Script(_Strict):
    seed: Optional[int] = None
    latency: Union[float, tuple[float, float]] = 0.0
    context_window: Optional[int] = Field(None, ge=1)  # prompt tokens over this: 400, as llama.cpp answers
    stop_supported: bool = True  # false: a request with `stop` gets a 400 (as some hosted models answer)
    completion_limits: bool = False  # true: `max_tokens` cuts a reply (4 chars a token), `n` gives n choices
    model: JSONObject = {}  # the model's entry as the script's author wrote it (read by orchestrator/preflight.py)
    faults: list[Fault] = []
    tasks: list[Task] = Field(min_length=1)


def load_script(source: Union[Path, str, dict]) -> Script:
    """Validate a script file (or an already parsed dict)."""
    if isinstance(source, dict):
        return _validate(source, "<script>", {})
    path = Path(source)
    try:
        data, lines = load_mapping(path, missing=f"script file not found; see {EXAMPLE} for the format",
                                   shape=f"a script is a mapping with a 'tasks:' list; see {EXAMPLE}")
    except YamlError as exc:
        raise ScriptError(str(exc)) from None
    return _validate(data, str(path), lines)


def _validate(data: dict, where: str, lines: dict) -> Script:
    try:
        return Script.model_validate(data)
    except ValidationError as exc:
        problem = field_errors(exc)[0]
        line = line_of(lines, problem.loc)
        place = f"{where}:{line}" if line else where
        hint = f"see {EXAMPLE} and worker/scripted/script.py for the format"
        raise ScriptError(f"{place}: {problem.line()}; {hint}") from None
