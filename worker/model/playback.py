"""A Model that serves a recorded history's replies and checks every request against the recorded one.

`ga replay` (orchestrator/replay.py) puts a `ReplayModel` where the task's model client would be: the
agent loop runs as it always does (tools run again for real), but each request it builds is compared
with the request the history recorded for that turn, after `Normaliser` has put back what must differ
(the new run's paths, generated tool call ids). The first difference stops the task with a
`Divergence` naming the turn and the field (a JSON path into the request); a difference inside a
tool message is reported as the tool's output having changed. With `keep_going` every difference is
kept and the recorded replies are fed on. A fork passes `live` and `live_from`: from that turn on the
requests go to the live model and only their usage is counted as spent.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Optional, Sequence

from memory_shared.jsontypes import JSONObject
from worker.model import Model, ModelError, Reply, ToolCall
from worker.model.messages import ChatMessage, ToolSchema
from worker.model.replies import interpret, tool_parameters
from worker.usage import Usage

if TYPE_CHECKING:
    from worker.modelconfig import ModelConfig

LENGTH_PROBLEM = "max_tokens limit"  # worker.model.Reply.problem()'s words for a reply cut at max_tokens
TEXT_CALLS_NOTE = "from the reply's text"  # worker.model.replies.interpret's note for calls read from a native reply's text


@dataclass
class RecordedTurn:
    """One line of a history.jsonl: the request as it was sent and the reply as the model wrote it, as the
    file holds them (written by this ga or an older one; compared and read, never trusted)."""

    turn: int
    request: list[JSONObject]
    received: JSONObject
    raw: Optional[str]
    usage: Usage
    tool_results: list[JSONObject]
    notes: list[str] = field(default_factory=list)


def recorded_turns(path: Path) -> list[RecordedTurn]:
    """Every turn of a history file, its request rebuilt whole (history.py keeps only what changed)."""
    turns: list[RecordedTurn] = []
    previous: list[JSONObject] = []
    for number, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path}: line {number} is not JSON ({exc.msg}); this history cannot be replayed") from None
        if "sent" not in record or "received" not in record:
            raise ValueError(f"{path}: line {number} has no 'sent'/'received' (written by a ga older than whole "
                             "histories); it cannot be replayed")
        previous = previous[: record.get("sent_from", 0)] + record["sent"]
        turns.append(RecordedTurn(record.get("turn", len(turns) + 1), previous, record["received"],
                                  record.get("received_raw"), Usage.from_dict(record.get("usage")),
                                  record.get("tool_results") or [], record.get("notes") or []))
    return turns


@dataclass
class Divergence:
    """Where a replay left its recording: `kind` is "request", "tool" (a tool's output changed) or "end"."""

    task_id: str
    turn: int
    kind: str
    where: str  # a JSON path into the request, or the tool's name
    recorded: object = None  # the JSON value at `where`, each side's
    replayed: object = None

    def line(self) -> str:
        if self.kind == "tool":
            return f"task {self.task_id}, turn {self.turn}: the output of {self.where} differs from the recording"
        if self.kind == "end":
            return f"task {self.task_id}, turn {self.turn}: {self.where}"
        return (f"task {self.task_id}, turn {self.turn}: the request differs at {self.where} "
                f"(recorded {_short(self.recorded)}, now {_short(self.replayed)})")


class ReplayStopped(ModelError):
    """Raised into the agent loop at the first divergence: the task ends there, failed, naming it."""


@dataclass
class Normaliser:
    """What must differ between a recording and its replay, made equal: paths (the recorded run's and
    the replay's both become the same token) and tool call ids (numbered in order of appearance)."""

    paths: dict[str, str] = field(default_factory=dict)  # a path (either side's) -> the token it becomes

    def __call__(self, messages: Sequence[object]) -> list[JSONObject]:
        text = json.dumps(messages, ensure_ascii=False)
        for path in sorted(self.paths, key=len, reverse=True):  # the longest first: a run dir holds its workdirs
            text = text.replace(json.dumps(path)[1:-1], self.paths[path])
        return _numbered_ids(json.loads(text))


class ReplayModel:
    """Serves `turns` in order (see the module doc). `config` is the recorded model's ModelConfig, so the
    loop sizes its context exactly as it did."""

    def __init__(self, turns: list[RecordedTurn], *, task_id: str, tool_mode: str, normalise: Normaliser,
                 config: Optional[ModelConfig] = None, keep_going: bool = False, live: Optional[Model] = None, live_from: int = 0):
        self.turns, self.task_id, self.tool_mode, self.normalise = turns, task_id, tool_mode, normalise
        self.config, self.keep_going, self.live, self.live_from = config, keep_going, live, live_from
        self.calls = 0
        self.divergences: list[Divergence] = []
        self.replayed_usage = Usage()  # what the recorded turns cost when they were made (not spent again)
        self.live_usage = Usage()

    def chat(self, messages: list[ChatMessage], tools: list[ToolSchema]) -> Reply:
        self.calls += 1
        turn = self.calls
        if self.live is not None and turn >= self.live_from:
            reply = self.live.chat(messages, tools)
            self.live_usage += reply.usage
            return reply
        if turn > len(self.turns):
            self._diverged(Divergence(self.task_id, turn, "end", f"ga asked for turn {turn}, the recording ends at "
                                      f"turn {len(self.turns)}"), stop=True)
        recorded = self.turns[turn - 1]
        found = self.compare(recorded.request, messages, turn)
        if found is not None:
            self._diverged(found)
        reply = rebuild_reply(recorded, self.tool_mode, tool_parameters(tools))
        self.replayed_usage += reply.usage
        return reply

    def compare(self, recorded: list[JSONObject], messages: list[ChatMessage], turn: int) -> Optional[Divergence]:
        """The first difference between a recorded request and the one built now (None when they agree)."""
        before, now = self.normalise(recorded), self.normalise(messages)
        path = first_difference(before, now, "messages")
        if path is None:
            return None
        index = _message_index(path)
        if index is not None and index < len(now) and now[index].get("role") == "tool" and index < len(before) \
                and before[index].get("role") == "tool":
            return Divergence(self.task_id, turn - 1, "tool", _tool_of(now, index), before[index].get("content"),
                              now[index].get("content"))
        return Divergence(self.task_id, turn, "request", path, _at(before, path), _at(now, path))

    def _diverged(self, found: Divergence, stop: bool = False) -> None:
        self.divergences.append(found)
        if stop or not self.keep_going:
            raise ReplayStopped(f"replay stopped: {found.line()}")


def rebuild_reply(recorded: RecordedTurn, tool_mode: str, known: dict[str, list[str]]) -> Reply:
    """The recorded reply as this ga reads it: the text as the model wrote it and its native calls go
    through the same interpretation as a live reply (worker/model/replies.py), with the recorded call ids."""
    received = recorded.received
    content = recorded.raw if recorded.raw is not None else (received.get("content") or "")
    from_text = any(TEXT_CALLS_NOTE in note for note in recorded.notes)  # the calls were read from `raw`
    native = [] if from_text else [ToolCall(c.get("id") or "", c["function"]["name"], c["function"].get("arguments") or "")
                                   for c in received.get("tool_calls") or [] if c.get("function")]
    read = interpret(content, native, tool_mode, known)
    calls = read.calls
    message: ChatMessage = read.message
    recorded_ids = [r["id"] for r in recorded.tool_results if r.get("id")]
    if len(recorded_ids) == len(calls) and not native:  # ids made up for calls read from text: the recorded ones
        ids = dict(zip((c.id for c in calls), recorded_ids, strict=True))
        calls = [replace(c, id=ids[c.id]) for c in calls]  # the script hint of an unreadable call kept
        if message.get("tool_calls"):
            message = {**message, "tool_calls": [{**m, "id": ids.get(m["id"], m["id"])}
                                                 for m in message.get("tool_calls", [])]}
    cut = any(LENGTH_PROBLEM in str(r.get("error", "")) for r in recorded.tool_results)
    return Reply(read.text, calls, recorded.usage, message, 0.0, finish_reason="length" if cut else "stop",
                 raw=read.raw, notes=read.notes)


def first_difference(before: object, now: object, path: str) -> Optional[str]:
    """The JSON path of the first place two JSON values differ, or None."""
    if isinstance(before, dict) and isinstance(now, dict):
        for key in list(before) + [k for k in now if k not in before]:
            if key not in before or key not in now:
                return f"{path}.{key}"
            found = first_difference(before[key], now[key], f"{path}.{key}")
            if found:
                return found
        return None
    if isinstance(before, list) and isinstance(now, list):
        for index, (old, new) in enumerate(zip(before, now, strict=False)):
            found = first_difference(old, new, f"{path}[{index}]")
            if found:
                return found
        return None if len(before) == len(now) else f"{path}[{min(len(before), len(now))}]"
    return None if before == now else path


def _numbered_ids(messages: list[JSONObject]) -> list[JSONObject]:
    ids: dict[str, str] = {}

    def number(value: str) -> str:
        return ids.setdefault(value, f"call#{len(ids) + 1}")

    for message in messages:
        for call in message.get("tool_calls") or []:
            if isinstance(call, dict) and isinstance(call.get("id"), str):
                call["id"] = number(call["id"])
        if isinstance(message.get("tool_call_id"), str):
            message["tool_call_id"] = number(message["tool_call_id"])
    return messages


def _message_index(path: str) -> Optional[int]:
    if not path.startswith("messages["):
        return None
    return int(path[len("messages["):path.index("]")])


def _tool_of(messages: list[JSONObject], index: int) -> str:
    """The name of the tool whose result is messages[index] (from the assistant call it answers)."""
    call_id = messages[index].get("tool_call_id")
    for message in reversed(messages[:index]):
        for call in message.get("tool_calls") or []:
            if call.get("id") == call_id:
                return str(call.get("function", {}).get("name") or "a tool")
    return f"the tool answered in messages[{index}]"


def _at(value: object, path: str) -> object:
    """The value at a path first_difference returned (None where one side has nothing there)."""
    for part in path.replace("[", ".[").split(".")[1:]:
        if part.startswith("[") and isinstance(value, (list, str)):
            index = int(part[1:-1])
            if not -len(value) <= index < len(value):
                return None
            value = value[index]
        elif not part.startswith("[") and isinstance(value, dict) and part in value:
            value = value[part]
        else:
            return None
    return value


def _short(value: object, limit: int = 80) -> str:
    text = json.dumps(value, ensure_ascii=False) if not isinstance(value, str) else repr(value)
    return text if len(text) <= limit else text[:limit] + "…"

