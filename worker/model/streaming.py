"""Streamed chat completions (server-sent events): the text as it arrives, the whole reply at the end.

`StreamAssembler.feed(bytes)` takes the body as it comes off the socket, in chunks cut anywhere; it
calls `on_text` with each piece of content and puts the completion back together: content, tool calls
assembled from their deltas (by index: the first delta brings id and name, later ones add to the
arguments), the finish reason and the usage that `stream_options.include_usage` adds in a last chunk.
`completion()` is then the same JSON a non-streamed request would have returned. A `watch` looks at the
content as it grows and may stop the stream (StreamCut): a model stuck repeating itself is cut there, and
the connection closed under it ends the generation on the server.
"""
from __future__ import annotations

import json
from typing import Callable, Optional, TypedDict

from memory_shared.jsontypes import JSONObject
from worker.model.messages import FunctionCall

WATCH_EVERY = 400  # characters of content between two looks of the runaway watch


class StreamCut(Exception):
    """The watch saw the content run away: the rest of the stream is not read (closing it ends the generation)."""


class _StreamedCall(TypedDict):
    id: Optional[str]  # None until a delta brings it
    type: str
    function: FunctionCall


class StreamAssembler:
    def __init__(self, on_text: Optional[Callable[[str], None]] = None,
                 watch: Optional[Callable[[str], bool]] = None):
        """watch(content so far) -> True: stop reading (StreamCut out of feed); looked at every WATCH_EVERY chars."""
        self.on_text = on_text
        self.watch = watch
        self._size = 0
        self._watched = 0
        self._buffer = b""
        self._content: list[str] = []
        self._calls: dict[int, _StreamedCall] = {}
        self._finish: Optional[str] = None
        self._usage: Optional[JSONObject] = None  # as the server sent it
        self._meta: dict[str, object] = {}
        self.events = 0

    @property
    def chars(self) -> int:
        """Characters of content received so far."""
        return self._size

    def feed(self, data: bytes) -> None:
        self._buffer += data
        while b"\n" in self._buffer:
            line, self._buffer = self._buffer.split(b"\n", 1)
            self._line(line.strip())

    def completion(self, finish: Optional[str] = None) -> bytes:
        """The assembled reply as a chat.completion JSON body (`finish`: the finish reason to give a cut reply)."""
        if finish is None:
            self._line(self._buffer.strip())  # a last event without its newline
        self._buffer = b""
        self._finish = finish or self._finish
        message: dict[str, object] = {"role": "assistant", "content": "".join(self._content) or None}
        if self._calls:
            message["tool_calls"] = [self._calls[index] for index in sorted(self._calls)]
        body: dict[str, object] = {"id": self._meta.get("id") or "stream", "object": "chat.completion", "created": self._meta.get("created", 0),
                "model": self._meta.get("model") or "", "choices": [{"index": 0, "message": message,
                                                                      "finish_reason": self._finish or "stop"}]}
        if self._usage is not None:
            body["usage"] = self._usage
        return json.dumps(body).encode("utf-8")

    def _line(self, line: bytes) -> None:
        if not line.startswith(b"data:"):
            return  # comments (": keep-alive"), event names, blank separators
        data = line[5:].strip()
        if not data or data == b"[DONE]":
            return
        try:
            chunk = json.loads(data)
        except ValueError:
            return  # a broken event: the completion check judges what is left
        if not isinstance(chunk, dict):
            return
        self.events += 1
        for key in ("id", "created", "model"):
            self._meta.setdefault(key, chunk.get(key))
        if isinstance(chunk.get("usage"), dict):
            self._usage = chunk["usage"]
        for choice in chunk.get("choices") or []:
            self._choice(choice)

    def _choice(self, choice: JSONObject) -> None:
        delta = choice.get("delta") or {}
        text = delta.get("content")
        if isinstance(text, str) and text:
            self._content.append(text)
            self._size += len(text)
            if self.on_text:
                self.on_text(text)
            if self.watch is not None and self._size - self._watched >= WATCH_EVERY:
                self._watched = self._size
                if self.watch("".join(self._content)):
                    raise StreamCut()
        for part in delta.get("tool_calls") or []:
            call = self._calls.setdefault(int(part.get("index", len(self._calls))),
                                          {"id": None, "type": "function", "function": {"name": "", "arguments": ""}})
            call["id"] = part.get("id") or call["id"]
            function = part.get("function") or {}
            call["function"]["name"] += function.get("name") or ""
            call["function"]["arguments"] += function.get("arguments") or ""
        if choice.get("finish_reason"):
            self._finish = choice["finish_reason"]


def completion_events(completion: JSONObject, include_usage: bool, piece: int = 16) -> list[dict[str, object]]:
    """A chat.completion as the chunks a streaming server sends (what the scripted server speaks)."""
    choice = completion["choices"][0]
    message = choice["message"]
    base = {"id": completion.get("id"), "object": "chat.completion.chunk", "created": completion.get("created", 0),
            "model": completion.get("model")}

    def chunk(delta: dict[str, object], finish: Optional[str] = None) -> dict[str, object]:
        return {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    events = [chunk({"role": "assistant"})]
    content = message.get("content") or ""
    events += [chunk({"content": content[i:i + piece]}) for i in range(0, len(content), piece)]
    for index, call in enumerate(message.get("tool_calls") or []):
        arguments = call["function"]["arguments"]
        events.append(chunk({"tool_calls": [{"index": index, "id": call["id"], "type": "function",
                                             "function": {"name": call["function"]["name"], "arguments": ""}}]}))
        events += [chunk({"tool_calls": [{"index": index, "function": {"arguments": arguments[i:i + piece]}}]})
                   for i in range(0, len(arguments), piece)]
    events.append(chunk({}, choice.get("finish_reason") or "stop"))
    if include_usage and completion.get("usage"):
        events.append({**base, "choices": [], "usage": completion["usage"]})
    return events
