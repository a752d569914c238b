"""The consolidation gate: what a task may keep of what it wrote to memory, and at what trust.

A staged change is screened first:
- refused when the task did not succeed, when it touches L0 (only a person writes L0), when it writes ga's
  own bookkeeping (.prov records, proposals/), or when no evidence or source came before it: a successful,
  non-trivial code_run (never `echo`, `true` or a file write), or a read of a web page or file;
- otherwise it is kept, at a trust level (memory_shared.provenance): `verified` when ga itself re-ran the
  procedure at that path and the output backed the claim (the caller did the re-run, GatePolicy.verified),
  `sourced` for a fact read from a page or file, else `proposed`. A pointer line in L1 is as trusted as the
  procedures it points to.
What is kept lands in the tree or waits in a proposal (memory_shared.proposals), as `memory.admit` says:
`auto` lands everything, `verified` (the default) lands what verified and holds the rest, `review` holds
everything. A commit that would rewrite too much of the tree (memory_shared.bounds) is held whole.

Everything that lands carries its provenance record; what is held is one proposals/<id>.json, in the same
ONE commit on the session's base generation (the store rebases it). Writes that only add lines are staged as
patches on an anchor line, so concurrent commits adding lines to L1 or L2 all land; a conflict is retried
on the new HEAD with a 3-way merge (memory_shared.merge), and what still conflicts is kept as a proposal,
so no learning is lost. With a `key`, a task that runs again commits nothing a second time.

Files with a known format are validated before a task's change to them commits, by the parser that ships
with the format: `skilltree.json` by memory_shared/skilltree_format.py (FORMATS).
"""
from __future__ import annotations

import difflib
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable, Literal, Optional

import structlog

from .bounds import Bounds, over_bound
from .errors import CommitConflict, FormatRefused, L1TooLarge, MemoryStoreError
from .handle import StoreHandle, TransactionHandle
from .layers import L0_DIR, L1_INDEX, L3_DIR, SKILLTREE
from .merge import merge
from .paths import check_rel
from .proposals import Proposal, ProposedChange
from .provenance import Record, Verification, digest, is_reserved, line_key, record_id, records_for
from .skilltree_format import parse as parse_skilltree
from .transaction import occurrences

log = structlog.get_logger("memory.gate")

TASK_FAILED = "task did not succeed"
NO_EVIDENCE = ("no evidence before this change: a successful code_run that computes something (not echo, true or "
               "a file write), or a page or file it was read from")
L0_REFUSED = "only a person writes L0: a task's change to memory/L0/ is refused"
RESERVED = "provenance records (.<name>.<id>.prov) and proposals/ are ga's own: a task cannot write them"
Admit = Literal["review", "verified", "auto"]
ATTEMPTS = 6
# the files that have a format, each with its parser (which raises ValueError, one line, on bad text)
FORMATS: dict[str, Callable[[str], object]] = {SKILLTREE: parse_skilltree}


def format_problem(path: str, text: str) -> Optional[str]:
    """One line saying why `text` cannot be committed at `path`, or None when it is valid (or has no format)."""
    validator = FORMATS.get(path)
    if validator is None:
        return None
    try:
        validator(text)
    except ValueError as exc:
        return " ".join(str(exc).split()) or f"{path}: invalid"
    return None


@dataclass(frozen=True)
class Execution:
    """One tool execution of the session, in order. `evidence`: a successful run that verifies something (a
    non-trivial code_run); `source`: what it read ({"url": ...} or {"file": ...}), a fact's source."""
    seq: int
    call_id: str
    tool: str
    ok: bool
    evidence: bool
    exit_code: Optional[int] = None
    output_sha256: str = ""
    source: Optional[dict[str, str]] = None


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


@dataclass(frozen=True)
class GatePolicy:
    """How the gate treats what it keeps. `verified`: ga's re-run of each procedure, by memory path; `who`:
    run, task, attempt, model; `reads`: memory paths the task read; `base_tree`: the task's pinned tree."""
    admit: Admit = "auto"
    bounds: Bounds = Bounds()
    verified: dict[str, Verification] = field(default_factory=dict)
    who: dict[str, object] = field(default_factory=dict)
    reads: tuple[str, ...] = ()
    base_tree: Optional[Path] = None
    l3_files: Optional[int] = None  # files under L3/ before the commit (default: counted in base_tree)


