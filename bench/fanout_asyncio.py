"""The floor of bench/fanout.py: the same agents as bench/fanout_threads.py on one asyncio event loop.

N agents, W at a time, each a coroutine; an agent loops like the reference's (send the conversation with the
tool schemas, run the file_write calls the reply asks for in its own directory, send the results back, until a
reply calls no tool). HTTP/1.1 by hand on asyncio streams, keep-alive connections shared through one idle list
(TCP_NODELAY, as the scripted server sets it), JSON in and out: what a Python client cannot do with less.
Prints one JSON line: seconds (from this process's start, imports included), tasks that ended with an answer,
model requests.

    python bench/fanout_asyncio.py URL N W [--workdir DIR] [--max-turns 5]
"""
from __future__ import annotations

import time

STARTED = time.monotonic()

import asyncio  # noqa: E402
import json  # noqa: E402
import socket  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import urllib.parse  # noqa: E402
from pathlib import Path  # noqa: E402

from fanout_threads import SYSTEM, TOOLS, arguments, run_tool  # noqa: E402  (bench/, the script's own folder)


class Client:
    """POST JSON to one endpoint over kept-alive connections."""

    def __init__(self, url: str):
        parts = urllib.parse.urlsplit(url)
        self.host, self.port = parts.hostname or "127.0.0.1", parts.port or 80
        self.path = parts.path.rstrip("/") + "/chat/completions"
        self.idle: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []
        self.requests = 0

    async def post(self, body: dict) -> dict:
        data = json.dumps(body).encode()
        head = (f"POST {self.path} HTTP/1.1\r\nHost: {self.host}:{self.port}\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(data)}\r\n\r\n").encode()
        for attempt in range(2):  # a kept connection the server closed meanwhile: once more on a fresh one
            reader, writer = self.idle.pop() if self.idle else await self._connect()
            try:
                writer.write(head + data)
                status = await reader.readline()
                if not status:
                    raise ConnectionResetError("closed")
                length = 0
                while (line := await reader.readline()) not in (b"\r\n", b""):
                    name, _, value = line.decode("latin-1").partition(":")
                    if name.strip().lower() == "content-length":
                        length = int(value)
                reply = json.loads(await reader.readexactly(length))
            except (ConnectionError, asyncio.IncompleteReadError):
                writer.close()
                if attempt:
                    raise
                continue
            self.idle.append((reader, writer))
            self.requests += 1
            return reply
        raise AssertionError("unreachable")

    async def _connect(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        reader, writer = await asyncio.open_connection(self.host, self.port)
        writer.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return reader, writer


async def agent(client: Client, prompt: str, workdir: Path, max_turns: int) -> str:
    workdir.mkdir(parents=True, exist_ok=True)
    messages: list[dict] = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": prompt}]
    for _ in range(max_turns):
        reply = await client.post({"model": "scripted", "messages": messages, "tools": TOOLS})
        message = reply["choices"][0]["message"]
        messages.append({k: v for k, v in message.items() if v is not None})
        if not message.get("tool_calls"):
            return message.get("content") or ""
        for call in message["tool_calls"]:
            function = call["function"]
            result = run_tool(workdir, function["name"], function["arguments"])
            messages.append({"role": "tool", "tool_call_id": call["id"], "content": result})
    return ""


async def run(url: str, n: int, w: int, root: Path, max_turns: int) -> tuple[list[str], int]:
    client = Client(url)
    gate = asyncio.Semaphore(w)

    async def one(i: int) -> str:
        async with gate:
            return await agent(client, f"bench task {i}", root / f"t{i:03d}", max_turns)

    answers = await asyncio.gather(*(one(i) for i in range(n)))
    for _, writer in client.idle:
        writer.close()
    return answers, client.requests


def main() -> None:
    args = arguments(__doc__.splitlines()[0])
    with tempfile.TemporaryDirectory(prefix="ga-bench-asyncio-") as scratch:  # removed unless --workdir is given
        root = (args.workdir or Path(scratch)).resolve()
        answers, requests = asyncio.run(run(args.url, args.n, args.w, root, args.max_turns))
    json.dump({"seconds": round(time.monotonic() - STARTED, 3), "answered": sum(1 for a in answers if a),
               "requests": requests}, sys.stdout)
    print()


if __name__ == "__main__":
    main()
