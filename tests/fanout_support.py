"""Helpers for the fan-out tests: a scripted model server with a request log, run directory readers."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from worker.scripted import ScriptedServer


def start_server(script: dict[str, Any], log_path: Path) -> ScriptedServer:
    server = ScriptedServer(script, log_path=log_path)
    server.start()
    return server


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
