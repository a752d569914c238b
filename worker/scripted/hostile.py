"""Replies a broken or hostile endpoint sends, written as raw HTTP by the scripted server.

Kinds (see script.py): garbage_json, html, empty_body, wrong_shape (a 200 that is not a chat
completion), giant_reply (a valid completion of `size` bytes, streamed, never held), slow_loris (a
valid completion sent one byte every `interval` seconds, headers included unless `dribble: body`),
echo_key (a 401 whose message echoes the request's bearer key, padded so that a cut of the message
at or near 300 characters falls inside a copy of the key).
"""
from __future__ import annotations

import json
import threading
from io import BufferedIOBase
from typing import Iterator

from worker.scripted.script import Fault

HOSTILE_KINDS = {"garbage_json", "html", "empty_body", "wrong_shape", "giant_reply", "slow_loris", "echo_key"}
CHUNK = 64 * 1024
ECHO_PREFIX = "Incorrect API key provided: "
REASONS = {200: "OK", 401: "Unauthorized"}


def status_of(fault: Fault) -> int:
    return 401 if fault.kind == "echo_key" else 200


def write_hostile(out: BufferedIOBase, fault: Fault, completion: dict, authorization: str, stopping: threading.Event) -> None:
    """Write the fault's reply to `out`; returns early when the client goes away or the server stops."""
    try:
        if fault.kind == "giant_reply":
            _write_giant(out, fault, completion)
        elif fault.kind == "slow_loris":
            _write_slowly(out, fault, completion, stopping)
        else:
            status, content_type, body = _small(fault, completion, authorization)
            out.write(_head(status, content_type, len(body)) + body)
        out.flush()
    except (BrokenPipeError, ConnectionResetError):
        pass  # the client gave up: that is what it should do


def echo_message(key: str, pad: int | None = None) -> str:
    """The 401 message: the key four times in a row, the first copy `pad` characters after the prefix
    (default: starting 2 key lengths before character 300), so that a cut of the message, or of any text
    quoting it with a short prefix, anywhere near character 300 falls inside a copy."""
    filler = "-" * (pad if pad is not None else max(0, 300 - 2 * len(key) - len(ECHO_PREFIX)))
    return f"{ECHO_PREFIX}{filler}{' / '.join([key] * 4)}. You can find your API key in your account settings."


def _small(fault: Fault, completion: dict, authorization: str) -> tuple[int, str, bytes]:
    if fault.kind == "garbage_json":
        return 200, "application/json", json.dumps(completion).encode()[:-7] + b"\x00}{,"
    if fault.kind == "html":
        page = "<!DOCTYPE html><html><head><title>502 Bad Gateway</title></head><body><h1>Bad Gateway</h1></body></html>"
        return 200, "text/html; charset=utf-8", page.encode()
    if fault.kind == "empty_body":
        return 200, "application/json", b""
    if fault.kind == "wrong_shape":  # the legacy completions shape: choices without a message
        wrong = {k: v for k, v in completion.items() if k != "choices"}
        return 200, "application/json", json.dumps({**wrong, "choices": [{"index": 0, "text": "hello"}]}).encode()
    key = authorization.removeprefix("Bearer ").strip()
    error = {"error": {"message": echo_message(key, fault.pad), "type": "invalid_request_error", "code": "invalid_api_key"}}
    return 401, "application/json", json.dumps(error).encode()


def _head(status: int, content_type: str, length: int | None) -> bytes:
    lines = [f"HTTP/1.1 {status} {REASONS.get(status, 'Error')}", f"Content-Type: {content_type}"]
    lines.append(f"Content-Length: {length}" if length is not None else "Connection: close")
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def _giant_body(completion: dict, size: int) -> Iterator[bytes]:
    marker = "\x00GIANT\x00"
    template = json.dumps({**completion, "choices": [{"index": 0, "message": {"role": "assistant", "content": marker},
                                                      "finish_reason": "stop"}]})
    head, tail = (part.encode() for part in template.split(json.dumps(marker)[1:-1]))
    yield head
    filler, left = b"x" * CHUNK, max(0, size - len(head) - len(tail))
    while left > 0:
        yield filler[:left]
        left -= CHUNK
    yield tail


def _write_giant(out: BufferedIOBase, fault: Fault, completion: dict) -> None:
    out.write(_head(200, "application/json", fault.size if fault.announce_length else None))
    for chunk in _giant_body(completion, fault.size):
        out.write(chunk)


def _write_slowly(out: BufferedIOBase, fault: Fault, completion: dict, stopping: threading.Event) -> None:
    body = json.dumps(completion).encode()
    head = _head(200, "application/json", len(body))
    if fault.dribble == "body":
        out.write(head)
        out.flush()
    data = body if fault.dribble == "body" else head + body
    for index in range(len(data)):
        out.write(data[index:index + 1])
        out.flush()
        if stopping.wait(fault.interval):
            return
