"""What the scripted model answers to one chat request: pure logic, no HTTP. Thread-safe.

Usage figures are deterministic, from sizes: the request text is the JSON of `tools` followed by the
JSON of every message; prompt = len(request text) // 4; cached = the longest common prefix with the
previous request of the same conversation (same first system + user message) // 4; completion =
chars of the reply's content, tool names and arguments // 4 (at least 1).
"""
from __future__ import annotations

import json
import random
import re
import threading
import time
from dataclasses import dataclass, field
from typing import Optional

from memory_shared.jsontypes import JSONObject
from worker.model.messages import ChatMessage
from worker.model.textproto import format_tool_use
from worker.scripted.hostile import HOSTILE_KINDS, status_of
from worker.scripted.script import Fault, Script, Turn

TOOL_RESULT = re.compile(r"<tool_result[^>]*>\n?(.*?)\n?</tool_result>", re.S)
CONVERSATIONS_KEPT = 512


@dataclass
class Answer:
    status: int
    body: JSONObject  # what an OpenAI-compatible server sends: ga's client reads it as such
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0  # seconds to wait before answering (latency, or a hang)
    task: Optional[int] = None
    turn: int = 0
    fault: Optional[str] = None
    hostile: Optional[Fault] = None  # written raw by the server (worker/scripted/hostile.py)