@dataclass
class GateReport:
    generation: Optional[int]
    accepted: list[StagedChange] = field(default_factory=list)           # landed in the tree
    refused: list[tuple[StagedChange, str]] = field(default_factory=list)  # not kept
    already_committed: bool = False  # the key's commit was made before: `generation` is that one's
    held: list[tuple[StagedChange, str]] = field(default_factory=list)   # kept in a proposal, with why
    proposal: Optional[str] = None
    trust: dict[str, str] = field(default_factory=dict)                 # path -> trust of what landed

    def outcome(self) -> dict[str, object]:
        """What a task kept, for its TaskRecord and the run's summary: committed, proposed, refused paths."""
        return {"generation": self.generation, "committed": sorted({c.path for c in self.accepted}),
                "proposed": sorted({c.path for c, _ in self.held}), "proposal": self.proposal,
                "refused": [{"path": c.path, "reason": r} for c, r in self.refused],
                **({"already_committed": True} if self.already_committed else {})}


@dataclass
class _Path:
    """One path's change: the text the task saw, the text it wants, and how to stage it."""
    path: str
    changes: list[StagedChange]
    before: Optional[str]
    after: Optional[str]
    trust: str = "proposed"
    held: str = ""  # why it waits for review ("" when it lands)
    merged: bool = False  # `after` was merged onto a newer HEAD after a conflict


def consolidate(store: StoreHandle, changes: list[StagedChange], executions: list[Execution], *, task_id: str,
                task_succeeded: bool, author: str, base: int, key: Optional[str] = None,
                policy: Optional[GatePolicy] = None) -> GateReport:
    """Keep what may be kept (module doc) in one commit based on `base`; refuse the rest, each with its reason.

    A change the store cannot stage (bad path, patch anchor not unique, ...) is refused alone; a refusal at
    commit time (L1TooLarge, FormatRefused: a file of a known format such as skilltree.json that would be
    committed invalid) refuses every change: no partial commit."""
    policy = policy or GatePolicy()
    report = GateReport(None)
    candidates = _screen(changes, executions, task_succeeded, report)
    if candidates:
        _commit(store, candidates, executions, report, policy, task_id=task_id, author=author, base=base, key=key)
    for change, reason in report.refused:
        log.info("memory_change_refused", task_id=task_id, path=change.path, op=change.op,
                 call_id=change.call_id, reason=reason)
    for change, reason in report.held:
        log.info("memory_change_proposed", task_id=task_id, path=change.path, proposal=report.proposal, reason=reason)
    if report.already_committed:
        log.info("memory_commit_already_made", task_id=task_id, key=key, generation=report.generation)
    elif report.generation is not None:
        log.info("memory_consolidated", task_id=task_id, generation=report.generation,
                 paths=[c.path for c in report.accepted], proposal=report.proposal)
    return report


def _screen(changes: list[StagedChange], executions: list[Execution], task_succeeded: bool,
            report: GateReport) -> list[StagedChange]:
    backed = sorted(e.seq for e in executions if e.ok and (e.evidence or e.source))
    kept = []
    for change in sorted(changes, key=lambda c: c.seq):
        top = change.path.strip("/").split("/", 1)[0]
        if not task_succeeded:
            report.refused.append((change, TASK_FAILED))
        elif top == L0_DIR:
            report.refused.append((change, L0_REFUSED))
        elif is_reserved(change.path):
            report.refused.append((change, RESERVED))
        elif not any(seq < change.seq for seq in backed):
            report.refused.append((change, NO_EVIDENCE))
        else:
            kept.append(change)
    return kept


