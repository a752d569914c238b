"""A counting proxy for the paper's runners: every agent's requests pass through it, so tokens are counted the same
way for ga and for the GenericAgent reference.

An agent is given `http://127.0.0.1:PORT/<label>/v1`; the proxy strips `/<label>` and forwards to the upstream
endpoint. Bodies stream through chunk by chunk (server-sent events included), so a client that stops reading
stops the upstream request too. Usage is read from a JSON reply's `usage`, or from the events of a streamed one
(its last chunk with `stream_options.include_usage`, else llama.cpp's `timings`). Cached input tokens come from
`usage.prompt_tokens_details.cached_tokens`, else llama.cpp's `timings.cache_n`.
"""
from __future__ import annotations

import http.client
import json
import threading
import time
import urllib.parse
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Optional


@dataclass
class Tally:
    requests: int = 0
    input: int = 0
    output: int = 0
    cached: int = 0
    errors: int = 0
    seconds: float = 0.0
    statuses: dict[int, int] = field(default_factory=dict)

    def add(self, other: "Tally") -> None:
        self.requests += other.requests
        self.input += other.input
        self.output += other.output
        self.cached += other.cached
        self.errors += other.errors
        self.seconds += other.seconds


class CountingProxy:
    def __init__(self, upstream: str):
        parts = urllib.parse.urlsplit(upstream.rstrip("/"))
        if parts.scheme != "http" or not parts.hostname:
            raise SystemExit(f"error: --base-url {upstream}: expected http://HOST:PORT/v1 (a local OpenAI-compatible server)")
        self.host, self.port_up = parts.hostname, parts.port or 80
        self.prefix = parts.path.removesuffix("/v1")  # e.g. "" for http://127.0.0.1:8080/v1
        self.tallies: dict[str, Tally] = {}
        self.lock = threading.Lock()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (the base's name)
                pass

            def do_POST(self) -> None:
                proxy.forward(self)

            do_GET = do_POST

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> "CountingProxy":
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()

    def url(self, label: str) -> str:
        return f"http://127.0.0.1:{self.port}/{label}/v1"

    def tally(self, label: str) -> Tally:
        with self.lock:
            return self.tallies.setdefault(label, Tally())

    def forward(self, handler: BaseHTTPRequestHandler) -> None:
        label, _, rest = handler.path.lstrip("/").partition("/")
        length = int(handler.headers.get("Content-Length") or 0)
        body = _with_timings(handler.rfile.read(length) if length else b"")
        started = time.monotonic()
        conn = http.client.HTTPConnection(self.host, self.port_up, timeout=3600)
        headers = {k: v for k, v in handler.headers.items() if k.lower() not in ("host", "connection", "content-length")}
        headers["Content-Length"] = str(len(body))
        usage: dict[str, Any] = {}
        reader: Optional[_UsageReader] = None
        status = 502
        try:
            conn.request(handler.command, f"{self.prefix}/{rest}", body=body, headers=headers)
            response = conn.getresponse()
            status = response.status
            handler.send_response(status)
            for key, value in response.getheaders():
                if key.lower() not in ("transfer-encoding", "connection", "content-length"):
                    handler.send_header(key, value)
            handler.send_header("Transfer-Encoding", "chunked")
            handler.end_headers()
            events = "text/event-stream" in (response.getheader("content-type") or "")
            reader = _UsageReader(events)
            while True:
                chunk = response.read1(65536)
                if not chunk:
                    break
                reader.feed(chunk)
                handler.wfile.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
                handler.wfile.flush()
            handler.wfile.write(b"0\r\n\r\n")
            usage = reader.usage()
        except (OSError, http.client.HTTPException):  # the agent hung up (a cut reply) or the upstream died
            usage = reader.usage() if reader is not None else {}  # counted with what came
        finally:
            conn.close()
        if handler.command != "POST" or not rest.endswith("chat/completions"):
            return
        with self.lock:
            tally = self.tallies.setdefault(label, Tally())
            tally.requests += 1
            tally.input += usage.get("input", 0)
            tally.output += usage.get("output", 0)
            tally.cached += usage.get("cached", 0)
            tally.errors += status >= 400
            tally.seconds += time.monotonic() - started
            tally.statuses[status] = tally.statuses.get(status, 0) + 1


def _with_timings(body: bytes) -> bytes:
    """A streamed request asks llama.cpp for its timings in every chunk, so a reply the agent cuts short (ga's
    repetition guard) is still counted: its prompt and the tokens generated until the cut."""
    try:
        request = json.loads(body) if body else None
    except ValueError:
        return body
    if not isinstance(request, dict) or not request.get("stream"):
        return body
    return json.dumps({**request, "timings_per_token": True}).encode()


class _UsageReader:
    """The usage of one reply, read from its body as it passes (bounded: a JSON body is kept up to 8 MB)."""

    def __init__(self, events: bool):
        self.events = events
        self.buffer = b""
        self.found: dict[str, Any] = {}
        self.timings: dict[str, Any] = {}

    def feed(self, chunk: bytes) -> None:
        if not self.events:
            if len(self.buffer) < 8 * 1024 * 1024:
                self.buffer += chunk
            return
        self.buffer += chunk
        while b"\n" in self.buffer:
            line, self.buffer = self.buffer.split(b"\n", 1)
            self._event(line.strip())

    def _event(self, line: bytes) -> None:
        if not line.startswith(b"data:"):
            return
        try:
            data = json.loads(line[5:].strip())
        except ValueError:
            return
        if isinstance(data, dict):
            self._take(data)

    def _take(self, data: dict[str, Any]) -> None:
        if isinstance(data.get("usage"), dict):
            self.found = data["usage"]
        if isinstance(data.get("timings"), dict):
            self.timings = data["timings"]

    def usage(self) -> dict[str, int]:
        if not self.events:
            try:
                data = json.loads(self.buffer)
                if isinstance(data, dict):
                    self._take(data)
            except ValueError:
                pass
        else:
            self._event(self.buffer.strip())
        details = self.found.get("prompt_tokens_details") or {}
        cached: Optional[int] = details.get("cached_tokens") if isinstance(details, dict) else None
        if cached is None:
            cached = self.timings.get("cache_n")
        prompt = self.found.get("prompt_tokens")
        if prompt is None and self.timings:
            prompt = (self.timings.get("prompt_n") or 0) + (self.timings.get("cache_n") or 0)
        output = self.found.get("completion_tokens", self.timings.get("predicted_n", 0))
        return {"input": int(prompt or 0), "output": int(output or 0), "cached": int(cached or 0)}
