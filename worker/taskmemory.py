"""A worker's tie to the memory tier: a snapshot held from start to end, verify and gate staged writes, and archive
the session of a task that used memory.

A task sees one generation for its whole life: the one HEAD was when it started, which its prompt's L1 index
comes from too. It pins nothing of its own: it holds a reference to that generation's one pin, which every task
of the process that starts while it is HEAD shares (memory_shared/shared.py), and its L1 text is rendered once
per such pin (so the system prompt is the same, byte for byte, for all of them). gc keeps the generation while
any of them runs. Only a task that used memory (read, listed or staged under memory/, opened long-term memory,
ran a stored procedure from $GA_MEMORY, or had something to commit) has its raw history archived (L4).

At the end of a task that succeeded, ga first distils it (worker/distill.py, `memory.distill`): the script of the
computing run behind its answer, an SOP naming it and an L1 pointer, staged beside the task's own writes. Every
procedure then staged (L3 SOPs and scripts) is re-run by ga itself (worker/procedures.py); a distilled one that
does not verify is dropped. Then the gate (memory_shared.gate) keeps what may be kept at its trust, under
`memory.admit` and the bounds, with its provenance: who (run, task, attempt, model), what backs it, what it read. `outcome` says, for the
task's record and the run's summary, what was committed, proposed or could not be kept.
"""
from __future__ import annotations

from datetime import date
from pathlib import Path
from typing import Optional, Sequence

import structlog

from configs import Settings
from memory_shared import AccessLog, Archive, SharedSnapshotHandle, StoreHandle, consolidate
from memory_shared.bounds import Bounds
from memory_shared.fsutil import Unsafe
from memory_shared.gate import Admit, Execution, GatePolicy, StagedChange
from memory_shared.layers import L1_INDEX, render_l1
from memory_shared.provenance import Verification
from worker.distill import Distillation, Ran, distil, reads_memory
from worker.memhints import present_l1
from worker.memview import MemoryView
from worker.procedures import procedure_paths, verify
from worker.record import TaskRecord

log = structlog.get_logger("worker.memory")