def _commit(store: StoreHandle, candidates: list[StagedChange], executions: list[Execution], report: GateReport,
            policy: GatePolicy, *, task_id: str, author: str, base: int, key: Optional[str]) -> None:
    paths: Optional[dict[str, _Path]] = None
    planned: list[tuple[StagedChange, str]] = []
    txn: Optional[TransactionHandle] = None
    for attempt in range(ATTEMPTS):
        try:
            with store.transaction(message=f"consolidate {task_id}", author=author,
                                   base=base if attempt == 0 else None, key=key) as txn:
                if txn.already_committed:  # this task ran before and its commit landed: nothing to stage
                    report.generation, report.already_committed = txn.generation, True
                    return
                if paths is None:
                    paths = _plan(txn, candidates, executions, report, policy)
                    planned = list(report.refused)
                    _check_formats(txn, list(paths.values()))  # held or landing: never kept invalid
                else:
                    report.refused = list(planned)
                    _merge_on_head(txn, paths)
                if not paths:
                    txn.abort()
                    return
                landed = _stage(txn, paths, executions, policy, report, key or f"{author}/{time.time()}")
                _check_formats(txn, landed)
                txn.message = _message(task_id, landed, report.proposal, executions)
        except CommitConflict:
            if attempt < ATTEMPTS - 1 and paths is not None:
                report.proposal, report.accepted = None, []
                if attempt == ATTEMPTS - 2:  # the last try commits the proposal alone: a new file always lands
                    for entry in paths.values():
                        entry.held = entry.held or "HEAD kept moving under this commit (kept for review)"
                continue  # again on the new HEAD: what changed underneath is merged, what conflicts is held
            reason = "CommitConflict: kept trying on a moving HEAD"
            report.refused += [(c, reason) for c in candidates if all(c is not r for r, _ in report.refused)]
            return
        except L1TooLarge as exc:  # the index is full: the rest lands, the pointer waits for a person
            l1 = paths.get(L1_INDEX) if paths is not None else None
            if l1 is not None and not l1.held and attempt < ATTEMPTS - 1:
                l1.held = f"L1 is full, kept for review: {exc}"
                report.refused = list(planned)
                continue
            _refuse_all(report, candidates, f"{type(exc).__name__}: {exc}")
            return
        except MemoryStoreError as exc:
            _refuse_all(report, candidates, f"{type(exc).__name__}: {exc}")
            return
        break
    if txn is None:
        return
    report.generation, report.already_committed = txn.generation, txn.already_committed
    if txn.already_committed:
        report.accepted, report.held, report.proposal = [], [], None


def _refuse_all(report: GateReport, candidates: list[StagedChange], reason: str) -> None:
    already = {id(change) for change, _ in report.refused}
    report.refused += [(change, reason) for change in candidates if id(change) not in already]
    report.accepted, report.held, report.proposal = [], [], None


def _plan(txn: TransactionHandle, candidates: list[StagedChange], executions: list[Execution], report: GateReport,
          policy: GatePolicy) -> dict[str, _Path]:
    """Each path's text before and after (a change that cannot apply is refused alone), its trust, and
    whether it lands or waits (memory.admit, the bounds)."""
    paths: dict[str, _Path] = {}
    for change in candidates:
        try:
            rel = check_rel(change.path)
            entry = paths.get(rel)
            if entry is None:
                before = txn.read(rel)
                entry = _Path(rel, [], before, before)
            entry.after = _applied(entry.after, change)
        except (ValueError, TypeError) as exc:
            report.refused.append((change, str(exc)))
            continue
        entry.changes.append(change)
        paths[rel] = entry
    for entry in paths.values():
        entry.trust = _trust(entry, executions, policy)
    paths = {p: e for p, e in paths.items() if e.after != e.before}  # a write of the same text changes nothing
    held_why = {"review": "memory.admit is review: a person accepts it first",
                "verified": "not verified: memory.admit is verified (ga re-runs a procedure to verify it)"}
    for entry in paths.values():
        if policy.admit == "review" or (policy.admit == "verified" and entry.trust != "verified"):
            entry.held = held_why[policy.admit]
    rewrites_l3 = any(p.startswith(L3_DIR + "/") and e.before is not None for p, e in paths.items())
    l3_files = policy.l3_files if policy.l3_files is not None else _count_l3(policy.base_tree) if rewrites_l3 else 0
    too_much = over_bound({p: (e.before, e.after) for p, e in paths.items()}, l3_files, policy.bounds)
    if too_much:
        for entry in paths.values():
            entry.held = f"waits for review: {too_much}"
    return paths


def _applied(text: Optional[str], change: StagedChange) -> Optional[str]:
    if change.op == "write":
        if not isinstance(change.text, str) and change.text is not None:
            raise TypeError(f"write {change.path}: text must be str")
        return change.text or ""
    if change.op == "patch":
        old, new = change.old or "", change.new or ""
        if text is None:
            raise ValueError(f"patch {change.path}: no such file in the memory store; write it first")
        if not old:
            raise ValueError(f"patch {change.path}: the old text is empty; give an anchor that occurs exactly once")
        found = occurrences(text, old)
        if found != 1:
            raise ValueError(f"patch {change.path}: old text has {'0 matches' if not found else '2 or more matches'}, "
                             "it must occur exactly once")
        return text.replace(old, new, 1)
    if change.op == "delete":
        if text is None:
            raise ValueError(f"delete {change.path}: no such file in the memory store")
        return None
    raise ValueError(f"unknown memory change op {change.op!r}")


def _is_procedure(path: str) -> bool:
    return path.startswith(L3_DIR + "/") and (path.endswith(".md") or "/scripts/" in f"/{path}")