class Engine:
    def __init__(self, script: Script):
        self.script = script
        self.patterns = [_pattern(task.match) for task in script.tasks]
        self.whens = [_pattern(task.when) if task.when is not None else None for task in script.tasks]
        self._rng = random.Random(script.seed)
        self._fired: dict[tuple, int] = {}  # (task, turn, fault) -> times fired
        self._seen: dict[tuple, int] = {}  # (task, fault) -> requests that reached it (every_nth)
        self._previous: dict[str, str] = {}  # conversation key -> last request text (cached tokens)
        self._ids = 0
        self._lock = threading.Lock()

    def answer(self, body: JSONObject) -> Answer:
        """The answer to a request's body, as the HTTP client sent it (checked here)."""
        messages = body.get("messages")
        if not isinstance(messages, list) or not all(isinstance(m, dict) for m in messages):
            return _error(400, "'messages' must be a list of message objects")
        turn = _turn(messages)
        task = self._match(messages)
        if task is None:
            return _error(400, "no task of the script matches this conversation; add a fallback task with match: '.*'", turn=turn)
        overflow = self._overflow(body, messages)
        if overflow:
            return _error(400, overflow, task=task, turn=turn)
        if body.get("stop") and not self.script.stop_supported:
            return _error(400, "Unsupported parameter: 'stop' is not supported with this model.", task=task, turn=turn)
        fault = self._fault(task, turn)
        delay = self._latency()
        if fault and fault.kind in ("rate_limit", "server_error", "unauthorized"):
            status = {"rate_limit": 429, "unauthorized": 401}.get(fault.kind, fault.status)
            answer = _error(status, f"scripted {fault.kind}", task=task, turn=turn, fault=fault.kind)
            if fault.kind == "rate_limit":
                answer.headers["Retry-After"] = f"{fault.retry_after:g}"
            answer.delay = delay
            return answer
        if fault and fault.kind == "hang":
            delay = fault.seconds
        script_turn = self._turn(task, turn)
        native = bool(body.get("tools"))
        message: ChatMessage = self._message(script_turn, messages, native, turn, malformed=bool(fault and fault.kind == "malformed_tool_call"))
        message = _apply_stop(message, body.get("stop"))
        finish = script_turn.finish_reason or ("tool_calls" if message.get("tool_calls") else "stop")
        count = 1
        if self.script.completion_limits:  # as a real endpoint: n choices, each cut at max_tokens
            count = body["n"] if isinstance(body.get("n"), int) and body["n"] > 0 else 1
            limit = body.get("max_tokens") or body.get("max_completion_tokens")
            content = message.get("content")
            if isinstance(limit, int) and isinstance(content, str) and len(content) > limit * 4:
                message = {**message, "content": content[:limit * 4]}
                finish = "length"
        choices = [] if fault and fault.kind == "empty_choices" else [
            {"index": i, "message": message, "finish_reason": finish} for i in range(count)]
        with self._lock:
            self._ids += 1
            reply_id = f"chatcmpl-scripted-{self._ids}"
        body_out: JSONObject = {"id": reply_id, "object": "chat.completion", "created": int(time.time()),
                    "model": body.get("model", "scripted"), "choices": choices,
                    "usage": self._usage(body, messages, message, count)}
        hostile = fault if fault and fault.kind in HOSTILE_KINDS else None
        return Answer(status_of(hostile) if hostile else 200, body_out, delay=delay, task=task, turn=turn,
                      fault=fault.kind if fault else None, hostile=hostile)

    def _overflow(self, body: JSONObject, messages: list[JSONObject]) -> str:
        window = self.script.context_window
        if window is None:
            return ""
        prompt = len(json.dumps(body.get("tools") or [], sort_keys=True) + "".join(json.dumps(m, sort_keys=True) for m in messages)) // 4
        if prompt <= window:
            return ""
        return f"the request exceeds the available context size ({prompt} tokens > {window}), try increasing it"

    def _match(self, messages: list[JSONObject]) -> Optional[int]:
        users = [m.get("content") for m in messages if m.get("role") == "user" and isinstance(m.get("content"), str)]
        system = "".join(m["content"] for m in messages if m.get("role") == "system" and isinstance(m.get("content"), str))
        for texts in (users[:1], users):
            for index, pattern in enumerate(self.patterns):
                when = self.whens[index]
                if any(pattern.search(text) for text in texts) and (when is None or when.search(system)):
                    return index
        return None

    def _fault(self, task: int, turn: int) -> Optional[Fault]:
        candidates = [(-1, i, f) for i, f in enumerate(self.script.faults)]
        candidates += [(task, i, f) for i, f in enumerate(self.script.tasks[task].faults)]
        with self._lock:
            for owner, index, fault in candidates:
                if fault.turn is not None and fault.turn != turn:
                    continue
                seen = self._seen[(owner, index)] = self._seen.get((owner, index), 0) + 1
                if fault.every_nth is not None and seen % fault.every_nth:
                    continue
                if fault.rate is not None and self._rng.random() >= fault.rate:
                    continue
                key = (owner if owner >= 0 else task, turn, owner, index)
                if fault.times is not None and self._fired.get(key, 0) >= fault.times:
                    continue
                self._fired[key] = self._fired.get(key, 0) + 1
                return fault
        return None

    def _latency(self) -> float:
        latency = self.script.latency
        if isinstance(latency, tuple):
            with self._lock:
                return self._rng.uniform(*latency)
        return float(latency)

    def _turn(self, task: int, turn: int) -> Turn:
        turns = self.script.tasks[task].turns
        if turn < len(turns):
            return turns[turn]
        last = turns[-1] if turns else Turn()
        # past the end: the last turn's text again, never its tool calls (a loop must be able to finish)
        if not last.content and not last.echo_last_tool_result:
            return Turn(content="done")
        return Turn(content=last.content, echo_last_tool_result=last.echo_last_tool_result)

    def _message(self, spec: Turn, messages: list[JSONObject], native: bool, turn: int, malformed: bool) -> ChatMessage:
        content = spec.content or ""
        if spec.echo_last_tool_result:
            content = "\n".join(filter(None, [content, _last_tool_result(messages)]))
        calls = [(c.id or f"call_{turn}_{i}", c.name, c.arguments if isinstance(c.arguments, str) else json.dumps(c.arguments))
                 for i, c in enumerate(spec.tool_calls)]
        if malformed:
            call_id, name, args = calls[0] if calls else (f"call_{turn}_0", "code_run", '{"script": "print(1)", "type": "python"}')
            calls[:1] = [(call_id, name, args[:-1] if len(args) > 1 else "{")]
        if not native:
            blocks = [format_tool_use(name, args) for _, name, args in calls]
            return {"role": "assistant", "content": "\n".join(filter(None, [content, *blocks]))}
        message: ChatMessage = {"role": "assistant", "content": content or None}
        if calls:
            message["tool_calls"] = [{"id": cid, "type": "function", "function": {"name": name, "arguments": args}}
                                     for cid, name, args in calls]
        else:
            message["content"] = content
        return message

    def _usage(self, body: JSONObject, messages: list[JSONObject], reply: ChatMessage, choices: int = 1) -> dict[str, object]:
        text = json.dumps(body.get("tools") or [], sort_keys=True) + "".join(json.dumps(m, sort_keys=True) for m in messages)
        key = json.dumps([m for m in messages if m.get("role") in ("system", "user")][:2], sort_keys=True)
        with self._lock:
            previous = self._previous.pop(key, "")
            self._previous[key] = text
            if len(self._previous) > CONVERSATIONS_KEPT:
                self._previous.pop(next(iter(self._previous)))
        calls = reply.get("tool_calls") or []
        reply_chars = len(reply.get("content") or "") + sum(len(c["function"]["name"]) + len(c["function"]["arguments"]) for c in calls)
        prompt, completion, cached = len(text) // 4, max(1, reply_chars // 4) * choices, _common_prefix(text, previous) // 4
        return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion,
                "prompt_tokens_details": {"cached_tokens": cached}}


