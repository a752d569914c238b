"""The minimal thread client of bench/fanout.py: bench/fanout_asyncio.py's agents, each on a thread of its own.

N agents, W at a time (a pool of W threads), the same loop and tools as bench/fanout_threads.py, and the same
HTTP/1.1 by hand as bench/fanout_asyncio.py, on blocking sockets (TCP_NODELAY; kept-alive connections shared
through one idle list). Beside the asyncio client it says what one thread per waiting agent costs by itself.
Prints one JSON line: seconds (from this process's start, imports included), tasks that ended with an answer,
model requests.

    python bench/fanout_sockets.py URL N W [--workdir DIR] [--max-turns 5]
"""
from __future__ import annotations

import time

STARTED = time.monotonic()

import json  # noqa: E402
import socket  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import threading  # noqa: E402
import urllib.parse  # noqa: E402
from concurrent.futures import ThreadPoolExecutor  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import BinaryIO  # noqa: E402

from fanout_threads import SYSTEM, TOOLS, arguments, run_tool  # noqa: E402  (bench/, the script's own folder)


class Client:
    """POST JSON to one endpoint over kept-alive connections, from any thread."""

    def __init__(self, url: str):
        parts = urllib.parse.urlsplit(url)
        self.host, self.port = parts.hostname or "127.0.0.1", parts.port or 80
        self.path = parts.path.rstrip("/") + "/chat/completions"
        self.idle: list[tuple[socket.socket, BinaryIO]] = []
        self.lock = threading.Lock()
        self.requests = 0

    def post(self, body: dict) -> dict:
        data = json.dumps(body).encode()
        head = (f"POST {self.path} HTTP/1.1\r\nHost: {self.host}:{self.port}\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(data)}\r\n\r\n").encode()
        for attempt in range(2):  # a kept connection the server closed meanwhile: once more on a fresh one
            with self.lock:
                kept = self.idle.pop() if self.idle else None
            sock, reader = kept or self._connect()
            try:
                sock.sendall(head + data)
                if not reader.readline():
                    raise ConnectionResetError("closed")
                length = 0
                while (line := reader.readline()) not in (b"\r\n", b""):
                    name, _, value = line.decode("latin-1").partition(":")
                    if name.strip().lower() == "content-length":
                        length = int(value)
                reply = json.loads(reader.read(length))
            except (ConnectionError, ValueError):
                sock.close()
                if attempt:
                    raise
                continue
            with self.lock:
                self.idle.append((sock, reader))
                self.requests += 1
            return reply
        raise AssertionError("unreachable")

    def _connect(self) -> tuple[socket.socket, BinaryIO]:
        sock = socket.create_connection((self.host, self.port))
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return sock, sock.makefile("rb")


def agent(client: Client, prompt: str, workdir: Path, max_turns: int) -> str:
    workdir.mkdir(parents=True, exist_ok=True)
    messages: list[dict] = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": prompt}]
    for _ in range(max_turns):
        reply = client.post({"model": "scripted", "messages": messages, "tools": TOOLS})
        message = reply["choices"][0]["message"]
        messages.append({k: v for k, v in message.items() if v is not None})
        if not message.get("tool_calls"):
            return message.get("content") or ""
        for call in message["tool_calls"]:
            function = call["function"]
            result = run_tool(workdir, function["name"], function["arguments"])
            messages.append({"role": "tool", "tool_call_id": call["id"], "content": result})
    return ""


def main() -> None:
    args = arguments(__doc__.splitlines()[0])
    client = Client(args.url)
    with tempfile.TemporaryDirectory(prefix="ga-bench-sockets-") as scratch:  # removed unless --workdir is given
        root = (args.workdir or Path(scratch)).resolve()
        with ThreadPoolExecutor(max_workers=args.w) as pool:
            answers = list(pool.map(lambda i: agent(client, f"bench task {i}", root / f"t{i:03d}", args.max_turns),
                                    range(args.n)))
    for sock, _ in client.idle:
        sock.close()
    json.dump({"seconds": round(time.monotonic() - STARTED, 3), "answered": sum(1 for a in answers if a),
               "requests": client.requests}, sys.stdout)
    print()


if __name__ == "__main__":
    main()