def _trust(entry: _Path, executions: list[Execution], policy: GatePolicy) -> str:
    """verified, sourced or proposed (provenance module doc)."""
    if entry.after is None:
        return "proposed"
    if _is_procedure(entry.path):
        check = policy.verified.get(entry.path)
        return "verified" if check is not None and check.verified else "proposed"
    if entry.path == L1_INDEX:
        added = _added(entry.before, entry.after)
        pointed = [_pointed(line) for line in added]
        if added and all(p and all(_verified(policy, x) for x in p) for p in pointed):
            return "verified"
        return "proposed"
    first = min(c.seq for c in entry.changes)
    if any(e.ok and e.source and e.seq < first for e in executions):
        return "sourced"
    return "proposed"


def _verified(policy: GatePolicy, path: str) -> bool:
    check = policy.verified.get(path)
    return check is not None and check.verified


def _pointed(line: str) -> list[str]:
    return [word.strip("`'\"(),;:") for word in line.split() if word.strip("`'\"(),;:").startswith(L3_DIR + "/")
            and word.strip("`'\"(),;:").endswith(".md")]


def _added(before: Optional[str], after: Optional[str]) -> list[str]:
    old = set(line.strip() for line in (before or "").splitlines())
    return [line for line in (after or "").splitlines() if line.strip() and line.strip() not in old]


def _merge_on_head(txn: TransactionHandle, paths: dict[str, _Path]) -> None:
    """After a conflict: each landing path's change merged with what HEAD has now; what conflicts waits."""
    for entry in paths.values():
        if entry.held:
            continue
        theirs = txn.read(entry.path)
        clean, merged = merge(entry.before, entry.after, theirs)
        if clean:
            entry.before, entry.after, entry.merged = theirs, merged, True
        else:
            entry.held = "conflicts with a change another task committed meanwhile (kept for review)"


def _stage(txn: TransactionHandle, paths: dict[str, _Path], executions: list[Execution], policy: GatePolicy,
           report: GateReport, key: str) -> list[_Path]:
    """Stage what lands with its records, and one proposal with what waits; return what landed."""
    landed: list[_Path] = []
    held: list[_Path] = []
    report.accepted, report.held, report.trust = [], [], {}
    for entry in paths.values():
        if entry.held:
            held.append(entry)
            continue
        try:
            _stage_text(txn, entry)
        except (ValueError, TypeError) as exc:  # the store refuses the path (reserved, outside the tree, ...)
            report.refused += [(c, str(exc)) for c in entry.changes]
            continue
        if entry.after is not None:
            record = _record(entry, executions, policy, key)
            if record is not None:
                txn.write(record.rel, record.to_text())
            _prune(txn, entry, policy)
        landed.append(entry)
        report.accepted += entry.changes
        report.trust[entry.path] = entry.trust
    if held:
        proposal = Proposal(id=record_id(key, "proposal")[:12], reason=held[0].held, who=_who(policy),
                            base=txn.base, time=time.time(),
                            changes=[asdict(_proposed(e)) for e in held],
                            records=[asdict(r) for e in held if (r := _record(e, executions, policy, key))])
        txn.write(proposal.rel, proposal.to_text())
        report.proposal = proposal.id
        report.held = [(c, e.held) for e in held for c in e.changes]
    return landed


def _proposed(entry: _Path) -> ProposedChange:
    if entry.after is None:
        return ProposedChange("delete", entry.path, base_text=entry.before, trust=entry.trust)
    return ProposedChange("write", entry.path, text=entry.after, base_text=entry.before, trust=entry.trust)


def _stage_text(txn: TransactionHandle, entry: _Path) -> None:
    """Patches as patches, additions as patches on an anchor line (both replay on a newer HEAD), else a write."""
    if entry.after is None:
        txn.delete(entry.path)
        return
    current = txn.read(entry.path)
    if current is not None and not entry.merged and all(c.op == "patch" for c in entry.changes) \
            and current == entry.before:
        for change in entry.changes:
            txn.patch(entry.path, change.old or "", change.new or "")
        return
    patches = _as_patches(current, entry.after) if current == entry.before else None
    if patches:
        for old, new in patches:
            txn.patch(entry.path, old, new)
    else:
        txn.write(entry.path, entry.after)


