"""A worker's tie to the memory tier: pin a snapshot at start, gate staged writes and archive at the end."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import structlog

from memory_shared import AccessLog, Archive, SnapshotHandle, StoreHandle, consolidate
from memory_shared.fsutil import Unsafe
from memory_shared.layers import render_l1
from worker.memview import MemoryView
from worker.record import TaskRecord

log = structlog.get_logger("worker.memory")


class MemorySession:
    """Context manager: the snapshot stays pinned for the whole task."""

    def __init__(self, store: Optional[StoreHandle], task_id: str, archive_keep_months: int = 12,
                 commit_key: Optional[str] = None):
        self.store, self.task_id, self.archive_keep_months = store, task_id, archive_keep_months
        self.commit_key = commit_key  # (run, task, attempt) of a fan-out task: its commit is made once
        self.snapshot: Optional[SnapshotHandle] = None
        self.view: MemoryView
        self.l1_text = ""

    def __enter__(self) -> "MemorySession":
        if self.store is None:
            self.view = MemoryView(None, None, self.task_id, None)
            return self
        self.snapshot = self.store.snapshot()  # pinned until __exit__ releases it
        self.view = MemoryView(self.store, self.snapshot, self.task_id, AccessLog(self.store.root))
        self.l1_text = render_l1(self.snapshot.path)
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.snapshot is not None:
            self.snapshot.release()

    def finish(self, result: TaskRecord, executions: list[Any]) -> Optional[int]:
        """Pass staged memory writes through the consolidation gate; archive the raw session (L4)."""
        if self.store is None or self.snapshot is None:
            return None
        generation = None
        author = f"worker:{self.task_id}" + (f" [{self.commit_key}]" if self.commit_key else "")
        if self.view.changes:  # with a commit key, a task that ran before and committed commits nothing again
            report = consolidate(self.store, self.view.changes, executions, task_id=self.task_id,
                                 task_succeeded=result.status == "succeeded", author=author,
                                 base=self.snapshot.generation, key=self.commit_key)
            for change, reason in report.refused:
                log.info("memory_change_refused", task=self.task_id, path=change.path, reason=reason)
            generation = report.generation
        history = Path(result.history_path) if result.history_path else None
        if history is not None and _recorded(history):
            try:
                Archive(self.store.root, keep_months=self.archive_keep_months).store_session(self.task_id, history)
            except Unsafe as exc:  # the task's code put something else at the history's path
                log.warning("history_not_archived", task=self.task_id, problem=str(exc))
        return generation


def _recorded(history: Path) -> bool:
    """Whether a turn ended (the history is created with the worker, empty until then)."""
    try:
        return history.lstat().st_size > 0
    except FileNotFoundError:
        return False
