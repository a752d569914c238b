"""Helpers for the fan-out tests: a scripted model server with a request log, run directory readers."""
from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Collection

from worker.scripted import ScriptedServer


def done_tasks_file(path: Path, url: str, n: int, *, name: str, failing: Collection[int] = (), concurrency: int = 16,
                    prompt: str = "item {i}") -> Path:
    """n tasks whose answer is "task done"; the `failing` ones have a check it cannot pass (failed, no retries)."""
    lines = [f"version: 1\nname: {name}\nconcurrency: {concurrency}\nretries: 0\nmemory: {{commit: false}}",
             f"defaults: {{model: 'scripted@{url}', max_turns: 3, check: {{pattern: done}}}}", "tasks:"]
    for i in range(n):
        check = ", check: {pattern: never-said}" if i in failing else ""
        lines.append(f"  - {{id: t{i:04d}, prompt: '{prompt.format(i=i)}'{check}}}")
    path.write_text("\n".join(lines) + "\n")
    return path


def start_server(script: dict[str, Any], log_path: Path) -> ScriptedServer:
    server = ScriptedServer(script, log_path=log_path)
    server.start()
    return server


def beating_task(match: str, seconds: float, timeout: float = 300) -> dict[str, Any]:
    """A task whose script writes a heartbeat file in its workdir every 0.2 s for `seconds` (a PID would not
    do: the sandbox gives the script its own PID namespace)."""
    script = (f"import time, pathlib\nfor _ in range({int(seconds * 5)}):\n"
              "    pathlib.Path('beat').write_text(str(time.time()))\n    time.sleep(0.2)\nprint('slept')")
    return {"match": match, "turns": [
        {"content": "waiting", "tool_calls": [{"name": "code_run", "arguments": {"type": "python", "script": script,
                                                                                  "timeout": timeout}}]},
        {"content": "Result:", "echo_last_tool_result": True}]}


def wait_for_beat(runs: Path, task_id: str, timeout: float = 60) -> tuple[str, Path]:
    """The run id and heartbeat file of `task_id`, once its script beats."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for beat in runs.glob(f"*/tasks/{task_id}/workdir/beat"):
            return beat.parents[3].name, beat
        time.sleep(0.05)
    raise AssertionError(f"{task_id} never ran its script")


def answer_task(match: str, text: str = "done", latency_turns: int = 1) -> dict[str, Any]:
    """A script task that runs `latency_turns` real code_run calls, then answers with the last output."""
    turns: list[dict[str, Any]] = [
        {"content": "working", "tool_calls": [{"name": "code_run", "arguments": {"type": "python", "script": f"print('{text}')"}}]}
        for _ in range(latency_turns)
    ]
    turns.append({"content": "Result:", "echo_last_tool_result": True})
    return {"match": match, "turns": turns}


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def first_user_message(record: dict[str, Any]) -> str:
    body = record.get("body") or {}
    for message in body.get("messages", []):
        if message.get("role") == "user" and isinstance(message.get("content"), str):
            return message["content"]
    return ""


def requests_for(log: list[dict[str, Any]], marker: str) -> list[dict[str, Any]]:
    return [r for r in log if marker in first_user_message(r)]


def result_lines(run_dir: Path) -> list[dict[str, Any]]:
    return read_jsonl(Path(run_dir) / "results.jsonl")


def ledger(run_dir: Path) -> list[dict[str, Any]]:
    return read_jsonl(Path(run_dir) / "ledger.jsonl")


class StormProxy:
    """A real HTTP proxy in front of a model server: every request inside the storm window gets 429.

    The window opens at the first request and lasts `seconds` (float("inf"): the endpoint never recovers
    until `calm()`). Counts what it answered in `.forwarded` and `.rejected`.
    """

    def __init__(self, upstream: str, seconds: float, retry_after: float):
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        self.upstream, self.seconds, self.retry_after = upstream.rstrip("/"), seconds, retry_after
        self.first: float | None = None
        self.forwarded = self.rejected = 0
        self.lock = threading.Lock()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                import time
                import urllib.request

                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                with proxy.lock:
                    now = time.monotonic()
                    proxy.first = proxy.first or now
                    storming = now - proxy.first < proxy.seconds
                    if storming:
                        proxy.rejected += 1
                    else:
                        proxy.forwarded += 1
                if storming:
                    data = json.dumps({"error": {"message": "rate limited", "type": "rate_limit", "code": 429}}).encode()
                    self._reply(429, data, {"Retry-After": f"{proxy.retry_after:g}"})
                    return
                request = urllib.request.Request(proxy.upstream + self.path.removeprefix("/v1"), data=body,
                                                 headers={"Content-Type": "application/json"})
                with urllib.request.urlopen(request, timeout=60) as response:
                    self._reply(response.status, response.read(), {})

            def _reply(self, status: int, data: bytes, headers: dict) -> None:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for name, value in headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self.http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.http.daemon_threads = True
        self.base_url = f"http://127.0.0.1:{self.http.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.http.serve_forever, daemon=True)
        self.thread.start()

    def calm(self) -> None:
        with self.lock:
            self.seconds = 0.0

    def stop(self) -> None:
        self.http.shutdown()
        self.http.server_close()
