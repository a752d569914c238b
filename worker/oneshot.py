"""`ga run`: one worker on one task (or a follow-up in a session), with a run directory like a one-task fan-out."""
from __future__ import annotations

import secrets
import shutil
import time
from pathlib import Path
from typing import Any, Callable, Optional

from configs import Settings
from worker import sessions
from worker.types import WorkerResult


def new_id(prefix: str) -> str:
    return f"{prefix}-{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(3)}"


def open_store(settings: Settings) -> Any:
    from memory_shared import MemoryStore

    return MemoryStore(settings.memory_root, create=True, l1_max_lines=settings.memory.l1_max_lines,
                       l1_max_chars=settings.memory.l1_max_chars)


def run_one(task: str, settings: Settings, *, model_name: Optional[str] = None, workdir: Optional[Path] = None,
            interactive: bool = False, ask: Optional[Callable[[str, list[str]], str]] = None,
            on_turn: Optional[Callable[[dict], None]] = None, continue_session: Optional[str] = None,
            on_text: Optional[Callable[[str], None]] = None) -> WorkerResult:
    """Run `task` in `workdir` (default: the current directory) as a new session (history under
    <runs_dir>/<id>/), or as a follow-up in the session `continue_session` (its directory and model,
    unless `model_name` names another)."""
    if continue_session is not None:
        session = sessions.find(settings, continue_session)
        if model_name:
            session = session.model_copy(update={"model": model_name})
    else:
        session = start_session(settings, task, model_name, workdir)
    try:
        worker = sessions.prepare(settings, task, session, resume=continue_session is not None,
                                  interactive=interactive, ask=ask, on_turn=on_turn, store=open_store(settings),
                                  on_text=on_text)
    except BaseException:  # a bad model, home or store: nothing ran, so no empty run directory stays
        if continue_session is None:
            shutil.rmtree(session.history_path.parents[2], ignore_errors=True)
        raise
    result = worker.run()
    sessions.record(settings, session, result)
    worker.history.write_beside("answer.md", result.answer + "\n")
    return result


def start_session(settings: Settings, task: str, model_name: Optional[str], workdir: Optional[Path]) -> sessions.Session:
    session_id = new_id("run")
    history = Path(settings.fanout.runs_dir).resolve() / session_id / "tasks" / session_id / "history.jsonl"
    session = sessions.new_session(settings, session_id, task, model_name or settings.worker.model,
                                   (workdir or Path.cwd()).resolve(), history)
    sessions.save(settings, session)
    return session