class MemorySession:
    """Context manager: the task's generation (HEAD at its start) stays pinned for the whole task."""

    def __init__(self, store: Optional[StoreHandle], task_id: str, archive_keep_months: int = 12,
                 commit_key: Optional[str] = None, settings: Optional[Settings] = None, model: str = ""):
        self.store, self.task_id, self.archive_keep_months = store, task_id, archive_keep_months
        self.commit_key = commit_key  # (run, task, attempt) of a fan-out task: its commit is made once
        self.settings, self.model = settings, model
        self.admit: Admit = settings.memory.admit if settings is not None else "verified"
        self.snapshot: Optional[SharedSnapshotHandle] = None
        self.view: MemoryView
        self.l1_text = ""
        self.outcome: Optional[dict[str, object]] = None  # what the gate kept (GateReport.outcome), after finish()

    def __enter__(self) -> "MemorySession":
        if self.store is None:
            self.view = MemoryView(None, None, self.task_id, None, admit=self.admit)
            return self
        snapshot = self.snapshot = self.store.shared_snapshot()  # held until __exit__ releases it
        self.view = MemoryView(self.store, snapshot, self.task_id, AccessLog(self.store.root), admit=self.admit)
        store, admit, tree = self.store, self.admit, Path(snapshot.path)
        self.l1_text = snapshot.derived(f"l1 admit={admit}", lambda: present_l1(
            tree, render_l1(tree, store.l1_max_lines, store.l1_max_chars), admit))
        return self

    def __exit__(self, *exc: object) -> None:
        if self.snapshot is not None:
            self.snapshot.release()

    def finish(self, result: TaskRecord, executions: list[Execution], ran: Sequence[Ran] = (), task: str = "") -> Optional[int]:
        """Distil, verify, gate and commit staged memory writes; archive the raw session (L4). `ran`: the task's
        tool calls that ran, in order, and `task` its text (what ga distils from)."""
        if self.store is None or self.snapshot is None:
            return None
        generation = None
        author = f"worker:{self.task_id}" + (f" [{self.commit_key}]" if self.commit_key else "")
        succeeded = result.status == "succeeded"
        own = self.view.changes
        distilled = self._distil(result, ran, task, own) if succeeded else None
        verified = self._verify(own, distilled) if succeeded else {}
        if distilled is not None and not verified[distilled.sop_path].verified:
            log.info("memory_not_distilled", task=self.task_id, path=distilled.sop_path,
                     why=verified[distilled.sop_path].why)
            for path in distilled.files:
                verified.pop(path, None)
            distilled = None
        bound = (self.store.l1_max_lines, self.store.l1_max_chars)
        changes = own + (distilled.changes(self.view.current(L1_INDEX), len(executions) + 1, bound) if distilled else [])
        if changes:  # with a commit key, a task that ran before and committed commits nothing again
            report = consolidate(self.store, changes, executions, task_id=self.task_id,
                                 task_succeeded=succeeded, author=author, base=self.snapshot.generation,
                                 key=self.commit_key, policy=self._policy(author, verified))
            for change, reason in report.refused:
                log.info("memory_change_refused", task=self.task_id, path=change.path, reason=reason)
            generation = report.generation
            self.outcome = report.outcome()
            if distilled is not None:
                self.outcome["distilled"] = distilled.sop_path
        history = Path(result.history_path) if result.history_path else None
        if history is not None and (self.view.used or changes or _ran_stored(ran)) and _recorded(history):
            try:
                Archive(self.store.root, keep_months=self.archive_keep_months).store_session(self.task_id, history)
            except Unsafe as exc:  # the task's code put something else at the history's path
                log.warning("history_not_archived", task=self.task_id, problem=str(exc))
        return generation

    def _distil(self, result: TaskRecord, ran: Sequence[Ran], task: str,
                own: list[StagedChange]) -> Optional[Distillation]:
        """ga's distillation of the task (worker/distill.py), unless it is off or the task staged L1 or L3 itself."""
        if self.settings is None or not self.settings.memory.distill or not task:
            return None
        if any(c.path == L1_INDEX or c.path.startswith("L3/") for c in own):
            return None  # the model distilled the task itself
        found, why = distil(task, result.answer or "", ran, turns=result.turns, today=date.today(),
                            exists=lambda path: self.view.current(path) is not None)
        if found is None:
            log.info("memory_not_distilled", task=self.task_id, why=why)
        return found

    def _policy(self, author: str, verified: dict[str, Verification]) -> GatePolicy:
        settings = self.settings
        memory = settings.memory if settings is not None else None
        assert self.store is not None and self.snapshot is not None  # finish() checked both
        bounds = Bounds(memory.rewrite_share, memory.l1_task_share, self.store.l1_max_lines) if memory else Bounds()
        run, attempt = _key_parts(self.commit_key)
        who = {"author": author, "run": run, "task": self.task_id, "attempt": attempt, "model": self.model or None}
        return GatePolicy(admit=self.admit, bounds=bounds, verified=verified, who=who, reads=tuple(self.view.reads),
                          base_tree=Path(self.snapshot.path))

    def _verify(self, own: list[StagedChange], distilled: Optional[Distillation]) -> dict[str, Verification]:
        """ga's re-run of every procedure the task left staged and of the one ga distilled (worker/procedures.py)."""
        found: dict[str, Verification] = {}
        files = distilled.files if distilled is not None else {}

        def read(path: str) -> Optional[str]:
            return files[path] if path in files else self.view.current(path)

        # the distilled script is re-run once, for its SOP (whose expect: the output must hold); the verdict is the
        # script's too
        staged = sorted({c.path for c in own} | (set(files) - ({distilled.script_path} if distilled else set())))
        timeout = float(self.settings.worker.code_timeout) if self.settings is not None else 60.0
        sandbox = self.settings.sandbox if self.settings is not None else None
        for path in procedure_paths(staged):
            text = read(path)
            if text is None:
                continue
            found[path] = verify(path, text, read, timeout=timeout, sandbox=sandbox)
            log.info("memory_procedure_checked", task=self.task_id, path=path, verified=found[path].verified,
                     why=found[path].why)
        if distilled is not None:
            found[distilled.script_path] = found[distilled.sop_path]
        return found


def _key_parts(key: Optional[str]) -> tuple[Optional[str], Optional[str]]:
    """(run, attempt) of a commit key run/task/attempt."""
    if not key or "/" not in key:
        return None, None
    run, _, rest = key.partition("/")
    return run, rest.rpartition("/")[2] or None


def _ran_stored(ran: Sequence[Ran]) -> bool:
    """Whether a code_run of the task named memory ($GA_MEMORY, memory/): a stored procedure, read in the sandbox."""
    return any(r.tool == "code_run" and reads_memory(str(r.arguments.get("script", ""))) for r in ran)


def _recorded(history: Path) -> bool:
    """Whether a turn ended (the history is created with the worker, empty until then)."""
    try:
        return history.lstat().st_size > 0
    except FileNotFoundError:
        return False
