"""Run one worker task for a daemon (reflect, schedule) and turn the outcome into a log record."""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Mapping, Optional, TypedDict

import structlog

from configs import Settings
from configs.logs import redact_text
from memory_shared import MemoryStoreError
from orchestrator.triggers.activity import Clock, local_now, user_job
from worker.model import ModelError
from worker.modelconfig import ModelConfigError
from worker.oneshot import run_one

log = structlog.get_logger("ga.daemon")
ANSWER_CHARS = 2000
DaemonRecord = dict[str, object]  # a reflect or schedule log line: its time, event and what it says (shown, kept)


class _RunEnd(TypedDict):
    status: str
    started: str  # ISO time


class TriggeredRun(_RunEnd, total=False):
    """How a task (or a scheduled built-in job) a trigger started ended: in its log line and its summary."""

    reason: str
    seconds: float
    task_id: str
    turns: int
    tokens: int
    cost: float
    answer: str  # cut at ANSWER_CHARS
    history: str
    builtin: str  # a built-in job's name, and what it did
    compressed: int
    months_dropped: list[str]  # the months folded into a summary


def run_task(task: str, settings: Settings, *, kind: str, model_name: Optional[str] = None,
             workdir: Optional[Path] = None, now: Optional[Clock] = None) -> TriggeredRun:
    """Run `task` with worker.oneshot.run_one; never raises for a model or config problem (status failed)."""
    clock = now or local_now
    started = clock()
    if settings.sandbox.mode == "off":  # reflect and scheduled tasks run model-written code unattended
        log.warning("sandbox_off", kind=kind, note="code_run runs unsandboxed (sandbox.mode: off)")
    try:
        with user_job(settings.home_dir, kind, now=clock):
            result = run_one(task, settings, model_name=model_name, workdir=workdir, origin=kind)
    except (ModelConfigError, ModelError, MemoryStoreError, OSError) as exc:
        return {"status": "failed", "reason": redact_text(str(exc)), "started": started.isoformat(),
                "seconds": round((clock() - started).total_seconds(), 3)}
    answer = redact_text(result.answer)
    return {"status": result.status, "task_id": result.task_id, "turns": result.turns,
            "tokens": result.usage.total, "cost": result.usage.cost, "reason": result.reason,
            "answer": answer if len(answer) <= ANSWER_CHARS else answer[:ANSWER_CHARS] + " [...]",
            "history": str(result.history_path), "started": started.isoformat(),
            "seconds": round((clock() - started).total_seconds(), 3)}


def append_jsonl(path: Path, record: Mapping[str, object]) -> None:
    """One O_APPEND write per line, fsynced: concurrent writers never interleave, a crash loses no line."""
    path.parent.mkdir(parents=True, exist_ok=True)
    data = (json.dumps(record, default=str) + "\n").encode()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