def _apply_stop(message: ChatMessage, stop: object) -> ChatMessage:
    """Cut the content at the first stop string, as a server does (the stop string itself is dropped)."""
    listed = stop if isinstance(stop, list) else []
    stops = [stop] if isinstance(stop, str) else [s for s in listed if isinstance(s, str) and s]
    content = message.get("content")
    if not stops or not isinstance(content, str):
        return message
    cut = min((content.find(s) for s in stops if s in content), default=-1)
    return message if cut < 0 else {**message, "content": content[:cut]}


def _pattern(match: str) -> re.Pattern:
    try:
        return re.compile(match)
    except re.error:
        return re.compile(re.escape(match))


def _last_tool_result(messages: list[JSONObject]) -> str:
    for msg in reversed(messages):
        if msg.get("role") == "tool":
            return str(msg.get("content") or "")
        if msg.get("role") == "user" and isinstance(msg.get("content"), str):
            found = TOOL_RESULT.findall(msg["content"])
            if found:
                return found[-1]
    return "(no tool result)"


def _common_prefix(a: str, b: str) -> int:
    """Length of the longest common prefix, by binary search on slice equality (C-speed compares)."""
    low, high = 0, min(len(a), len(b))
    while low < high:
        mid = (low + high + 1) // 2
        if a[:mid] == b[:mid]:
            low = mid
        else:
            high = mid - 1
    return low


def _error(status: int, message: str, task: Optional[int] = None, turn: int = 0, fault: Optional[str] = None) -> Answer:
    kind = {400: "invalid_request_error", 401: "authentication_error", 429: "rate_limit_error"}.get(status, "server_error")
    return Answer(status, {"error": {"message": message, "type": kind, "code": status}}, task=task, turn=turn, fault=fault)


_ANCHOR_TURN = re.compile(r"<history>\s*\[turn (\d+)\]")


def _turn(messages: list[JSONObject]) -> int:
    """Turns already answered: the assistant messages in the request, or, once context control has
    evicted old ones, the turn number the worker's anchor carries in the newest user message."""
    answered = sum(1 for m in messages if m.get("role") == "assistant")
    for message in reversed(messages):
        if message.get("role") == "user":
            found = _ANCHOR_TURN.search(str(message.get("content") or ""))
            return max(answered, int(found.group(1))) if found else answered
    return answered