def _as_patches(before: Optional[str], after: str) -> Optional[list[tuple[str, str]]]:
    """`after` as patches of `before` anchored on whole lines, when it only adds lines; else None."""
    if not before or not before.endswith("\n"):
        return None
    old_lines, new_lines = before.splitlines(True), after.splitlines(True)
    if not after.endswith("\n"):
        return None
    patches: list[tuple[str, str]] = []
    text = before
    ops = difflib.SequenceMatcher(a=old_lines, b=new_lines, autojunk=False).get_opcodes()
    for tag, i1, _i2, j1, j2 in ops:
        if tag == "equal":
            continue
        if tag != "insert":
            return None
        inserted = "".join(new_lines[j1:j2])
        anchor = "".join(old_lines[i1 - 1:i1]) if i1 > 0 else old_lines[0]
        if occurrences(text, anchor) != 1 or (i1 > 0 and occurrences(text, anchor + inserted) > 0):
            return None
        new = anchor + inserted if i1 > 0 else inserted + anchor
        patches.append((anchor, new))
        text = text.replace(anchor, new, 1)
    return patches if text == after else None


def _who(policy: GatePolicy) -> dict[str, object]:
    return {k: v for k, v in policy.who.items() if v is not None}


def _record(entry: _Path, executions: list[Execution], policy: GatePolicy, key: str) -> Optional[Record]:
    first = min(c.seq for c in entry.changes)
    before = [e for e in executions if e.seq < first]
    backs = [{"tool": e.tool, "call": e.call_id, "ok": e.ok, "exit_code": e.exit_code,
              "output_sha256": e.output_sha256, "evidence": e.evidence} for e in before
             if e.evidence or e.tool == "code_run"][-20:]
    read = [dict(e.source) for e in before if e.source][-20:] + [{"memory": m} for m in policy.reads[:20]]
    check = policy.verified.get(entry.path)
    record = Record(id=record_id(key, entry.path), path=entry.path, scope="file", trust=entry.trust,
                    who=_who(policy), backs=backs, read=read, time=time.time(),
                    verification=asdict(check) if check is not None else None)
    text = entry.after or ""
    if _line_file(entry.path):
        added = _added(entry.before, text)
        if not added:
            return None
        record.scope = "lines"
        record.lines = [{"sha256": line_key(line), "text": line.strip()[:300]} for line in added]
        if entry.path == L1_INDEX:
            record.verification = _pointer_check(added, policy)
    else:
        record.file_sha256 = digest(text)
    return record


def _pointer_check(lines: list[str], policy: GatePolicy) -> Optional[dict[str, object]]:
    pointed = sorted({p for line in lines for p in _pointed(line)})
    checks = [policy.verified[p] for p in pointed if p in policy.verified]
    if not checks:
        return None
    return {"verified": all(c.verified for c in checks), "why": "; ".join(f"{p}: {c.why}" for p, c in
                                                                         zip(pointed, checks, strict=False))}


def _line_file(path: str) -> bool:
    """Files whose entries are lines (the L1 index, L2 facts), not the file as a whole."""
    return path == L1_INDEX or (path.startswith("L2/") and path.endswith(".md"))


def _prune(txn: TransactionHandle, entry: _Path, policy: GatePolicy) -> None:
    """Drop the records (of the task's base tree) whose text is gone from this path (history keeps them)."""
    if policy.base_tree is None or entry.after is None:
        return
    lines = {line_key(line) for line in entry.after.splitlines() if line.strip()}
    for record in records_for(policy.base_tree, entry.path):
        if record.scope == "file":
            stale = record.file_sha256 != digest(entry.after)
        else:
            stale = not any(line.get("sha256") in lines for line in record.lines)
        if stale and txn.read(record.rel) is not None:
            txn.delete(record.rel)


def _count_l3(tree: Optional[Path]) -> int:
    if tree is None:
        return 0
    base = Path(tree) / L3_DIR
    return sum(len([n for n in names if not n.startswith(".")]) for _, _, names in os.walk(base, followlinks=True))


def _check_formats(txn: TransactionHandle, landed: list[_Path]) -> None:
    """Raise FormatRefused when a file of a known format would be committed invalid."""
    for entry in sorted(landed, key=lambda e: e.path):
        if entry.path not in FORMATS or entry.after is None:
            continue
        problem = format_problem(entry.path, entry.after)
        if problem is not None:
            raise FormatRefused(problem)


def _message(task_id: str, landed: list[_Path], proposal: Optional[str], executions: list[Execution]) -> str:
    last = max((c.seq for e in landed for c in e.changes), default=max((e.seq for e in executions), default=0) + 1)
    evidence = [e.call_id for e in executions if e.ok and (e.evidence or e.source) and e.seq < last]
    count = sum(len(e.changes) for e in landed)
    lines = [f"consolidate {task_id}: {count} change(s); evidence: task {task_id}, calls {', '.join(evidence)}"
             + (f"; proposal {proposal} waits for review" if proposal else "")]
    lines += [f"{c.op} {c.path} (call {c.call_id}; {e.trust})" for e in landed for c in e.changes]
    return "\n".join(lines)
