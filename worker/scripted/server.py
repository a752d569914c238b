"""The scripted model over HTTP: OpenAI-compatible, 127.0.0.1, one thread per connection."""
from __future__ import annotations

import json
import threading
import time
from collections import deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Mapping, Optional, TextIO, Union

from memory_shared.jsontypes import JSONObject
from worker.model.streaming import completion_events
from worker.scripted.engine import Answer, Engine
from worker.scripted.hostile import write_hostile
from worker.scripted.script import load_script

MODELS = {"object": "list", "data": [{"id": "scripted", "object": "model", "created": 0, "owned_by": "ga"}]}


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 256  # 64+ workers connect at once; the default backlog of 5 drops SYNs
    allow_reuse_address = True
    owner: "ScriptedServer"


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: the openai SDK reuses connections
    disable_nagle_algorithm = True  # headers and body go out in two writes: avoid the 40 ms delayed-ACK stall

    @property
    def owner(self) -> ScriptedServer:
        assert isinstance(self.server, _HTTPServer)  # the only server this handler is given
        return self.server.owner

    def do_GET(self) -> None:
        if self.path.rstrip("/").endswith("/models"):
            self._send(200, MODELS)
        else:
            self._send(404, {"error": {"message": f"no route {self.path}", "type": "not_found", "code": 404}})

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if not self.path.rstrip("/").endswith("/chat/completions"):
            self._send(404, {"error": {"message": f"no route {self.path}", "type": "not_found", "code": 404}})
            return
        try:
            body = json.loads(raw or b"{}")
        except json.JSONDecodeError:
            body = None
        owner = self.owner
        answer = owner.engine.answer(body) if isinstance(body, dict) else Answer(
            400, {"error": {"message": "the body is not a JSON object", "type": "invalid_request_error", "code": 400}})
        owner._record(body, answer)
        if answer.delay and owner._stopping.wait(answer.delay):
            return  # stopping: drop the hanging request
        if answer.hostile:
            self.close_connection = True
            write_hostile(self.wfile, answer.hostile, answer.body, self.headers.get("Authorization", ""), owner._stopping)
            return
        if isinstance(body, dict) and body.get("stream") and answer.status == 200:
            self._send_events(answer.body, bool((body.get("stream_options") or {}).get("include_usage")))
            return
        self._send(answer.status, answer.body, answer.headers)

    def _send_events(self, completion: JSONObject, include_usage: bool) -> None:
        """A streamed reply: server-sent events, the body ending when the connection closes."""
        self.close_connection = True
        try:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Connection", "close")
            self.end_headers()
            for event in completion_events(completion, include_usage):
                self.wfile.write(b"data: " + json.dumps(event).encode() + b"\n\n")
                self.wfile.flush()
            self.wfile.write(b"data: [DONE]\n\n")
        except (BrokenPipeError, ConnectionResetError):
            pass

    def _send(self, status: int, body: Mapping[str, object], headers: Optional[dict[str, str]] = None) -> None:
        data = json.dumps(body).encode()
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (its timeout passed during a hang)

    def log_message(self, format: str, *args: object) -> None:
        pass  # the JSONL request log is the record


class ScriptedServer:
    """`with ScriptedServer(path) as server:` -> server.base_url; `.requests` holds the bodies received,
    `.records` the same with the matched task, turn and fault (the newest `keep`, default all);
    log_path also appends every record as a JSONL line."""

    def __init__(self, script: Union[Path, str, dict], host: str = "127.0.0.1", port: int = 0,
                 log_path: Optional[Path] = None, keep: Optional[int] = None):
        self.engine = Engine(load_script(script))
        self.host, self.port = host, port
        self.log_path = Path(log_path) if log_path else None
        self.requests: deque[object] = deque(maxlen=keep)  # the bodies as received (JSON, or None when not)
        self.records: deque[dict[str, object]] = deque(maxlen=keep)
        self.base_url = ""
        self._http: Optional[_HTTPServer] = None
        self._thread: Optional[threading.Thread] = None
        self._stopping = threading.Event()
        self._lock = threading.Lock()
        self._log_file: Optional[TextIO] = None

    def start(self) -> str:
        if self._http:
            return self.base_url
        self._http = _HTTPServer((self.host, self.port), _Handler)
        self._http.owner = self
        self.port = self._http.server_address[1]
        self.base_url = f"http://{self.host}:{self.port}/v1"
        if self.log_path:
            self.log_path.parent.mkdir(parents=True, exist_ok=True)
            self._log_file = open(self.log_path, "a", encoding="utf-8")
        self._thread = threading.Thread(target=self._http.serve_forever, kwargs={"poll_interval": 0.05},
                                        name=f"scripted-llm-{self.port}", daemon=True)
        self._thread.start()
        return self.base_url

    def stop(self) -> None:
        self._stopping.set()
        if self._http:
            self._http.shutdown()
            self._http.server_close()
            self._http = None
        if self._thread:
            self._thread.join(timeout=5)
        with self._lock:
            if self._log_file:
                self._log_file.close()
                self._log_file = None

    def serve_forever(self) -> None:
        """Block until stop() or Ctrl-C (used by `ga fake-llm`)."""
        self.start()
        while not self._stopping.wait(3600):
            pass

    def __enter__(self) -> "ScriptedServer":
        self.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.stop()

    def _record(self, body: object, answer: Answer) -> None:
        record = {"time": time.time(), "task": answer.task, "turn": answer.turn, "status": answer.status,
                  "fault": answer.fault, "body": body}
        with self._lock:
            self.requests.append(body)
            self.records.append(record)
            if self._log_file:
                self._log_file.write(json.dumps(record) + "\n")
                self._log_file.flush()


IN_PROCESS_KEEP = 1000  # long benchmark sessions would otherwise hold every body in memory
_RUNNING: dict[str, ScriptedServer] = {}
_RUNNING_LOCK = threading.Lock()


def scripted_server(path: Union[Path, str]) -> ScriptedServer:
    """The in-process server for a script file, started on first use (one per file per process)."""
    key = str(Path(path).expanduser().resolve())
    with _RUNNING_LOCK:
        if key not in _RUNNING:
            server = ScriptedServer(Path(key), keep=IN_PROCESS_KEEP)
            server.start()
            _RUNNING[key] = server
        return _RUNNING[key]


def ensure_scripted_server(path: Union[Path, str]) -> str:
    """base_url of the in-process scripted server for this script file."""
    return scripted_server(path).base_url
