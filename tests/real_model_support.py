"""The recorded replies of real small models (tests/real_model/, copied unchanged from the issue's
fixtures) turned into scripted-server turns, and one worker run against them over real HTTP."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Optional

from worker import Runtime, TaskSpec, Worker
from worker.model import LLMClient
from worker.modelconfig import resolve_model
from worker.scripted import ScriptedServer
from worker.taskcheck import TaskCheck

FIXTURES = Path(__file__).resolve().parent / "real_model"
ALPHA_WORDS = "the quick brown fox jumps over dogs\n"  # 7 words: what the recorded real run counted

# Where a recording stops because ga took a tool call for the final answer, the model's next reply
# was never recorded. Stand-ins: the same model's reply to the same NameError (recorded in the
# proxy run), or an echo of the real tool output (proves the tool ran; no number is made up here).
PROXY_TURN_2 = json.loads((FIXTURES / "qwen1.5b-native-fenced-json-rewritten-by-proxy.history.jsonl")
                          .read_text().splitlines()[1])["received"]["content"]
NEXT_TURN: dict[str, dict[str, Any]] = {
    "qwen1.5b-native-fib": {"content": PROXY_TURN_2},
    "qwen1.5b-native-fanout-fib": {"content": PROXY_TURN_2},
    "qwen1.5b-native-fanout-squares": {"echo_last_tool_result": True},
    "qwen1.5b-native-fanout-words": {"echo_last_tool_result": True},
}


def names() -> list[str]:
    return sorted(p.name[: -len(".history.jsonl")] for p in FIXTURES.glob("*.history.jsonl"))


def records(name: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (FIXTURES / f"{name}.history.jsonl").read_text().splitlines() if line.strip()]


def task_of(name: str) -> str:
    return records(name)[0]["sent"][1]["content"]


def turns_of(name: str) -> list[dict[str, Any]]:
    """The model's side of a recorded history, as scripted turns (exactly what it sent)."""
    turns = []
    for record in records(name):
        received = record["received"]
        turn: dict[str, Any] = {"content": received.get("content")}
        if received.get("tool_calls"):
            turn["tool_calls"] = [{"id": c["id"], "name": c["function"]["name"], "arguments": c["function"]["arguments"]}
                                  for c in received["tool_calls"]]
        turns.append(turn)
    if name in NEXT_TURN:
        turns.append(NEXT_TURN[name])
    return turns


def replay_run(tmp_path: Path, settings: Any, name: str, mode: str, *, stop: bool = True,
               check: Optional[dict[str, Any]] = None, turns: Optional[list[dict[str, Any]]] = None,
               model: Optional[dict[str, Any]] = None, script: Optional[dict[str, Any]] = None):
    """Run the recorded task against its recorded replies; (result, request bodies, history path)."""
    workdir = tmp_path / "work"
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "alpha.txt").write_text(ALPHA_WORDS)
    log_path = tmp_path / "requests.jsonl"
    body = {"tasks": [{"match": ".*", "turns": turns if turns is not None else turns_of(name)}], **(script or {})}
    with ScriptedServer(body, log_path=log_path) as server:
        config = resolve_model(f"scripted@{server.base_url}", settings)
        config = config.model_copy(update={"tool_mode": mode, "stop_sequences": stop, **(model or {})})
        worker = Worker(TaskSpec(task_of(name) if name else "do the task", task_id="t1", workdir=workdir,
                                 settings=settings, history_path=tmp_path / "t1" / "history.jsonl",
                                 check=TaskCheck.model_validate(check) if check else None),
                        Runtime(model=LLMClient(config)))
        result = worker.run()
    requests = [json.loads(line)["body"] for line in log_path.read_text().splitlines()]
    return result, requests, tmp_path / "t1" / "history.jsonl"
