"""The consolidation gate: "No Execution, No Memory".

A staged memory change is committed only if its task succeeded and at least one successful tool
execution that verifies something ran before the change was staged. Accepted changes land in ONE
transaction on the session's base generation (the store rebases it); refused changes are logged.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, Optional

import structlog

from memory_shared.store import CommitConflict, L1TooLarge, PathRefused

log = structlog.get_logger("memory.gate")

TASK_FAILED = "task did not succeed"
NO_EVIDENCE = "no successful tool execution before this change"


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


def consolidate(store: Any, changes: list[StagedChange], executions: list[Execution], *, task_id: str,
                task_succeeded: bool, author: str, base: int) -> GateReport:
    """Commit the changes that have evidence, in one transaction based on `base`; refuse the rest."""
    proofs = sorted((e for e in executions if e.ok and e.evidence), key=lambda e: e.seq)
    accepted: list[StagedChange] = []
    refused: list[tuple[StagedChange, str]] = []
    for change in sorted(changes, key=lambda c: c.seq):
        if not task_succeeded:
            refused.append((change, TASK_FAILED))
        elif not any(proof.seq < change.seq for proof in proofs):
            refused.append((change, NO_EVIDENCE))
        else:
            accepted.append(change)
    report = GateReport(None, [], refused)
    if accepted:
        evidence = [p.call_id for p in proofs if p.seq < max(c.seq for c in accepted)]
        try:
            with store.transaction(message=_message(task_id, accepted, evidence), author=author, base=base) as txn:
                for change in accepted:
                    _apply(txn, change)
            report.generation = txn.generation
            report.accepted = accepted
        except (CommitConflict, L1TooLarge, PathRefused, PatchFailed) as exc:
            reason = f"{type(exc).__name__}: {exc}"
            report.refused = refused + [(change, reason) for change in accepted]
    for change, reason in report.refused:
        log.info("memory change refused", task_id=task_id, path=change.path, op=change.op,
                 call_id=change.call_id, reason=reason)
    if report.generation is not None:
        log.info("memory consolidated", task_id=task_id, generation=report.generation,
                 paths=[c.path for c in report.accepted])
    return report


def _message(task_id: str, accepted: list[StagedChange], evidence: list[str]) -> str:
    lines = [f"consolidate {task_id}: {len(accepted)} change(s); evidence: task {task_id}, calls {', '.join(evidence)}"]
    lines += [f"{c.op} {c.path} (call {c.call_id})" for c in accepted]
    return "\n".join(lines)


def _apply(txn: Any, change: StagedChange) -> None:
    if change.op == "write":
        txn.write(change.path, change.text or "")
    elif change.op == "patch":
        txn.patch(change.path, change.old or "", change.new or "")
    elif change.op == "delete":
        txn.delete(change.path)
    else:
        raise ValueError(f"unknown memory change op {change.op!r}")
