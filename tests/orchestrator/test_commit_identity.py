"""A fan-out task's memory commit is made once per (run, task, attempt), even when the task runs again."""
from __future__ import annotations

from pathlib import Path
from typing import Optional

from configs import load_settings
from memory_shared import MemoryStore
from worker import Runtime, TaskSpec, Worker
from worker.model import LLMClient
from worker.modelconfig import resolve_model
from worker.scripted import ScriptedServer

TURNS = [
    {"content": "check", "tool_calls": [{"name": "code_run", "arguments": {"type": "python", "script": "print(6*7)"}}]},
    {"tool_calls": [{"name": "start_long_term_update", "arguments": {}}]},
    {"tool_calls": [{"name": "file_write", "arguments": {"path": "memory/L2/answer.md", "content": "# 42\n"}}]},
    {"content": "saved"},
]


def _run(tmp_path: Path, store: MemoryStore, commit_key: Optional[str], name: str) -> Optional[int]:
    settings = load_settings(user_file=tmp_path / "none", project_file=tmp_path / "none")
    with ScriptedServer({"tasks": [{"match": ".*", "turns": TURNS}]}) as server:
        model = LLMClient(resolve_model(f"scripted@{server.base_url}", settings))
        worker = Worker(TaskSpec("remember 6*7", task_id="t1", workdir=tmp_path / name / "work", settings=settings,
                                 history_path=tmp_path / name / "history.jsonl", commit_key=commit_key),
                        Runtime(model=model, store=store))
        result = worker.run()
    assert result.status == "succeeded"
    return result.memory_generation


def test_the_same_run_task_and_attempt_commits_once(tmp_path: Path) -> None:
    store = MemoryStore(tmp_path / "memory", create=True)
    first = _run(tmp_path, store, "run-a/t1/1", "first")
    again = _run(tmp_path, store, "run-a/t1/1", "again")  # a driver died after the commit: the task ran again
    retry = _run(tmp_path, store, "run-a/t1/2", "retry")
    other_run = _run(tmp_path, store, "run-b/t1/1", "other")
    authors = [c.author for c in store.log() if c.author.startswith("worker:t1")]
    assert first is not None and again == first
    assert retry not in (None, first) and other_run not in (None, first, retry)
    assert authors == ["worker:t1 [run-a/t1/1]", "worker:t1 [run-a/t1/2]", "worker:t1 [run-b/t1/1]"]
    # the store's own idempotency key carries it, so the store (local or remote) refuses the second commit
    assert [c.key for c in store.log() if c.author.startswith("worker:t1")] == ["run-a/t1/1", "run-a/t1/2", "run-b/t1/1"]


def test_a_task_without_a_commit_key_commits_every_time(tmp_path: Path) -> None:
    store = MemoryStore(tmp_path / "memory", create=True)
    generations = [_run(tmp_path, store, None, "one"), _run(tmp_path, store, None, "two")]
    assert None not in generations and generations[0] != generations[1]
    assert [c.author for c in store.log() if c.author.startswith("worker:t1")] == ["worker:t1", "worker:t1"]
