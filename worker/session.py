"""A worker's tie to the memory tier: pin a snapshot at start, gate staged writes and archive at the end."""
from __future__ import annotations

from typing import Any, Optional

import structlog

from memory_shared import AccessLog, Archive, consolidate
from memory_shared.layers import render_l1
from worker.memview import MemoryView
from worker.types import WorkerResult

log = structlog.get_logger("worker.memory")


class MemorySession:
    """Context manager: the snapshot stays pinned for the whole task."""

    def __init__(self, store: Any, task_id: str, archive_keep_months: int = 12):
        self.store, self.task_id, self.archive_keep_months = store, task_id, archive_keep_months
        self.snapshot: Any = None
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

    def finish(self, result: WorkerResult, executions: list[Any]) -> Optional[int]:
        """Pass staged memory writes through the consolidation gate; archive the raw session (L4)."""
        if self.store is None:
            return None
        generation = None
        if self.view.changes:
            report = consolidate(self.store, self.view.changes, executions, task_id=self.task_id,
                                 task_succeeded=result.status == "succeeded", author=f"worker:{self.task_id}",
                                 base=self.snapshot.generation)
            for change, reason in report.refused:
                log.info("memory_change_refused", task=self.task_id, path=change.path, reason=reason)
            generation = report.generation
        if result.history_path.exists():
            Archive(self.store.root, keep_months=self.archive_keep_months).store_session(self.task_id, result.history_path)
        return generation
