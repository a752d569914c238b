"""The baseline of bench/fanout.py: the GenericAgent reference's "conductor" style, reimplemented small.

N agents, each a thread in this one process with its own openai client (as each of the reference's
subagents has its own model session), W running at a time. An agent loops like the reference's: send
the conversation with the tool schemas, run the tool calls the reply asks for (file_write into its own
directory, as the `ga` cases' tasks do), send the results back, until a reply calls no tool. Real HTTP
to the same scripted server as the `ga` cases. Prints one JSON line: seconds (from this process's
start, imports included), tasks that ended with an answer, model requests.

    python bench/fanout_threads.py URL N W [--workdir DIR] [--max-turns 5]
"""
from __future__ import annotations

import time

STARTED = time.monotonic()

import argparse  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import threading  # noqa: E402
from concurrent.futures import ThreadPoolExecutor  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

SYSTEM = "You are a worker agent. Use the tools to do the task, then answer with the result."
TOOLS = [{"type": "function", "function": {
    "name": "file_write", "description": "Write a text file in the working directory.",
    "parameters": {"type": "object", "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
                   "required": ["path", "content"]}}}]


def file_write(workdir: Path, arguments: str) -> str:
    try:
        args = json.loads(arguments)
        path = (workdir / args["path"]).resolve()
        if workdir not in path.parents:
            return "error: the path is outside the working directory"
        path.write_text(args["content"])
        return f"wrote {len(args['content'])} chars to {args['path']}"
    except (ValueError, KeyError, TypeError, OSError) as exc:
        return f"error: {exc}"


def run_tool(workdir: Path, name: str, arguments: str) -> str:
    """The one tool these agents have (bench/fanout_asyncio.py and bench/fanout_sockets.py share it)."""
    return file_write(workdir, arguments) if name == "file_write" else f"error: no tool {name}"


def arguments(description: str) -> argparse.Namespace:
    """URL N W [--workdir DIR] [--max-turns 5]: the command line of the three clients."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("url")
    parser.add_argument("n", type=int)
    parser.add_argument("w", type=int)
    parser.add_argument("--workdir", type=Path)
    parser.add_argument("--max-turns", type=int, default=5)
    return parser.parse_args()


def agent(openai: Any, url: str, prompt: str, workdir: Path, max_turns: int, counter: list[int],
          lock: threading.Lock) -> str:
    workdir.mkdir(parents=True, exist_ok=True)
    client = openai.OpenAI(base_url=url, api_key="not-needed", max_retries=2, timeout=120)
    messages: list[dict] = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": prompt}]
    try:
        for _ in range(max_turns):
            reply = client.chat.completions.create(model="scripted", messages=messages, tools=TOOLS)
            with lock:
                counter[0] += 1
            message = reply.choices[0].message
            messages.append(message.model_dump(exclude_none=True))
            if not message.tool_calls:
                return message.content or ""
            for call in message.tool_calls:
                result = run_tool(workdir, call.function.name, call.function.arguments)
                messages.append({"role": "tool", "tool_call_id": call.id, "content": result})
        return ""
    finally:
        client.close()


def main() -> None:
    args = arguments(__doc__.splitlines()[0])
    import openai  # here: bench/fanout_asyncio.py shares this module's agent, not the SDK

    counter, lock = [0], threading.Lock()
    with tempfile.TemporaryDirectory(prefix="ga-bench-threads-") as scratch:  # removed unless --workdir is given
        root = (args.workdir or Path(scratch)).resolve()
        with ThreadPoolExecutor(max_workers=args.w) as pool:
            answers = list(pool.map(lambda i: agent(openai, args.url, f"bench task {i}", root / f"t{i:03d}", args.max_turns,
                                                    counter, lock), range(args.n)))
    json.dump({"seconds": round(time.monotonic() - STARTED, 3), "answered": sum(1 for a in answers if a),
               "requests": counter[0]}, sys.stdout)
    print()


if __name__ == "__main__":
    main()
