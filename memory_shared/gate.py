"""The consolidation gate: "No Execution, No Memory".

A staged memory change is committed only if its task succeeded and at least one successful tool
execution that verifies something ran before the change was staged. Accepted changes land in ONE
transaction on the session's base generation (the store rebases it); refused changes are logged.
With a `key` (a fan-out task's run/task/attempt), a task that runs again commits nothing a second time.

Files with a known format are validated here before a task's change to them commits. memory_shared knows
which paths have a format (layers.SKILLTREE) but not the format itself: the layer that owns it registers a
validator, a callable that raises ValueError with a one-line message on bad text (skilltree/tree.py
registers its parser). Where none is registered in the process the check cannot be made, and a change to
the path is refused (fail closed).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Literal, Optional

import structlog

from memory_shared.errors import FormatRefused, MemoryStoreError
from memory_shared.handle import StoreHandle, TransactionHandle
from memory_shared.layers import SKILLTREE

log = structlog.get_logger("memory.gate")

TASK_FAILED = "task did not succeed"
NO_EVIDENCE = "no successful tool execution before this change"
KNOWN_FORMATS = frozenset({SKILLTREE})
_validators: dict[str, Callable[[str], object]] = {}


def register_format(path: str, validator: Callable[[str], object]) -> None:
    """Validate every gated change to `path` with `validator` (it raises ValueError on bad text)."""
    _validators[path] = validator


def format_problem(path: str, text: str) -> Optional[str]:
    """One line saying why `text` cannot be committed at `path`, or None when it is valid (or has no format)."""
    if not _has_format(path):
        return None
    validator = _validators.get(path)
    if validator is None:
        return (f"{path} has a format but no validator for it is loaded in this process, so it cannot be checked; "
                "change it from a `ga` command instead")
    try:
        validator(text)
    except ValueError as exc:
        return " ".join(str(exc).split()) or f"{path}: invalid"
    return None


@dataclass(frozen=True)
class Execution:
    """One tool execution of the session, in order. `evidence` is False for executions that verify
    nothing (memory writes themselves, checkpoints, ask_user, start_long_term_update)."""
    seq: int
    call_id: str
    tool: str
    ok: bool
    evidence: bool


@dataclass(frozen=True)
class StagedChange:
    """A memory change staged at execution `seq`; `path` is relative to the memory root."""
    seq: int
    call_id: str
    op: Literal["write", "patch", "delete"]
    path: str
    text: Optional[str] = None
    old: Optional[str] = None
    new: Optional[str] = None


@dataclass
class GateReport:
    generation: Optional[int]
    accepted: list[StagedChange] = field(default_factory=list)
    refused: list[tuple[StagedChange, str]] = field(default_factory=list)
    already_committed: bool = False  # the key's commit was made before: `generation` is that one's


def consolidate(store: StoreHandle, changes: list[StagedChange], executions: list[Execution], *, task_id: str,
                task_succeeded: bool, author: str, base: int, key: Optional[str] = None) -> GateReport:
    """Commit the changes that have evidence, in one transaction based on `base`; refuse the rest.

    A change the store refuses to stage (bad path, patch anchor not unique, ...) is refused alone;
    a refusal at commit time (CommitConflict, L1TooLarge, FormatRefused: a file of a known format such
    as skilltree.json that would be committed invalid) refuses every change: no partial commit.
    """
    proofs = sorted((e for e in executions if e.ok and e.evidence), key=lambda e: e.seq)
    candidates: list[StagedChange] = []
    refused: list[tuple[StagedChange, str]] = []
    for change in sorted(changes, key=lambda c: c.seq):
        if not task_succeeded:
            refused.append((change, TASK_FAILED))
        elif not any(proof.seq < change.seq for proof in proofs):
            refused.append((change, NO_EVIDENCE))
        else:
            candidates.append(change)
    report = GateReport(None, [], refused)
    if candidates:
        _commit(store, candidates, proofs, report, task_id=task_id, author=author, base=base, key=key)
    for change, reason in report.refused:
        log.info("memory_change_refused", task_id=task_id, path=change.path, op=change.op,
                 call_id=change.call_id, reason=reason)
    if report.already_committed:
        log.info("memory_commit_already_made", task_id=task_id, key=key, generation=report.generation)
    elif report.generation is not None:
        log.info("memory_consolidated", task_id=task_id, generation=report.generation,
                 paths=[c.path for c in report.accepted])
    return report


def _commit(store: StoreHandle, candidates: list[StagedChange], proofs: list[Execution], report: GateReport, *,
            task_id: str, author: str, base: int, key: Optional[str]) -> None:
    staged: list[StagedChange] = []
    try:
        with store.transaction(message=f"consolidate {task_id}", author=author, base=base, key=key) as txn:
            if txn.already_committed:  # this task ran before and its commit landed: nothing to stage
                report.generation, report.already_committed = txn.generation, True
                return
            for change in candidates:
                try:
                    _apply(txn, change)
                except (ValueError, TypeError) as exc:  # the store checks before staging anything
                    report.refused.append((change, str(exc)))
                    continue
                staged.append(change)
            if staged:
                _check_formats(txn, staged)
                last = max(c.seq for c in staged)
                txn.message = _message(task_id, staged, [p.call_id for p in proofs if p.seq < last])
    except MemoryStoreError as exc:
        reason = f"{type(exc).__name__}: {exc}"
        already = {id(change) for change, _ in report.refused}
        report.refused += [(change, reason) for change in candidates if id(change) not in already]
        return
    report.generation, report.already_committed = txn.generation, txn.already_committed
    report.accepted = [] if txn.already_committed else staged


def _check_formats(txn: TransactionHandle, staged: list[StagedChange]) -> None:
    """Raise FormatRefused when a file of a known format would be committed invalid. Its final
    text is the transaction's (paths resolved as the store resolves them); a store whose transactions
    cannot be read back (a remote one) is checked on the last whole write, and a patch there is refused."""
    staged_texts = getattr(txn, "staged", None)
    if staged_texts is not None:
        finals = {path: text for path, text in staged_texts.items() if _has_format(path)}
    else:
        finals = {}
        for change in staged:
            if _has_format(change.path):
                if change.op == "patch":
                    raise FormatRefused(f"{change.path}: a patch cannot be checked on this store; write it whole")
                finals[change.path] = change.text if change.op == "write" else None
    for path, text in sorted(finals.items()):
        problem = None if text is None else format_problem(path, text)
        if problem is not None:
            raise FormatRefused(problem)


def _has_format(path: str) -> bool:
    return path in KNOWN_FORMATS or path in _validators


def _message(task_id: str, accepted: list[StagedChange], evidence: list[str]) -> str:
    lines = [f"consolidate {task_id}: {len(accepted)} change(s); evidence: task {task_id}, calls {', '.join(evidence)}"]
    lines += [f"{c.op} {c.path} (call {c.call_id})" for c in accepted]
    return "\n".join(lines)


def _apply(txn: TransactionHandle, change: StagedChange) -> None:
    if change.op == "write":
        txn.write(change.path, change.text or "")
    elif change.op == "patch":
        txn.patch(change.path, change.old or "", change.new or "")
    elif change.op == "delete":
        txn.delete(change.path)
    else:
        raise ValueError(f"unknown memory change op {change.op!r}")
