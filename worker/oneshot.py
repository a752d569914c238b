"""`ga run`: one worker on one task, with a run directory like a one-task fan-out."""
from __future__ import annotations

import secrets
import time
from pathlib import Path
from typing import Any, Callable, Optional

from configs import Settings
from worker.agent import Worker
from worker.models import nested_model_env
from worker.types import WorkerResult


def new_id(prefix: str) -> str:
    return f"{prefix}-{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(3)}"


def open_store(settings: Settings) -> Any:
    from memory_shared import MemoryStore

    return MemoryStore(settings.memory_root, create=True, l1_max_lines=settings.memory.l1_max_lines,
                       l1_max_chars=settings.memory.l1_max_chars)


def run_one(task: str, settings: Settings, *, model_name: Optional[str] = None, workdir: Optional[Path] = None,
            interactive: bool = False, ask: Optional[Callable[[str, list[str]], str]] = None,
            on_turn: Optional[Callable[[dict], None]] = None, env: Optional[dict[str, str]] = None) -> WorkerResult:
    """Run `task` in `workdir` (default: the current directory); history under <runs_dir>/<id>/."""
    task_id = new_id("run")
    task_dir = Path(settings.fanout.runs_dir).resolve() / task_id / "tasks" / task_id
    worker = Worker(task, task_id=task_id, workdir=(workdir or Path.cwd()).resolve(), settings=settings,
                    history_path=task_dir / "history.jsonl", model_name=model_name, store=open_store(settings),
                    interactive=interactive, ask=ask, on_turn=on_turn, env=env)
    worker.env = {**nested_model_env(model_name or settings.worker.model, worker.model.config), **worker.env}
    result = worker.run()
    (task_dir / "answer.md").write_text(result.answer + "\n", encoding="utf-8")
    return result
