"""A worker's tie to the memory tier: pin a snapshot at start, verify and gate staged writes and archive at the end.

At the end, every procedure the task staged (L3 SOPs and scripts) is re-run by ga itself (worker/procedures.py),
then the gate (memory_shared.gate) keeps what may be kept at its trust, under `memory.admit` and the bounds,
with its provenance: who (run, task, attempt, model), what backs it, what it read. `outcome` says, for the
task's record and the run's summary, what was committed, proposed or could not be kept.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import structlog

from configs import Settings
from memory_shared import AccessLog, Archive, SnapshotHandle, StoreHandle, consolidate
from memory_shared.bounds import Bounds
from memory_shared.fsutil import Unsafe
from memory_shared.gate import Admit, GatePolicy
from memory_shared.layers import render_l1
from memory_shared.provenance import Verification
from worker.memhints import present_l1
from worker.memview import MemoryView
from worker.procedures import procedure_paths, verify
from worker.record import TaskRecord

log = structlog.get_logger("worker.memory")


class MemorySession:
    """Context manager: the snapshot stays pinned for the whole task."""

    def __init__(self, store: Optional[StoreHandle], task_id: str, archive_keep_months: int = 12,
                 commit_key: Optional[str] = None, settings: Optional[Settings] = None, model: str = ""):
        self.store, self.task_id, self.archive_keep_months = store, task_id, archive_keep_months
        self.commit_key = commit_key  # (run, task, attempt) of a fan-out task: its commit is made once
        self.settings, self.model = settings, model
        self.admit: Admit = settings.memory.admit if settings is not None else "verified"
        self.snapshot: Optional[SnapshotHandle] = None
        self.view: MemoryView
        self.l1_text = ""
        self.outcome: Optional[dict[str, Any]] = None  # what the gate kept (GateReport.outcome), after finish()

    def __enter__(self) -> "MemorySession":
        if self.store is None:
            self.view = MemoryView(None, None, self.task_id, None, admit=self.admit)
            return self
        self.snapshot = self.store.snapshot()  # pinned until __exit__ releases it
        self.view = MemoryView(self.store, self.snapshot, self.task_id, AccessLog(self.store.root), admit=self.admit)
        tree = Path(self.snapshot.path)
        self.l1_text = present_l1(tree, render_l1(tree, self.store.l1_max_lines, self.store.l1_max_chars), self.admit)
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.snapshot is not None:
            self.snapshot.release()

    def finish(self, result: TaskRecord, executions: list[Any]) -> Optional[int]:
        """Verify, gate and commit staged memory writes; archive the raw session (L4)."""
        if self.store is None or self.snapshot is None:
            return None
        generation = None
        author = f"worker:{self.task_id}" + (f" [{self.commit_key}]" if self.commit_key else "")
        if self.view.changes:  # with a commit key, a task that ran before and committed commits nothing again
            succeeded = result.status == "succeeded"
            report = consolidate(self.store, self.view.changes, executions, task_id=self.task_id,
                                 task_succeeded=succeeded, author=author, base=self.snapshot.generation,
                                 key=self.commit_key, policy=self._policy(author, succeeded))
            for change, reason in report.refused:
                log.info("memory_change_refused", task=self.task_id, path=change.path, reason=reason)
            generation = report.generation
            self.outcome = report.outcome()
        history = Path(result.history_path) if result.history_path else None
        if history is not None and _recorded(history):
            try:
                Archive(self.store.root, keep_months=self.archive_keep_months).store_session(self.task_id, history)
            except Unsafe as exc:  # the task's code put something else at the history's path
                log.warning("history_not_archived", task=self.task_id, problem=str(exc))
        return generation

    def _policy(self, author: str, succeeded: bool) -> GatePolicy:
        settings = self.settings
        memory = settings.memory if settings is not None else None
        assert self.store is not None and self.snapshot is not None  # finish() checked both
        bounds = Bounds(memory.rewrite_share, memory.l1_task_share, self.store.l1_max_lines) if memory else Bounds()
        verified = self._verify() if succeeded else {}
        run, attempt = _key_parts(self.commit_key)
        who = {"author": author, "run": run, "task": self.task_id, "attempt": attempt, "model": self.model or None}
        return GatePolicy(admit=self.admit, bounds=bounds, verified=verified, who=who, reads=tuple(self.view.reads),
                          base_tree=Path(self.snapshot.path))

    def _verify(self) -> dict[str, Verification]:
        """ga's re-run of every procedure the task left staged (worker/procedures.py)."""
        found: dict[str, Verification] = {}
        staged = sorted({c.path for c in self.view.changes})
        timeout = float(self.settings.worker.code_timeout) if self.settings is not None else 60.0
        sandbox = self.settings.sandbox if self.settings is not None else None
        for path in procedure_paths(staged):
            text = self.view.current(path)
            if text is None:
                continue
            found[path] = verify(path, text, self.view.current, timeout=timeout, sandbox=sandbox)
            log.info("memory_procedure_checked", task=self.task_id, path=path, verified=found[path].verified,
                     why=found[path].why)
        return found


def _key_parts(key: Optional[str]) -> tuple[Optional[str], Optional[str]]:
    """(run, attempt) of a commit key run/task/attempt."""
    if not key or "/" not in key:
        return None, None
    run, _, rest = key.partition("/")
    return run, rest.rpartition("/")[2] or None


def _recorded(history: Path) -> bool:
    """Whether a turn ended (the history is created with the worker, empty until then)."""
    try:
        return history.lstat().st_size > 0
    except FileNotFoundError:
        return False
