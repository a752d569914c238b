"""The model client's transport against the openai SDK's post() it replaced, side by side.

The scripted model runs in its own process (`ga fake-llm`), so only the client's CPU is counted.
Prints, for each: CPU and wall time per request (N small chat requests on one keep-alive
connection); how long a slow-loris request (one byte every 0.5 s) takes with request_timeout T;
and the peak Python memory while receiving a reply of R MB (the new client's cap: max_reply_bytes,
default 4 MiB).

    python bench/llm_transport.py [--requests 300] [--timeout 2] [--giant-mb 50]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
import tracemalloc
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import openai  # noqa: E402
from openai.types.chat import ChatCompletion  # noqa: E402

from worker.model.replies import parse_completion  # noqa: E402
from worker.model.transport import post  # noqa: E402

REQUEST = {"model": "scripted", "max_tokens": 100, "temperature": 0,
           "messages": [{"role": "system", "content": "You are a test. " * 50}, {"role": "user", "content": "say ok"}]}
PAYLOAD = json.dumps(REQUEST).encode()
HEADERS = {"Content-Type": "application/json", "Authorization": "Bearer no-key"}


class FakeLLM:
    def __init__(self, script: str, folder: Path):
        path = folder / f"script-{time.monotonic_ns()}.yaml"
        path.write_text(script)
        self.proc = subprocess.Popen([sys.executable, "-m", "cli", "fake-llm", "--script", str(path), "--port", "0"],
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, cwd=ROOT)
        line = self.proc.stdout.readline()
        self.base_url = line.split("scripted model at ", 1)[1].split(" ", 1)[0].rstrip(":")

    def __enter__(self) -> "FakeLLM":
        return self

    def __exit__(self, *exc: object) -> None:
        self.proc.terminate()
        self.proc.wait(10)


def sdk(base_url: str, timeout: float) -> openai.OpenAI:
    return openai.OpenAI(base_url=base_url, api_key="no-key", max_retries=0, timeout=timeout)


def per_request(send, n: int) -> tuple[float, float]:
    send()  # warm the connection
    cpu, wall = time.process_time(), time.monotonic()
    for _ in range(n):
        send()
    return (time.process_time() - cpu) / n * 1000, (time.monotonic() - wall) / n * 1000


def bounded(send, limit: float) -> str:
    """Seconds the call took, or '> limit' when it was still going (it is abandoned in a daemon thread)."""
    done = threading.Event()
    started = time.monotonic()

    def run() -> None:
        try:
            send()
        except Exception:
            pass
        done.set()

    threading.Thread(target=run, daemon=True).start()
    if not done.wait(limit):
        return f"> {limit:.0f} s (still receiving)"
    return f"{time.monotonic() - started:.2f} s"


def peak_mb(send) -> str:
    tracemalloc.start()
    try:
        send()
        outcome = "accepted"
    except Exception as exc:
        outcome = f"refused ({type(exc).__name__})"
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return f"{peak / 1e6:.1f} MB, {outcome}"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--timeout", type=float, default=2.0)
    parser.add_argument("--giant-mb", type=int, default=50)
    args = parser.parse_args()
    folder = Path(os.environ.get("TMPDIR", "/tmp"))
    print(f"machine: {os.cpu_count()} cpus, load average {os.getloadavg()[0]:.1f} at start", flush=True)
    t, cap = args.timeout, 4 * 1024 * 1024

    with FakeLLM("tasks:\n  - match: '.*'\n    turns: [{content: ok}]\n", folder) as llm:
        client = sdk(llm.base_url, t)
        old = per_request(lambda: client.post("/chat/completions", body=REQUEST, cast_to=ChatCompletion), args.requests)
        url = llm.base_url + "/chat/completions"
        new = per_request(lambda: parse_completion(post(url, PAYLOAD, HEADERS, t, cap).body),
                          args.requests)
    print(f"per request ({args.requests} small chats): SDK post CPU {old[0]:.2f} ms, wall {old[1]:.2f} ms | "
          f"transport CPU {new[0]:.2f} ms, wall {new[1]:.2f} ms | CPU new/old {new[0] / old[0]:.2f}", flush=True)

    loris = "tasks:\n  - match: '.*'\n    turns: [{content: ok}]\n    faults: [{rate: 1.0, kind: slow_loris, interval: 0.5}]\n"
    with FakeLLM(loris, folder) as llm:
        old_s = bounded(lambda: sdk(llm.base_url, t).post("/chat/completions", body=REQUEST, cast_to=ChatCompletion), 8 * t)
        url = llm.base_url + "/chat/completions"
        new_s = bounded(lambda: post(url, PAYLOAD, HEADERS, t, cap), 8 * t)
    print(f"slow-loris (a byte every 0.5 s), request_timeout {t:g} s: SDK post {old_s} | transport {new_s}", flush=True)

    size = args.giant_mb * 1_000_000
    giant = f"tasks:\n  - match: '.*'\n    turns: [{{content: ok}}]\n    faults: [{{rate: 1.0, kind: giant_reply, size: {size}}}]\n"
    with FakeLLM(giant, folder) as llm:
        old_m = peak_mb(lambda: sdk(llm.base_url, 60).post("/chat/completions", body=REQUEST, cast_to=ChatCompletion))
        url = llm.base_url + "/chat/completions"
        new_m = peak_mb(lambda: post(url, PAYLOAD, HEADERS, 60, cap))
    print(f"a {args.giant_mb} MB reply, peak Python memory: SDK post {old_m} | transport {new_m}", flush=True)
    print(f"load average {os.getloadavg()[0]:.1f} at end", flush=True)


if __name__ == "__main__":
    main()
